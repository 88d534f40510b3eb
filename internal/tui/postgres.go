package tui

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/pgactivity"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/tenant"
)

// Postgres samples pg_stat_activity itself every interval, reads the
// sqlcommenter tags of every running statement and groups the load by
// tenant: no collector needed. It can cancel and terminate backends.
type Postgres struct {
	pool     *pgxpool.Pool
	sampler  *pgactivity.Sampler
	metrics  *pgactivity.Metrics
	desc     string
	interval time.Duration
	now      func() time.Time

	mu     sync.Mutex
	agg    *pgWindow
	last   time.Time // when the last sample was taken
	warn   string    // the privilege check's warning
	closed bool
	done   chan struct{}
}

var (
	_ Source     = (*Postgres)(nil)
	_ OnceSource = (*Postgres)(nil)
)

type pgConfig struct {
	interval time.Duration
	now      func() time.Time
}

// PostgresOption configures NewPostgres.
type PostgresOption func(*pgConfig)

// WithInterval sets how often pg_stat_activity is sampled (default 1 s).
func WithInterval(d time.Duration) PostgresOption { return func(c *pgConfig) { c.interval = d } }

// WithPostgresClock sets the clock (default time.Now).
func WithPostgresClock(now func() time.Time) PostgresOption { return func(c *pgConfig) { c.now = now } }

// NewPostgres connects to the server of dsn (a role with pg_monitor sees
// every session; pg_signal_backend lets c and k signal them) and checks
// that it answers.
func NewPostgres(ctx context.Context, dsn string, opts ...PostgresOption) (*Postgres, error) {
	cfg := pgConfig{interval: time.Second, now: time.Now}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.interval <= 0 {
		return nil, fmt.Errorf("%w: sampling interval %s: want > 0", ErrInput, cfg.interval)
	}
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("%w: --postgres: %v (want postgres://user:password@host:5432/db or \"host=… user=… dbname=…\")", ErrInput, err)
	}
	pc.MaxConns = 2
	desc := fmt.Sprintf("postgres %s@%s:%d/%s", pc.ConnConfig.User, pc.ConnConfig.Host, pc.ConnConfig.Port, pc.ConnConfig.Database)
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("tui: %s: %w", desc, err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("%w: cannot connect to %s: %w", ErrUnreachable, desc, err)
	}
	met, _ := pgactivity.NewMetrics(nil) // cannot fail without a registerer
	p := &Postgres{
		pool: pool, sampler: pgactivity.NewSampler(pool, pgactivity.WithClock(cfg.now), pgactivity.WithMetrics(met)), metrics: met,
		desc: desc, interval: cfg.interval, now: cfg.now, agg: newPGWindow(), done: make(chan struct{}),
	}
	if err := p.sampler.Check(pctx); err != nil {
		p.warn = err.Error()
	}
	return p, nil
}

// Describe names the server.
func (p *Postgres) Describe() string { return p.desc }

// Features: backends can be signalled and load grouped by any session
// field; there is no policy to throttle.
func (p *Postgres) Features() Features { return Features{Signal: true, Group: true} }

// Next waits for the next sampling instant, samples pg_stat_activity and
// returns the load over the last samples.
func (p *Postgres) Next(ctx context.Context, q Query) (api.Snapshot, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return api.Snapshot{}, ErrClosed
	}
	last := p.last
	p.mu.Unlock()
	if !last.IsZero() {
		if wait := last.Add(p.interval).Sub(p.now()); wait > 0 {
			t := time.NewTimer(wait)
			defer t.Stop()
			select {
			case <-ctx.Done():
				return api.Snapshot{}, ctx.Err()
			case <-p.done:
				return api.Snapshot{}, ErrClosed
			case <-t.C:
			}
		}
	}
	return p.sample(ctx, q)
}

// Once takes one sample and returns it, for --once: its Window is 0, as
// one sample averages over nothing.
func (p *Postgres) Once(ctx context.Context, q Query) (api.Snapshot, error) {
	s, err := p.sample(ctx, q)
	s.Window = 0
	return s, err
}

func (p *Postgres) sample(ctx context.Context, q Query) (api.Snapshot, error) {
	sctx, cancel := context.WithTimeout(ctx, pgactivity.DefaultTimeout)
	defer cancel()
	go func() {
		select {
		case <-p.done:
			cancel()
		case <-sctx.Done():
		}
	}()
	snap, err := p.sampler.Sample(sctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return api.Snapshot{}, ErrClosed
	}
	p.last = p.now()
	if err != nil && !errors.Is(err, pgactivity.ErrInsufficientPrivilege) {
		return api.Snapshot{}, fmt.Errorf("%s: %w", p.desc, err)
	}
	p.agg.add(snap, p.interval)
	msg := p.warn
	if err != nil {
		msg = err.Error()
	}
	out := p.agg.snapshot(snap.Time, q, msg)
	out.Collector.MalformedComments, out.Collector.TruncatedStatements = p.metrics.Counts()
	return out, nil
}

// Throttle is not supported: without a collector there is no policy.
func (p *Postgres) Throttle(context.Context, policy.Rule) error {
	return fmt.Errorf("%w: throttling needs a collector (qtop --collector URL)", ErrUnsupported)
}

// Cancel cancels the statement of backend pid.
func (p *Postgres) Cancel(ctx context.Context, pid int32) error {
	return pgactivity.Cancel(ctx, p.pool, pid)
}

// Terminate ends the session of backend pid.
func (p *Postgres) Terminate(ctx context.Context, pid int32) error {
	return pgactivity.Terminate(ctx, p.pool, pid)
}

var _ SafeSignaler = (*Postgres)(nil)

// CancelStatement cancels the statement of t only if its backend still
// runs it (pgactivity.CancelStatement).
func (p *Postgres) CancelStatement(ctx context.Context, t pgactivity.Target, actor string) error {
	return pgactivity.CancelStatement(ctx, p.pool, t, actor)
}

// TerminateSession ends the session of t only if it is still the one
// shown (pgactivity.TerminateSession).
func (p *Postgres) TerminateSession(ctx context.Context, t pgactivity.Target, actor string) error {
	return pgactivity.TerminateSession(ctx, p.pool, t, actor)
}

// Close closes the pool.
func (p *Postgres) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.done)
	p.mu.Unlock()
	p.pool.Close()
	return nil
}

// Window of the PostgreSQL source: DB load is the average active sessions
// over the last pgWindowLen samples; histories hold live.HistoryLen
// samples.
const (
	pgWindowLen     = 10
	pgStatementsMax = 200
	pgXminMax       = 10
)

// numGroups is len(live.Groups).
const numGroups = 6

// groupIndex returns the index of grouping g in live.Groups ("" is
// tenant), or -1.
func groupIndex(g string) int {
	if g == "" {
		return 0
	}
	for i, x := range api.Groups {
		if x == g {
			return i
		}
	}
	return -1
}

// groupKey is one group of one grouping.
type groupKey struct {
	by  int // index in live.Groups
	key string
}

// pgWindow turns pg_stat_activity samples into live snapshots, under every
// grouping at once (so that switching loses no history). It is pure (no
// I/O) so that it can be tested on built samples.
type pgWindow struct {
	n        int64 // samples added
	interval time.Duration
	ring     [pgWindowLen]map[groupKey]*pgLoad
	groups   map[groupKey]*pgTenant
	stmts    []api.StatementRow
	keys     [][numGroups]string // of stmts, by grouping
	blocked  []api.BlockRow
	xmin     []api.StatementRow
	workers  int
}

// pgLoad is one group's active sessions in one sample.
type pgLoad struct {
	active float64
	waits  map[string]float64
	routes map[string]float64
}

type pgTenant struct {
	hist [api.HistoryLen]float64 // by sample number mod HistoryLen
	last int64                   // the last sample it was active in
	tier tenant.Tier
}

func newPGWindow() *pgWindow { return &pgWindow{groups: map[groupKey]*pgTenant{}} }

// sessionKeys returns the keys of a backend under every grouping; tags is
// the backend whose tags and session fields count (a worker's leader).
func sessionKeys(tags *pgactivity.Backend) [numGroups]string {
	return [numGroups]string{tags.Tenant, tags.Application, tags.User, tags.Database, tags.Client, pgactivity.Fingerprint(tags.Query)}
}

// add accounts one sample. A parallel worker (LeaderPID ≠ 0) adds to the
// load of its leader's group but is not listed as a statement.
func (w *pgWindow) add(s pgactivity.Snapshot, interval time.Duration) {
	w.interval = interval
	slot := w.n % pgWindowLen
	loads := w.ring[slot]
	if loads == nil {
		loads = map[groupKey]*pgLoad{}
		w.ring[slot] = loads
	}
	clear(loads)
	byPID := make(map[int32]*pgactivity.Backend, len(s.Backends))
	for i := range s.Backends {
		byPID[s.Backends[i].PID] = &s.Backends[i]
	}
	w.stmts, w.keys, w.blocked, w.xmin, w.workers = w.stmts[:0], w.keys[:0], w.blocked[:0], w.xmin[:0], 0
	workers := map[int32]int{}
	for i := range s.Backends {
		b := &s.Backends[i]
		if b.XminAge >= 0 && b.LeaderPID == 0 && !b.Hidden() {
			w.xmin = append(w.xmin, pgStatement(b))
		}
		if !b.Active() {
			continue
		}
		tags := b
		if b.LeaderPID != 0 {
			w.workers++
			workers[b.LeaderPID]++
			if l := byPID[b.LeaderPID]; l != nil {
				tags = l
			}
		}
		keys := sessionKeys(tags)
		for by, key := range keys {
			gk := groupKey{by, key}
			l := loads[gk]
			if l == nil {
				l = &pgLoad{waits: map[string]float64{}, routes: map[string]float64{}}
				loads[gk] = l
			}
			l.active++
			l.waits[b.Wait()]++
			l.routes[tags.Route]++
			t := w.groups[gk]
			if t == nil {
				t = &pgTenant{}
				w.groups[gk] = t
			}
			t.last = w.n
			if tags.Tier != tenant.TierUnset {
				t.tier = tags.Tier
			}
		}
		if b.LeaderPID == 0 {
			w.stmts = append(w.stmts, pgStatement(b))
			w.keys = append(w.keys, keys)
		}
	}
	for i := range w.stmts {
		w.stmts[i].Workers = workers[w.stmts[i].PID]
	}
	for i := range s.Backends {
		b := &s.Backends[i]
		for _, pid := range b.BlockedBy {
			blocking := api.StatementRow{PID: pid}
			if o := byPID[pid]; o != nil {
				blocking = pgStatement(o)
			}
			w.blocked = append(w.blocked, api.BlockRow{Blocked: pgStatement(b), Blocking: blocking})
		}
	}
	idx := make([]int, len(w.stmts))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		if c := cmp.Compare(w.stmts[b].Duration, w.stmts[a].Duration); c != 0 {
			return c
		}
		return cmp.Compare(w.stmts[a].PID, w.stmts[b].PID)
	})
	idx = idx[:min(len(idx), pgStatementsMax)]
	stmts := make([]api.StatementRow, len(idx))
	keys := make([][numGroups]string, len(idx))
	for i, j := range idx {
		stmts[i], keys[i] = w.stmts[j], w.keys[j]
	}
	w.stmts, w.keys = stmts, keys
	slices.SortFunc(w.xmin, func(a, b api.StatementRow) int {
		if c := cmp.Compare(b.XminAge, a.XminAge); c != 0 {
			return c
		}
		return cmp.Compare(a.PID, b.PID)
	})
	w.xmin = w.xmin[:min(len(w.xmin), pgXminMax)]
	h := w.n % api.HistoryLen
	for gk, t := range w.groups {
		if w.n-t.last >= api.HistoryLen {
			delete(w.groups, gk)
			continue
		}
		t.hist[h] = 0
		if l := loads[gk]; l != nil {
			t.hist[h] = l.active
		}
	}
	w.n++
}

func pgStatement(b *pgactivity.Backend) api.StatementRow {
	r := api.StatementRow{
		PID: b.PID, Tenant: b.Tenant, Route: b.Route, Application: b.Application, State: b.State,
		WaitEventType: b.WaitEventType, WaitEvent: b.WaitEvent, Duration: b.Duration, Query: b.Query,
		BlockedBy: b.BlockedBy, User: b.User, Database: b.Database, Client: b.Client,
		QueryStart: b.QueryStart, XactStart: b.XactStart, BackendStart: b.BackendStart,
	}
	if b.XminAge >= 0 {
		r.XminAge = max(b.XminAge, 1)
	}
	return r
}

// snapshot returns the load of the window: groups by DB load (the only
// measure PostgreSQL gives), the top q.Top and then "other".
func (w *pgWindow) snapshot(at time.Time, q Query, samplerErr string) api.Snapshot {
	by := max(groupIndex(q.GroupBy), 0)
	samples := min(w.n, pgWindowLen)
	s := api.Snapshot{
		Time: at.UTC(), Window: time.Duration(samples) * w.interval, Source: api.SourcePostgres,
		Measure: api.MeasureDB, Tenants: []api.TenantRow{}, HotKeys: []api.HotKeyRow{},
		Statements: append([]api.StatementRow{}, w.stmts...), Blocked: append([]api.BlockRow(nil), w.blocked...),
		Services: []api.ServiceRow{}, GroupBy: api.Groups[by], ParallelWorkers: w.workers,
		XminHolders: append([]api.StatementRow(nil), w.xmin...),
		Collector:   api.CollectorStatus{Sampler: true, SamplerError: samplerErr},
	}
	for i := range s.Statements {
		s.Statements[i].Group = w.keys[i][by]
	}
	for t := range tenant.NumTiers {
		s.Enforcement.Tiers[t] = api.TierRow{Tier: tenant.Tier(t + 1).String(), PriceMultiplier: 1}
	}
	if samples == 0 {
		return s
	}
	sum := map[string]*api.TenantRow{}
	for i := range samples {
		for gk, l := range w.ring[(w.n-1-i+pgWindowLen)%pgWindowLen] {
			if gk.by != by {
				continue
			}
			r := sum[gk.key]
			if r == nil {
				r = &api.TenantRow{Tenant: gk.key, Untagged: gk.key == "", Waits: map[string]float64{}}
				sum[gk.key] = r
			}
			r.DBLoad += l.active
			for k, v := range l.waits {
				r.Waits[k] += v
			}
			for k, v := range l.routes {
				found := false
				for j := range r.Routes {
					if r.Routes[j].Route == k {
						r.Routes[j].DBLoad += v
						found = true
						break
					}
				}
				if !found {
					r.Routes = append(r.Routes, api.RouteRow{Route: k, DBLoad: v})
				}
			}
		}
	}
	rows := make([]*api.TenantRow, 0, len(sum))
	var total float64
	n := float64(samples)
	for _, r := range sum {
		r.DBLoad /= n
		total += r.DBLoad
		for k := range r.Waits {
			r.Waits[k] /= n
		}
		for j := range r.Routes {
			r.Routes[j].DBLoad /= n
		}
		slices.SortFunc(r.Routes, func(a, b api.RouteRow) int {
			if c := cmp.Compare(b.DBLoad, a.DBLoad); c != 0 {
				return c
			}
			return strings.Compare(a.Route, b.Route)
		})
		if len(r.Routes) > 10 {
			r.Routes = r.Routes[:10]
		}
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(a, b *api.TenantRow) int {
		if c := cmp.Compare(b.DBLoad, a.DBLoad); c != 0 {
			return c
		}
		return strings.Compare(a.Tenant, b.Tenant)
	})
	s.TenantsSeen = len(rows)
	top := q.Top
	if top <= 0 {
		top = DefaultTop
	}
	var other *api.TenantRow
	for i, r := range rows {
		if total > 0 {
			r.Share = r.DBLoad / total
		}
		if i >= top && !r.Untagged { // the untagged row is always shown
			if other == nil {
				other = &api.TenantRow{Tenant: api.OtherTenant, History: make([]float64, api.HistoryLen)}
			}
			other.DBLoad += r.DBLoad
			other.Share += r.Share
			continue
		}
		if t := w.groups[groupKey{by, r.Tenant}]; t != nil {
			if by == 0 {
				r.Tier = t.tier.String()
			}
			r.History = make([]float64, api.HistoryLen)
			for j := range api.HistoryLen {
				k := w.n - api.HistoryLen + int64(j)
				if k >= 0 {
					r.History[j] = t.hist[k%api.HistoryLen]
				}
			}
		}
		s.Tenants = append(s.Tenants, *r)
	}
	if other != nil {
		s.Tenants = append(s.Tenants, *other)
	}
	return s
}
