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

	"github.com/qtop-dev/qtop/internal/live"
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
	p := &Postgres{
		pool: pool, sampler: pgactivity.NewSampler(pool, pgactivity.WithClock(cfg.now)),
		desc: desc, interval: cfg.interval, now: cfg.now, agg: newPGWindow(), done: make(chan struct{}),
	}
	if err := p.sampler.Check(pctx); err != nil {
		p.warn = err.Error()
	}
	return p, nil
}

// Describe names the server.
func (p *Postgres) Describe() string { return p.desc }

// Features: backends can be signalled; there is no policy to throttle.
func (p *Postgres) Features() Features { return Features{Signal: true} }

// Next waits for the next sampling instant, samples pg_stat_activity and
// returns the load over the last samples.
func (p *Postgres) Next(ctx context.Context, q Query) (live.Snapshot, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return live.Snapshot{}, ErrClosed
	}
	last := p.last
	p.mu.Unlock()
	if !last.IsZero() {
		if wait := last.Add(p.interval).Sub(p.now()); wait > 0 {
			t := time.NewTimer(wait)
			defer t.Stop()
			select {
			case <-ctx.Done():
				return live.Snapshot{}, ctx.Err()
			case <-p.done:
				return live.Snapshot{}, ErrClosed
			case <-t.C:
			}
		}
	}
	return p.sample(ctx, q)
}

// Once takes one sample and returns it, for --once.
func (p *Postgres) Once(ctx context.Context, q Query) (live.Snapshot, error) { return p.sample(ctx, q) }

func (p *Postgres) sample(ctx context.Context, q Query) (live.Snapshot, error) {
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
		return live.Snapshot{}, ErrClosed
	}
	p.last = p.now()
	if err != nil && !errors.Is(err, pgactivity.ErrInsufficientPrivilege) {
		return live.Snapshot{}, fmt.Errorf("%s: %w", p.desc, err)
	}
	p.agg.add(snap, p.interval)
	msg := p.warn
	if err != nil {
		msg = err.Error()
	}
	return p.agg.snapshot(snap.Time, q, msg), nil
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
	// UntaggedTenant names the load of statements without a tenant tag.
	UntaggedTenant = "unknown"
)

// pgWindow turns pg_stat_activity samples into live snapshots. It is pure
// (no I/O) so that it can be tested on built samples.
type pgWindow struct {
	n        int64 // samples added
	interval time.Duration
	ring     [pgWindowLen]map[string]*pgLoad
	tenants  map[string]*pgTenant
	stmts    []live.StatementRow
	blocked  []live.BlockRow
}

// pgLoad is one tenant's active sessions in one sample.
type pgLoad struct {
	active float64
	waits  map[string]float64
	routes map[string]float64
}

type pgTenant struct {
	hist [live.HistoryLen]float64 // by sample number mod HistoryLen
	last int64                    // the last sample it was active in
	tier tenant.Tier
}

func newPGWindow() *pgWindow { return &pgWindow{tenants: map[string]*pgTenant{}} }

// add accounts one sample. A parallel worker (LeaderPID ≠ 0) adds to the
// load of its leader's tenant but is not listed as a statement.
func (w *pgWindow) add(s pgactivity.Snapshot, interval time.Duration) {
	w.interval = interval
	slot := w.n % pgWindowLen
	loads := w.ring[slot]
	if loads == nil {
		loads = map[string]*pgLoad{}
		w.ring[slot] = loads
	}
	clear(loads)
	byPID := make(map[int32]*pgactivity.Backend, len(s.Backends))
	for i := range s.Backends {
		byPID[s.Backends[i].PID] = &s.Backends[i]
	}
	w.stmts, w.blocked = w.stmts[:0], w.blocked[:0]
	for i := range s.Backends {
		b := &s.Backends[i]
		if !b.Active() {
			continue
		}
		tags := b
		if b.LeaderPID != 0 {
			if l := byPID[b.LeaderPID]; l != nil {
				tags = l
			}
		}
		name := tags.Tenant
		if name == "" {
			name = UntaggedTenant
		}
		l := loads[name]
		if l == nil {
			l = &pgLoad{waits: map[string]float64{}, routes: map[string]float64{}}
			loads[name] = l
		}
		l.active++
		l.waits[b.Wait()]++
		l.routes[tags.Route]++
		t := w.tenants[name]
		if t == nil {
			t = &pgTenant{}
			w.tenants[name] = t
		}
		t.last = w.n
		if tags.Tier != tenant.TierUnset {
			t.tier = tags.Tier
		}
		if b.LeaderPID == 0 {
			w.stmts = append(w.stmts, pgStatement(b))
		}
	}
	for i := range s.Backends {
		b := &s.Backends[i]
		for _, pid := range b.BlockedBy {
			blocking := live.StatementRow{PID: pid}
			if o := byPID[pid]; o != nil {
				blocking = pgStatement(o)
			}
			w.blocked = append(w.blocked, live.BlockRow{Blocked: pgStatement(b), Blocking: blocking})
		}
	}
	slices.SortFunc(w.stmts, func(a, b live.StatementRow) int {
		if c := cmp.Compare(b.Duration, a.Duration); c != 0 {
			return c
		}
		return cmp.Compare(a.PID, b.PID)
	})
	if len(w.stmts) > pgStatementsMax {
		w.stmts = w.stmts[:pgStatementsMax]
	}
	h := w.n % live.HistoryLen
	for name, t := range w.tenants {
		if w.n-t.last >= live.HistoryLen {
			delete(w.tenants, name)
			continue
		}
		t.hist[h] = 0
		if l := loads[name]; l != nil {
			t.hist[h] = l.active
		}
	}
	w.n++
}

func pgStatement(b *pgactivity.Backend) live.StatementRow {
	return live.StatementRow{
		PID: b.PID, Tenant: b.Tenant, Route: b.Route, Application: b.Application, State: b.State,
		WaitEventType: b.WaitEventType, WaitEvent: b.WaitEvent, Duration: b.Duration, Query: b.Query,
		BlockedBy: b.BlockedBy,
	}
}

// snapshot returns the load of the window: tenants by DB load (the only
// measure PostgreSQL gives), the top q.Top and then "other".
func (w *pgWindow) snapshot(at time.Time, q Query, samplerErr string) live.Snapshot {
	samples := min(w.n, pgWindowLen)
	s := live.Snapshot{
		Time: at.UTC(), Window: time.Duration(samples) * w.interval, Source: live.SourcePostgres,
		Measure: live.MeasureDB, Tenants: []live.TenantRow{}, HotKeys: []live.HotKeyRow{},
		Statements: append([]live.StatementRow{}, w.stmts...), Blocked: append([]live.BlockRow(nil), w.blocked...),
		Services:  []live.ServiceRow{},
		Collector: live.CollectorStatus{Sampler: true, SamplerError: samplerErr},
	}
	for t := range tenant.NumTiers {
		s.Enforcement.Tiers[t] = live.TierRow{Tier: tenant.Tier(t + 1).String(), PriceMultiplier: 1}
	}
	if samples == 0 {
		return s
	}
	sum := map[string]*live.TenantRow{}
	for i := range samples {
		for name, l := range w.ring[(w.n-1-i+pgWindowLen)%pgWindowLen] {
			r := sum[name]
			if r == nil {
				r = &live.TenantRow{Tenant: name, Waits: map[string]float64{}}
				sum[name] = r
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
					r.Routes = append(r.Routes, live.RouteRow{Route: k, DBLoad: v})
				}
			}
		}
	}
	rows := make([]*live.TenantRow, 0, len(sum))
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
		slices.SortFunc(r.Routes, func(a, b live.RouteRow) int {
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
	slices.SortFunc(rows, func(a, b *live.TenantRow) int {
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
	var other *live.TenantRow
	for i, r := range rows {
		if total > 0 {
			r.Share = r.DBLoad / total
		}
		if i >= top {
			if other == nil {
				other = &live.TenantRow{Tenant: live.OtherTenant, History: make([]float64, live.HistoryLen)}
			}
			other.DBLoad += r.DBLoad
			other.Share += r.Share
			continue
		}
		if t := w.tenants[r.Tenant]; t != nil {
			r.Tier = t.tier.String()
			r.History = make([]float64, live.HistoryLen)
			for j := range live.HistoryLen {
				k := w.n - live.HistoryLen + int64(j)
				if k >= 0 {
					r.History[j] = t.hist[k%live.HistoryLen]
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
