package collector

import (
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/pgactivity"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/store"
)

// pgState is the sampler's part of the live view.
type pgState struct {
	statements []api.StatementRow
	blocked    []api.BlockRow
	err        string
	agg        *pgactivity.Aggregator
	lastCut    time.Time
	// metrics counts the statements whose tags could not be read; set
	// once by runSampler, before its first sample.
	metrics *pgactivity.Metrics
}

// waitsWindow is how often the per-tenant wait breakdown is recomputed.
const waitsWindow = 10 * time.Second

func (s *Server) runSampler(ctx context.Context) {
	met, err := pgactivity.NewMetrics(s.cfg.Registerer)
	if err != nil {
		s.log.Error("pg sampler: metrics", "err", err)
		met, _ = pgactivity.NewMetrics(nil)
	}
	s.mu.Lock()
	s.pg.metrics = met
	s.mu.Unlock()
	for ctx.Err() == nil {
		pool, err := pgxpool.New(ctx, s.cfg.Postgres)
		if err == nil {
			err = pool.Ping(ctx)
		}
		if err != nil {
			s.setSamplerErr(err)
			s.log.Error("pg sampler: cannot connect; retrying", "err", err)
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
		s.log.Info("pg sampler: sampling pg_stat_activity every second")
		pgactivity.NewSampler(pool, pgactivity.WithMetrics(met)).Run(ctx, time.Second, func(snap pgactivity.Snapshot, err error) {
			if err != nil && len(snap.Backends) == 0 {
				s.met.samplerErrors.Inc()
				s.setSamplerErr(err)
				return
			}
			s.AddSample(snap, time.Second)
			s.checkRunaway(ctx, pool, snap) // runaway.go
			if err != nil {                 // e.g. sessions hidden from a role without pg_monitor
				s.setSamplerErr(err)
			}
		})
		pool.Close()
	}
}

func (s *Server) setSamplerErr(err error) {
	s.mu.Lock()
	s.pg.err = err.Error()
	s.mu.Unlock()
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
	sec := now.Unix()
	s.pg.err = ""
	mt := snap.Time.UTC().Truncate(time.Minute)
	if snap.Time.IsZero() || !now.Before(mt.Add(time.Minute+s.cfg.Grace)) || mt.After(now.Add(time.Minute)) {
		mt = now.UTC().Truncate(time.Minute)
	}
	m := s.minutes[mt.Unix()]
	if m == nil {
		m = newMinute(mt)
		s.minutes[mt.Unix()] = m
	}
	defer m.dirty.Store(true)
	active := make(map[string]float64)
	byPID := make(map[int32]*pgactivity.Backend, len(snap.Backends))
	var running []*pgactivity.Backend
	for i := range snap.Backends {
		b := &snap.Backends[i]
		byPID[b.PID] = b
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
		s.agg.withRows(name, m, func(rows map[rowKey]*rowAgg) {
			a, _ := s.agg.row(rows, m, rowKey{"", name, b.Route, report.KindPG})
			if i := b.Tier.Index(); i >= 0 {
				a.tiers[i]++
			}
			a.count++
			a.active += interval.Seconds()
		})
		if name == "" {
			name = report.UnknownTenant
		}
		active[name]++
		if !worker && b.Duration >= slowStatement {
			if m.stmts == nil {
				m.stmts = make(map[stmtKey]store.Statement)
			}
			sk := stmtKey{b.PID, b.QueryStart.UnixNano()}
			if old, ok := m.stmts[sk]; ok || len(m.stmts) < maxStmtsMinute {
				if !ok || b.Duration > old.Duration {
					m.stmts[sk] = store.Statement{
						Time: snap.Time.UTC(), Writer: s.writer, PID: b.PID, Tenant: b.Tenant, Route: b.Route,
						Application: b.Application, Query: b.Query, State: b.State,
						WaitEventType: b.WaitEventType, WaitEvent: b.WaitEvent, Duration: b.Duration,
					}
				}
			}
		}
	}
	for name, n := range active {
		s.agg.withTenant(name, func(tl *tenantLive) {
			j := tl.w.slot(sec)
			tl.w.pg[j] = max(tl.w.pg[j], n)
			tl.hdb.add(sec, 0)
		})
	}
	slices.SortFunc(running, func(a, b *pgactivity.Backend) int { return cmpDuration(b.Duration, a.Duration) })
	s.pg.statements = s.pg.statements[:0]
	for _, b := range running[:min(len(running), statementsShow)] {
		s.pg.statements = append(s.pg.statements, statementRow(b))
	}
	s.pg.blocked = s.pg.blocked[:0]
	for i := range snap.Backends {
		b := &snap.Backends[i]
		for _, pid := range b.BlockedBy {
			blocking := api.StatementRow{PID: pid}
			if o := byPID[pid]; o != nil {
				blocking = statementRow(o)
			}
			if len(s.pg.blocked) < statementsShow {
				s.pg.blocked = append(s.pg.blocked, api.BlockRow{Blocked: statementRow(b), Blocking: blocking})
			}
		}
	}
	if s.pg.agg == nil {
		s.pg.agg = pgactivity.NewAggregator()
		s.pg.lastCut = now
	}
	s.pg.agg.Add(snap)
	if now.Sub(s.pg.lastCut) >= waitsWindow || now.Before(s.pg.lastCut) {
		win := s.pg.agg.Cut(now)
		s.pg.lastCut = now
		s.agg.eachTenant(func(_ int, _ string, tl *tenantLive) { tl.waits = nil })
		for _, tload := range win.Tenants {
			name := tload.Tenant
			if name == "" {
				name = report.UnknownTenant
			}
			s.agg.tenantShard(name, func(tl *tenantLive) { tl.waits = tload.Waits })
		}
	}
}

func statementRow(b *pgactivity.Backend) api.StatementRow {
	return api.StatementRow{
		PID: b.PID, Tenant: b.Tenant, Route: b.Route, Application: b.Application, State: b.State,
		WaitEventType: b.WaitEventType, WaitEvent: b.WaitEvent, Duration: b.Duration, Query: b.Query,
		BlockedBy: b.BlockedBy,
	}
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
