package collector

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/pgactivity"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/sqlcomment/comment"
	"github.com/qtop-dev/qtop/store"
)

// Bounds of the sampler's runaway state.
const (
	maxRunawaySeen  = 8192
	maxRunawayWatch = 4096
	signalTimeout   = 2 * time.Second
)

// samplerRunaway is the runaway state of the pg_stat_activity sampler:
// the statements it acted on (pid + query_start), so that it acts once
// per statement, and the watch list of the rules' cool-downs. Only the
// sampler's goroutine uses it.
type samplerRunaway struct {
	seen  map[runawayKey]struct{}
	watch map[runawayWatchKey]time.Time
}

type runawayKey struct {
	pid   int32
	start int64 // query_start, µs
}

type runawayWatchKey struct {
	rule  string
	shape uint64
}

// The statements that signal exactly the statement the sampler saw, in
// one server-side statement: a backend whose query_start changed runs
// another statement and is left alone.
const (
	cancelExact = `SELECT pg_cancel_backend(a.pid) FROM pg_stat_activity a
WHERE a.pid = $1 AND a.query_start = $2 AND a.state = 'active' AND a.pid <> pg_backend_pid()`
	terminateExact = `SELECT pg_terminate_backend(a.pid) FROM pg_stat_activity a
WHERE a.pid = $1 AND a.query_start = $2 AND a.state = 'active' AND a.pid <> pg_backend_pid()`
)

// checkRunaway applies the policy's runaway rules to one sample: a
// statement of any client that matches a rule and has run longer than
// its after_seconds (or, under a cancel or terminate rule, whose shape is
// on the rule's watch list) is cancelled, terminated or only reported —
// each action once per statement, audited, logged and counted in the live
// view.
func (b *budgetPart) checkRunaway(ctx context.Context, pool *pgxpool.Pool, snap pgactivity.Snapshot) {
	var rules []policy.Runaway
	var version uint64
	b.pol.read(func(p *policy.Policy) {
		_, rules = p.ActiveBudgets(b.now())
		version = p.Version
	})
	sr := &b.sampler
	if len(rules) == 0 {
		sr.seen, sr.watch = nil, nil
		return
	}
	if sr.seen == nil {
		sr.seen, sr.watch = map[runawayKey]struct{}{}, map[runawayWatchKey]time.Time{}
	}
	now := snap.Time
	present := make(map[runawayKey]struct{}, len(snap.Backends))
	for i := range snap.Backends {
		be := &snap.Backends[i]
		if !be.Active() || be.LeaderPID != 0 || be.Hidden() || be.QueryStart.IsZero() {
			continue
		}
		key := runawayKey{be.PID, be.QueryStart.UnixMicro()}
		present[key] = struct{}{}
		if _, done := sr.seen[key]; done {
			continue
		}
		for _, r := range rules {
			if !matchBackend(r.Match, be) {
				continue
			}
			shape := comment.Shape(be.Query)
			wk := runawayWatchKey{r.ID, shape}
			exp, watched := sr.watch[wk]
			watched = watched && now.Before(exp)
			after := time.Duration(r.AfterSeconds * float64(time.Second))
			if be.Duration < after && !(watched && r.Action != policy.Report) {
				continue
			}
			if len(sr.seen) < maxRunawaySeen {
				sr.seen[key] = struct{}{}
			}
			b.runawayAct(ctx, pool, r, be, watched && be.Duration < after, version)
			if r.CooldownSeconds > 0 {
				if _, ok := sr.watch[wk]; !ok && len(sr.watch) >= maxRunawayWatch {
					for k, e := range sr.watch { // drop the one expiring soonest
						if e2, ok := sr.watch[wk]; !ok || e.Before(e2) {
							delete(sr.watch, k)
							break
						}
					}
				}
				sr.watch[wk] = now.Add(time.Duration(r.CooldownSeconds * float64(time.Second)))
			}
			break
		}
	}
	for k := range sr.seen {
		if _, ok := present[k]; !ok {
			delete(sr.seen, k)
		}
	}
	for k, e := range sr.watch {
		if !now.Before(e) {
			delete(sr.watch, k)
		}
	}
}

// runawayAct carries out rule r on backend b.
func (bp *budgetPart) runawayAct(ctx context.Context, pool *pgxpool.Pool, r policy.Runaway, b *pgactivity.Backend, watched bool, version uint64) {
	done := "reported"
	var err error
	if r.Action != policy.Report {
		q := cancelExact
		if r.Action == policy.Terminate {
			q = terminateExact
		}
		sctx, cancel := context.WithTimeout(ctx, signalTimeout)
		var ok bool
		err = pool.QueryRow(sctx, q, b.PID, b.QueryStart).Scan(&ok)
		cancel()
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			done, err = "gone", nil // the statement ended before the signal
		case err != nil:
			done = "failed"
		case !ok:
			done = "failed"
		case r.Action == policy.Terminate:
			done = "terminated"
		default:
			done = "cancelled"
		}
	}
	now := bp.now()
	var add api.BudgetRow
	switch done {
	case "cancelled":
		add.Cancelled++
	case "terminated":
		add.Terminated++
	case "reported":
		add.Reported++
	}
	if watched && (done == "cancelled" || done == "terminated") {
		add.WatchRefused++
	}
	bp.addRunaway(now, r.ID, &add)
	bp.actions.WithLabelValues(string(r.Action), done).Inc()
	a := api.RunawayAudit{Rule: r.ID, Action: string(r.Action), Done: done, PID: b.PID, QueryStart: b.QueryStart,
		Duration: b.Duration, Tenant: b.Tenant, Route: b.Route, Query: truncate(b.Query, 1024), Watched: watched}
	aj, _ := json.Marshal(a)
	if err != nil {
		bp.log.Error("runaway statement: signal failed", "rule", r.ID, "pid", b.PID, "err", err)
	} else {
		bp.log.Warn("runaway statement", "rule", r.ID, "action", string(r.Action), "done", done, "pid", b.PID,
			"tenant", b.Tenant, "duration", b.Duration, "watched", watched)
	}
	if bp.store != nil {
		actx, cancel := context.WithTimeout(ctx, signalTimeout)
		defer cancel()
		au := []store.Audit{{Time: now.UTC(), Who: "sampler", Action: "runaway-" + done, PolicyVersion: version, Rule: string(aj)}}
		if err := bp.store.WriteAudit(actx, au); err != nil {
			bp.log.Error("runaway audit not written", "err", err, "audit", string(aj))
		}
	}
}

// matchBackend reports whether b's tags match m (see policy.Budget.Match):
// a key is looked up among the comment's tags, then as the session's
// tenant, route, tier or application.
func matchBackend(m []map[string]string, b *pgactivity.Backend) bool {
	if len(m) == 0 {
		return true
	}
	for _, alt := range m {
		ok := true
		for k, v := range alt {
			if backendTag(b, k) != v {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

func backendTag(b *pgactivity.Backend, k string) string {
	switch k {
	case comment.KeyTenant:
		return b.Tenant
	case comment.KeyRoute:
		return b.Route
	case comment.KeyTier:
		return b.Tier.String()
	case comment.KeyApplication:
		if v, ok := b.Tags[k]; ok {
			return v
		}
		return b.Application
	}
	return b.Tags[k]
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
