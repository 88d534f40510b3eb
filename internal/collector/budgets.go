package collector

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/budget"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/tenant"
)

// Paths of the database budgets and runaway rules of the policy. GET
// lists them; POST (with the policy token) adds one, replaces the one with
// its id, or, with "delete": true, removes it.
const (
	PathBudgets = "/v1/policy/budgets"
	PathRunaway = "/v1/policy/runaway"
)

// maxBudgetIDs bounds the ids not in the policy that the live view
// tracks per second, so that reporters sending made-up ids cannot grow
// it; the rest are summed under "other". The policy's own ids (at most
// policy.MaxBudgets + policy.MaxRunaway) always have rows of their own.
const maxBudgetIDs = 1024

// budgetKey is the key of a budget's or runaway rule's counters: its id
// as the counters name it (api.BudgetName: a rule really named "other" as
// its stand-in), or tenant.Other, the overflow row of ids not in the
// policy (since start) or beyond maxBudgetIDs (in a second).
type budgetKey struct {
	id      string
	runaway bool
}

// budgetSlot is one second of budget counters summed over processes and
// the sampler.
type budgetSlot struct {
	stamp int64
	ids   map[budgetKey]*api.BudgetRow
}

// budgetPart is the feature of database budgets and runaway rules: the
// counters the processes report (their budgets section) and the
// sampler's runaway actions, over the last rateN seconds for the live
// view and since start for the metrics, and the wrappers' runaway actions
// on their way to the audit. Its lock guards the counters and the audit
// queue; the sampler's runaway state is its goroutine's alone.
type budgetPart struct {
	pol     *policyPart
	log     *slog.Logger
	now     func() time.Time
	store   store.Store // nil: no audit (set once by New)
	actions *prometheus.CounterVec
	sampler samplerRunaway // runaway.go: only the sampler's goroutine

	mu    sync.Mutex
	slots [rateN]budgetSlot
	// totals are the counters since start of the policy's budgets and
	// rules (ids not in the policy are summed under "other"), for the
	// fleet-wide metrics.
	totals map[budgetKey]*api.BudgetRow
	// pending are the wrappers' runaway actions for the audit, written at
	// the next Tick; auditDropped counts those the bound left out.
	pending      []store.Audit
	auditDropped uint64
}

var _ feature = (*budgetPart)(nil)

// tick writes the wrappers' runaway actions received since the last call
// to the audit.
func (b *budgetPart) tick(ctx context.Context, _ time.Time) {
	b.mu.Lock()
	rows, dropped := b.pending, b.auditDropped
	b.pending, b.auditDropped = nil, 0
	b.mu.Unlock()
	if dropped > 0 {
		b.log.Warn("runaway actions of the wrappers left out of the audit (more than the bound per second)", "dropped", dropped)
	}
	if len(rows) == 0 || b.store == nil {
		return
	}
	actx, cancel := context.WithTimeout(ctx, signalTimeout)
	defer cancel()
	if err := b.store.WriteAudit(actx, rows); err != nil {
		b.log.Error("runaway actions of the wrappers not audited", "err", err, "rows", len(rows))
	}
}

func (b *budgetPart) reply(_ *report.Report, _ time.Time, reply report.Reply, _ bool) report.Reply {
	return reply
}

// newBudgetPart registers qtop_collector_runaway_actions_total{action,outcome}
// (action: cancel, terminate, report; outcome: cancelled, terminated,
// reported, gone, failed — both bounded) and the fleet-wide totals
// (budgetMetrics).
func newBudgetPart(pol *policyPart, cfg Config) (*budgetPart, error) {
	b := &budgetPart{pol: pol, log: cfg.Logger, now: cfg.Now}
	reg := cfg.Registerer
	if err := reg.Register(budgetMetrics{b}); err != nil {
		return nil, fmt.Errorf("collector: metrics: %w", err)
	}
	b.actions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "qtop_collector_runaway_actions_total",
		Help: "Statements the pg_stat_activity sampler acted on under a runaway rule, by action and outcome."},
		[]string{"action", "outcome"})
	if err := reg.Register(b.actions); err != nil {
		return nil, fmt.Errorf("collector: metrics: %w", err)
	}
	return b, nil
}

var (
	descFleetBudget = prometheus.NewDesc("qtop_collector_budget_statements_total",
		"Statements of a database budget summed over the reporting processes, by budget (ids not in the policy: other; a budget whose id is other: other#d9298a10d1b07358) and outcome (admitted, refused, warned, in_tx).",
		[]string{"budget", "outcome"}, nil)
	descFleetRunaway = prometheus.NewDesc("qtop_collector_runaway_statements_total",
		"Statements a runaway rule acted on, summed over the reporting processes and the sampler, by rule (ids not in the policy: other; a rule whose id is other: other#d9298a10d1b07358) and outcome (cancelled, terminated, reported, watch_refused).",
		[]string{"rule", "outcome"}, nil)
)

// budgetMetrics exports the budgets' fleet-wide totals.
type budgetMetrics struct{ b *budgetPart }

func (m budgetMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- descFleetBudget
	ch <- descFleetRunaway
}

func (m budgetMetrics) Collect(ch chan<- prometheus.Metric) {
	m.b.mu.Lock()
	rows := make([]api.BudgetRow, 0, len(m.b.totals))
	for _, r := range m.b.totals {
		rows = append(rows, *r)
	}
	m.b.mu.Unlock()
	for _, r := range rows {
		if r.Runaway {
			for _, c := range [...]struct {
				n string
				v uint64
			}{{"cancelled", r.Cancelled}, {"terminated", r.Terminated}, {"reported", r.Reported}, {"watch_refused", r.WatchRefused}} {
				ch <- prometheus.MustNewConstMetric(descFleetRunaway, prometheus.CounterValue, float64(c.v), r.ID, c.n)
			}
			continue
		}
		for _, c := range [...]struct {
			n string
			v uint64
		}{{"admitted", r.Admitted}, {"refused", r.Refused}, {"warned", r.Warned}, {"in_tx", r.InTx}} {
			ch <- prometheus.MustNewConstMetric(descFleetBudget, prometheus.CounterValue, float64(c.v), r.ID, c.n)
		}
	}
}

// keyOf returns the key of the counters of budget or runaway rule id
// (api.BudgetName) and whether the policy has it.
func (b *budgetPart) keyOf(id string, runaway bool) (k budgetKey, known bool) {
	b.pol.read(func(p *policy.Policy) {
		if runaway {
			known = slices.ContainsFunc(p.Runaway, func(r policy.Runaway) bool { return r.ID == id })
		} else {
			known = slices.ContainsFunc(p.Budgets, func(b policy.Budget) bool { return b.ID == id })
		}
	})
	return budgetKey{api.BudgetName(id), runaway}, known
}

// totalLocked returns the fleet-wide total row of k: its own when the
// policy has it (known), else "other" (so reporters cannot add label
// values).
func (b *budgetPart) totalLocked(k budgetKey, known bool) *api.BudgetRow {
	if b.totals == nil {
		b.totals = map[budgetKey]*api.BudgetRow{}
	}
	if !known {
		k.id = tenant.Other
	}
	r := b.totals[k]
	if r == nil {
		r = &api.BudgetRow{ID: k.id, Runaway: k.runaway}
		b.totals[k] = r
	}
	return r
}

// maxPendingAudit bounds the wrappers' runaway actions waiting for the
// next Tick to reach the audit; beyond it they are counted and logged.
const maxPendingAudit = 1024

// merge adds a report's budget counters (received live) to its second,
// and queues its runaway actions for the audit. It is the one place
// that reads the report's budgets section.
func (b *budgetPart) merge(rep *report.Report, now time.Time, live bool) {
	if !live {
		return
	}
	bw, ok := report.SectionOf[budget.Window](rep)
	if !ok || len(bw.Actions)+len(bw.Counters) == 0 {
		return
	}
	sec := now.Unix()
	var version uint64
	b.pol.read(func(p *policy.Policy) { version = p.Version })
	b.mu.Lock()
	defer b.mu.Unlock()
	who := "wrapper:" + rep.Source.Service + "/" + rep.Source.Instance
	for _, a := range bw.Actions {
		if len(b.pending) >= maxPendingAudit {
			b.auditDropped++
			continue
		}
		aj, _ := json.Marshal(api.RunawayAudit{Rule: a.Rule, Done: a.Outcome, Duration: a.Duration, Shape: a.Shape, Host: rep.Source.Host})
		b.pending = append(b.pending, store.Audit{Time: a.Time, Who: who, Action: "runaway-" + a.Outcome,
			PolicyVersion: version, Rule: string(aj)})
	}
	for _, c := range bw.Counters {
		k, known := b.keyOf(c.ID, c.Runaway)
		b.totalLocked(k, known).Add(&api.BudgetRow{Admitted: c.Admitted, Refused: c.Refused, Warned: c.Warned,
			InTx: c.InTx, Cancelled: c.Cancelled, Reported: c.Reported, WatchRefused: c.WatchRefused})
		r := b.rowLocked(sec, k, known)
		r.Enforce = r.Enforce || c.Enforce
		r.Admitted += c.Admitted
		r.Refused += c.Refused
		r.Warned += c.Warned
		r.InTx += c.InTx
		r.Cancelled += c.Cancelled
		r.Reported += c.Reported
		r.WatchRefused += c.WatchRefused
	}
}

// addRunaway counts one of the sampler's runaway actions under rule id
// at now.
func (b *budgetPart) addRunaway(now time.Time, id string, add *api.BudgetRow) {
	k, known := b.keyOf(id, true)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.rowLocked(now.Unix(), k, known).Add(add)
	b.totalLocked(k, known).Add(add)
}

// rowLocked returns the row of k in second sec: its own, unless k is not
// in the policy (known) and the second already tracks maxBudgetIDs ids,
// then the second's "other" row of its kind.
func (b *budgetPart) rowLocked(sec int64, k budgetKey, known bool) *api.BudgetRow {
	sl := &b.slots[uint64(sec)%rateN]
	if sl.stamp != sec || sl.ids == nil {
		sl.stamp = sec
		if sl.ids == nil {
			sl.ids = map[budgetKey]*api.BudgetRow{}
		}
		clear(sl.ids)
	}
	r := sl.ids[k]
	if r == nil {
		if !known && len(sl.ids) >= maxBudgetIDs {
			k.id = tenant.Other
			if r = sl.ids[k]; r != nil {
				return r
			}
		}
		r = &api.BudgetRow{ID: k.id, Runaway: k.runaway}
		sl.ids[k] = r
	}
	return r
}

// snapshot fills the budgets of a snapshot at now: the policy's budgets
// and runaway rules, each with its counters over the last rateN complete
// seconds, then counters of ids the policy no longer has. Each row's ID is
// the name its counters go by (api.BudgetName): "other" is only ever the row
// of the ids beyond the bound.
func (b *budgetPart) snapshot(snap *api.Snapshot, now time.Time) {
	sec := now.Unix()
	var bs []policy.Budget
	var rs []policy.Runaway
	b.pol.read(func(p *policy.Policy) { bs, rs = p.ActiveBudgets(now) })
	snap.Policy.Budgets, snap.Policy.Runaway = bs, rs
	sum := map[budgetKey]*api.BudgetRow{}
	b.mu.Lock()
	defer b.mu.Unlock()
	for j := range b.slots {
		sl := &b.slots[j]
		if sl.stamp < sec-rateN || sl.stamp >= sec {
			continue
		}
		for k, r := range sl.ids {
			t := sum[k]
			if t == nil {
				t = &api.BudgetRow{ID: r.ID, Runaway: r.Runaway}
				sum[k] = t
			}
			t.Add(r)
		}
	}
	rows := make([]api.BudgetRow, 0, len(bs)+len(rs)+len(sum))
	take := func(r api.BudgetRow) {
		key := budgetKey{r.ID, r.Runaway}
		if t := sum[key]; t != nil {
			t.Enforce = t.Enforce || r.Enforce
			r.Add(t)
			delete(sum, key)
		}
		rows = append(rows, r)
	}
	for _, x := range bs {
		take(api.BudgetRow{ID: api.BudgetName(x.ID), Enforce: x.ModeOrDefault() == policy.Enforce, Mode: string(x.ModeOrDefault())})
	}
	for _, r := range rs {
		take(api.BudgetRow{ID: api.BudgetName(r.ID), Runaway: true, Mode: string(r.Action)})
	}
	rest := make([]api.BudgetRow, 0, len(sum))
	for _, r := range sum {
		rest = append(rest, *r)
	}
	slices.SortFunc(rest, func(a, b api.BudgetRow) int { // by id, a budget before a rule of its id
		return cmp.Or(strings.Compare(a.ID, b.ID), cmp.Compare(kindOrder(a.Runaway), kindOrder(b.Runaway)))
	})
	snap.Budgets = append(rows, rest...)
}

// kindOrder orders budgets (0) before runaway rules (1).
func kindOrder(runaway bool) int {
	if runaway {
		return 1
	}
	return 0
}

// An operator's budget or runaway rule may expire (it need not): its
// expiry is bounded as a rule's is, by --max-rule-ttl. The autopilot's
// budgets keep their own bound (policy.MaxAutopilotSeconds).

func (s httpAPI) handleBudgets(w http.ResponseWriter, r *http.Request) {
	handleList(s, w, r, `{"id":"analytics","match":[{"tenant":"analytics"}],"concurrency":1,"reason":"reports"} ({"id":"analytics","delete":true} removes it)`,
		func(p policy.Policy) any { return orEmpty(p.Budgets) },
		func(ctx context.Context, b policy.Budget, del bool, who string) (policy.Policy, error) {
			if !del {
				if err := checkUntil("budget expires", true, b.Expires, s.cfg.Now(), s.cfg.MaxRuleTTL); err != nil {
					return policy.Policy{}, err
				}
			}
			return s.SetBudget(ctx, b, del, who)
		})
}

func (s httpAPI) handleRunaway(w http.ResponseWriter, r *http.Request) {
	handleList(s, w, r, `{"id":"long-reports","after_seconds":120,"action":"cancel","reason":"runaway reports"} ({"id":"long-reports","delete":true} removes it)`,
		func(p policy.Policy) any { return orEmpty(p.Runaway) },
		func(ctx context.Context, rr policy.Runaway, del bool, who string) (policy.Policy, error) {
			if !del {
				if err := checkUntil("runaway rule expires", true, rr.Expires, s.cfg.Now(), s.cfg.MaxRuleTTL); err != nil {
					return policy.Policy{}, err
				}
			}
			return s.SetRunaway(ctx, rr, del, who)
		})
}

// handleList serves a list of the policy whose items are set one at a
// time: GET the list, POST (admin) one item, or {"id":…,"delete":true} to
// remove one; example is a body POST takes, for its refusals.
func handleList[T any](s httpAPI, w http.ResponseWriter, r *http.Request, example string, list func(policy.Policy) any,
	set func(context.Context, T, bool, string) (policy.Policy, error)) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		s.authorized(RoleRead, func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, list(s.Policy()))
		})(w, r)
	case http.MethodPost:
		body, who, ok := s.policyPost(w, r, "policy")
		if !ok {
			return
		}
		// The body as sent is one object with each key once (the
		// "delete" key is taken out of it below, by way of a map that
		// would keep only the last of two equal keys).
		if err := checkOne(body, example); err != nil {
			writeError(w, http.StatusBadRequest, "policy: "+err.Error(), 0)
			return
		}
		// The rule's fields, and "delete": true to remove it.
		var del struct {
			Delete bool `json:"delete"`
		}
		_ = json.Unmarshal(body, &del)
		var rule T
		clean := body
		if del.Delete {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(body, &m); err == nil {
				delete(m, "delete")
				clean, _ = json.Marshal(m)
			}
		}
		if err := decodeOne(clean, &rule, example); err != nil {
			writeError(w, http.StatusBadRequest, "policy: "+err.Error(), 0)
			return
		}
		p, err := set(r.Context(), rule, del.Delete, who)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error(), 0)
			return
		}
		s.writePolicy(w, p)
	default:
		w.Header().Set("Allow", "GET, POST")
		writeError(w, http.StatusMethodNotAllowed, "use GET or POST", 0)
	}
}

// orEmpty returns l, or an empty list for nil, so that a list with
// nothing in it is [] in JSON, not null.
func orEmpty[T any](l []T) []T {
	if l == nil {
		return []T{}
	}
	return l
}

// SetBudget adds b, replaces the budget with its id, or (del) removes it;
// who is recorded in the audit. It returns the new policy.
func (s *Server) SetBudget(ctx context.Context, b policy.Budget, del bool, who string) (policy.Policy, error) {
	now := s.cfg.Now().UTC()
	b.CreatedBy, b.Created = who, now
	if !del {
		if err := b.Validate(); err != nil {
			return policy.Policy{}, err
		}
	}
	return s.policy.changeList(ctx, now, who, b.ID, del, "budget", b, func(p *policy.Policy) bool {
		i := slices.IndexFunc(p.Budgets, func(x policy.Budget) bool { return x.ID == b.ID })
		return edit(&p.Budgets, i, b, del)
	})
}

// SetRunaway adds, replaces or (del) removes a runaway rule, as SetBudget.
func (s *Server) SetRunaway(ctx context.Context, r policy.Runaway, del bool, who string) (policy.Policy, error) {
	now := s.cfg.Now().UTC()
	r.CreatedBy, r.Created = who, now
	if !del {
		if err := r.Validate(); err != nil {
			return policy.Policy{}, err
		}
	}
	return s.policy.changeList(ctx, now, who, r.ID, del, "runaway-rule", r, func(p *policy.Policy) bool {
		i := slices.IndexFunc(p.Runaway, func(x policy.Runaway) bool { return x.ID == r.ID })
		return edit(&p.Runaway, i, r, del)
	})
}

// edit replaces, appends or deletes v at i (-1: absent) of a copy of *list;
// it reports false for deleting what is not there.
func edit[T any](list *[]T, i int, v T, del bool) bool {
	l := slices.Clone(*list)
	switch {
	case del && i < 0:
		return false
	case del:
		l = slices.Delete(l, i, i+1)
	case i >= 0:
		l[i] = v
	default:
		l = append(l, v)
	}
	*list = l
	return true
}

// changeList commits a change to one of the policy's lists (budgets,
// runaway rules) and audits it.
func (pp *policyPart) changeList(ctx context.Context, now time.Time, who, id string, del bool, kind string, v any,
	change func(*policy.Policy) bool) (policy.Policy, error) {
	if id == "" {
		return policy.Policy{}, fmt.Errorf("%w: a %s needs an id", policy.ErrInvalid, kind)
	}
	out, err := pp.change(now, func(next *policy.Policy) error {
		if !change(next) {
			return fmt.Errorf("%w: no %s %q to delete", policy.ErrInvalid, kind, id)
		}
		return nil
	})
	if err != nil {
		return policy.Policy{}, err
	}
	action := kind + "-set"
	if del {
		action = kind + "-delete"
	}
	pp.audit(ctx, now, who, action, out.Version, v)
	return out, nil
}
