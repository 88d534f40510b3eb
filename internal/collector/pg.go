package collector

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/pgactivity"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/tenant"
)

// pgPart is the PostgreSQL sampler's part of the live view: the longest
// running statements, the blocked pairs, the per-tenant wait breakdown
// and the sampler's last error. Its lock guards them; the rows a sample
// adds to the open minute are under the server's lock (Server.AddSample).
type pgPart struct {
	mu         sync.Mutex
	statements []api.StatementRow
	blocked    []api.BlockRow
	err        string
	agg        *pgactivity.Aggregator
	lastCut    time.Time
	// names resolves session tagging's short ids (names.go); set before
	// run.
	names func(id string) (string, bool)
	// metrics counts the statements whose tags could not be read; set
	// once by run, before its first sample.
	metrics *pgactivity.Metrics
	// pool is the sampler's connection while it is up (pgsignal.go
	// signals backends through it); nil otherwise.
	pool *pgxpool.Pool
	// dbt reads pg_stat_statements at each minute's turn (dbtime.go);
	// nil when the clients' DB time is kept.
	dbt *dbTimes
}

// waitsWindow is how often the per-tenant wait breakdown is recomputed.
const waitsWindow = 10 * time.Second

// samplerPool connects to dsn as "qtop-collector" in pg_stat_activity
// unless the DSN (or PGAPPNAME) names the application, so that a DBA can
// tell the sampler's sessions from the fleet's.
func samplerPool(ctx context.Context, dsn string) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	if pc.ConnConfig.RuntimeParams["application_name"] == "" {
		pc.ConnConfig.RuntimeParams["application_name"] = "qtop-collector"
	}
	return pgxpool.NewWithConfig(ctx, pc)
}

// run samples cfg.Postgres every second until ctx ends, handing each
// sample to add and to runaway, and connecting again after a failure.
func (p *pgPart) run(ctx context.Context, cfg Config, met *metrics, add func(pgactivity.Snapshot, time.Duration),
	runaway func(context.Context, *pgxpool.Pool, pgactivity.Snapshot)) {
	pm, err := pgactivity.NewMetrics(cfg.Registerer)
	if err != nil {
		cfg.Logger.Error("pg sampler: metrics", "err", err)
		pm, _ = pgactivity.NewMetrics(nil)
	}
	p.mu.Lock()
	p.metrics = pm
	p.mu.Unlock()
	for ctx.Err() == nil {
		pool, err := samplerPool(ctx, cfg.Postgres)
		if err == nil {
			err = pool.Ping(ctx)
		}
		if err != nil {
			p.setErr(err)
			cfg.Logger.Error("pg sampler: cannot connect; retrying", "err", err)
			if pool != nil {
				pool.Close()
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(5 * time.Second):
			}
			continue
		}
		cfg.Logger.Info("pg sampler: sampling pg_stat_activity every second")
		p.setPool(pool)
		stopClock := p.startStatementClock(ctx, pool, cfg)
		pgactivity.NewSampler(pool, pgactivity.WithMetrics(pm), pgactivity.WithTenantNames(p.names), pgactivity.WithAllDatabases(cfg.PostgresAllDatabases)).Run(ctx, time.Second, func(snap pgactivity.Snapshot, err error) {
			if err != nil && len(snap.Backends) == 0 {
				met.samplerErrors.Inc()
				p.setErr(err)
				return
			}
			add(snap, time.Second)
			runaway(ctx, pool, snap) // runaway.go
			if err != nil {          // e.g. sessions hidden from a role without pg_monitor
				p.setErr(err)
			}
		})
		stopClock() // its last read, before the pool closes
		p.setPool(nil)
		pool.Close()
	}
}

// startStatementClock reads pg_stat_statements at every minute's turn
// (dbtime.go) until the returned stop, which waits for its last read.
func (p *pgPart) startStatementClock(ctx context.Context, pool *pgxpool.Pool, cfg Config) (stop func()) {
	if p.dbt == nil {
		return func() {}
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	var warned sync.Once
	go func() {
		defer close(done)
		p.dbt.clock(cctx, pool, cfg.Now, func(err error) {
			warned.Do(func() {
				cfg.Logger.Warn("pg sampler: cannot read pg_stat_statements: statement spans keep the DB time their clients measured", "err", err)
			})
		})
	}()
	return func() { cancel(); <-done }
}

func (p *pgPart) setPool(pool *pgxpool.Pool) {
	p.mu.Lock()
	p.pool = pool
	p.mu.Unlock()
}

func (p *pgPart) setErr(err error) {
	p.mu.Lock()
	p.err = err.Error()
	p.mu.Unlock()
}

// AddSample merges one pg_stat_activity sample taken every interval:
// per-tenant active sessions into the live view (DB load) and into the
// minute's "pg" rollups (active-session seconds), the longest running
// statements and the blocked pairs into the live view, and statements
// running longer than a second into the minute's sampled statements.
func (s *Server) AddSample(snap pgactivity.Snapshot, interval time.Duration) {
	s.met.samples.Inc()
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Now()
	mt := snap.Time.UTC().Truncate(time.Minute)
	if snap.Time.IsZero() || !now.Before(mt.Add(time.Minute+s.cfg.Grace)) || mt.After(now.Add(time.Minute)) {
		mt = now.UTC().Truncate(time.Minute)
	}
	m := s.minutes.at(mt)
	defer m.dirty.Store(true)
	running, active := sampleRows(s.agg, snap, m, interval, now, s.em.writer)
	s.pg.add(snap, running, now, s.agg)
	untagged := active[report.UnknownTenant]
	s.met.pgActive.WithLabelValues("false").Add(untagged * interval.Seconds())
	for name, n := range active {
		if name != report.UnknownTenant {
			s.met.pgActive.WithLabelValues("true").Add(n * interval.Seconds())
		}
	}
}

// sampleRows adds a sample's active sessions to minute m's "pg" rows and
// to the tenants' DB load at now, and its slow statements to m's sampled
// statements; it returns the running statements (not parallel workers)
// and the active sessions per tenant (report.UnknownTenant: untagged).
// The server's lock is held (the minute).
func sampleRows(agg *aggregator, snap pgactivity.Snapshot, m *minute, interval time.Duration, now time.Time, writer string) ([]*pgactivity.Backend, map[string]float64) {
	active := make(map[string]float64)
	tiers := make(map[string]tenant.Tier) // of tenants whose sessions carry one
	var running []*pgactivity.Backend
	for i := range snap.Backends {
		b := &snap.Backends[i]
		if !b.Active() {
			continue
		}
		// A parallel worker is load of its leader's tenant (pgactivity
		// gives it the leader's tags) but not a statement of its own.
		worker := b.LeaderPID != 0
		if !worker {
			running = append(running, b)
		}
		name := b.Tenant
		agg.withRow(m, rowKey{"", name, b.Route, report.KindPG}, func(a *rowAgg) {
			if i := b.Tier.Index(); i >= 0 {
				a.tiers[i]++
			}
			a.count++
			a.active += interval.Seconds()
		})
		if name == "" {
			name = report.UnknownTenant
		} else if b.Tier != tenant.TierUnset {
			tiers[name] = b.Tier
		}
		active[name]++
		if !worker && b.Duration >= slowStatement {
			m.addStatement(snap.Time, b, writer)
		}
	}
	sec := now.Unix()
	for name, n := range active {
		agg.withTenant(name, func(tl *tenantLive) {
			j := tl.w.slot(sec)
			tl.w.pg[j] = max(tl.w.pg[j], n)
			tl.pgHistory().atLeast(sec, n)
			tl.touch(sec)
			if t, ok := tiers[name]; ok && tl.tier == tenant.TierUnset {
				// Seen only by the sampler (a job on the database itself):
				// its tag's tier, so the view shows it and the autopilot
				// spares a T0 tenant. A reported tier wins.
				tl.tier = t
			}
		})
	}
	return running, active
}

// addStatement keeps a slow statement of a sample taken at t in the
// minute (at most maxStmtsMinute, each at its longest).
func (m *minute) addStatement(t time.Time, b *pgactivity.Backend, writer string) {
	if m.stmts == nil {
		m.stmts = make(map[stmtKey]store.Statement)
	}
	sk := stmtKey{b.PID, b.QueryStart.UnixNano()}
	if old, ok := m.stmts[sk]; ok || len(m.stmts) < maxStmtsMinute {
		if !ok || b.Duration > old.Duration {
			m.stmts[sk] = store.Statement{
				Time: t.UTC(), Writer: writer, PID: b.PID, Tenant: b.Tenant, Route: b.Route,
				Application: b.Application, Query: b.Query, State: b.State,
				WaitEventType: b.WaitEventType, WaitEvent: b.WaitEvent, Duration: b.Duration,
			}
		}
	}
}

// add takes a sample's running statements and blocked pairs into the
// live view, and every waitsWindow the tenants' wait breakdown.
func (p *pgPart) add(snap pgactivity.Snapshot, running []*pgactivity.Backend, now time.Time, agg *aggregator) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.err = ""
	slices.SortFunc(running, func(a, b *pgactivity.Backend) int { return cmpDuration(b.Duration, a.Duration) })
	p.statements = p.statements[:0]
	for _, b := range running[:min(len(running), statementsShow)] {
		p.statements = append(p.statements, b.Row())
	}
	byPID := make(map[int32]*pgactivity.Backend, len(snap.Backends))
	for i := range snap.Backends {
		byPID[snap.Backends[i].PID] = &snap.Backends[i]
	}
	p.blocked = p.blocked[:0]
	for i := range snap.Backends {
		b := &snap.Backends[i]
		for _, pid := range b.BlockedBy {
			blocking := api.StatementRow{PID: pid}
			if o := byPID[pid]; o != nil {
				blocking = o.Row()
			}
			if len(p.blocked) < statementsShow {
				p.blocked = append(p.blocked, api.BlockRow{Blocked: b.Row(), Blocking: blocking})
			}
		}
	}
	if p.agg == nil {
		p.agg = pgactivity.NewAggregator()
		p.lastCut = now
	}
	p.agg.Add(snap)
	if now.Sub(p.lastCut) >= waitsWindow || now.Before(p.lastCut) {
		win := p.agg.Cut(now)
		p.lastCut = now
		agg.eachTenant(func(_ int, _ string, tl *tenantLive) { tl.waits = nil })
		for _, tload := range win.Tenants {
			name := tload.Tenant
			if name == "" {
				name = report.UnknownTenant
			}
			agg.tenantShard(name, func(tl *tenantLive) { tl.waits = tload.Waits })
		}
	}
}

// snapshot adds the running statements and the blocked pairs.
func (p *pgPart) snapshot(snap *api.Snapshot) {
	p.mu.Lock()
	defer p.mu.Unlock()
	snap.Statements = append([]api.StatementRow{}, p.statements...)
	snap.Blocked = append([]api.BlockRow(nil), p.blocked...)
}

// status adds the sampler's error and the tag-parsing counts.
func (p *pgPart) status(cs *api.CollectorStatus) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cs.SamplerError = p.err
	cs.MalformedComments, cs.TruncatedStatements = p.metrics.Counts()
}

func cmpDuration(a, b time.Duration) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
