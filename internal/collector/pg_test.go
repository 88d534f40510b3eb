package collector

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/pgactivity"
	"github.com/qtop-dev/qtop/store"
)

// TestPostgresSampler runs the collector's sampler against the real
// PostgreSQL while a tagged statement runs: the live view shows the
// statement with its tenant and the tenant's DB load, and the minute's
// "pg" rollup and the slow statement reach the store.
func TestPostgresSampler(t *testing.T) {
	dsn := testsvc.Postgres(t)
	mem := newMemStore()
	s, err := New(Config{Store: "duckdb://unused", DataDir: t.TempDir(), Writer: "w1", Postgres: dsn,
		Registerer: prometheus.NewRegistry(), OpenStore: func(string) (store.Store, error) { return mem, nil }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.Run(ctx)
	defer s.Shutdown(context.Background())

	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := conn.Exec(ctx, "SELECT pg_sleep(4) /*route='GET%20%2Freports',tenant='bigcorp'*/")
		done <- err
	}()

	var snap api.Snapshot
	shows := func() bool {
		snap = s.Snapshot(time.Now(), api.MeasureDB, 10)
		found := false
		for _, st := range snap.Statements {
			found = found || (st.Tenant == "bigcorp" && st.Route == "GET /reports" && st.Duration >= time.Second)
		}
		var load float64
		for _, tr := range snap.Tenants {
			if tr.Tenant == "bigcorp" {
				load = tr.DBLoad
			}
		}
		return found && load > 0
	}
	if !waitUntil(10*time.Second, shows) {
		t.Fatalf("sampler did not show bigcorp's statement and load: statements %+v tenants %+v err %q",
			snap.Statements, snap.Tenants, snap.Collector.SamplerError)
	}
	if !snap.Collector.Sampler || snap.Source != api.SourcePostgres {
		t.Fatalf("collector status %+v source %q", snap.Collector, snap.Source)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	s.Tick(ctx, time.Now().Add(2*time.Minute))
	if got := mem.sum("bigcorp", store.KindPG, func(r store.Rollup) float64 { return r.ActiveSessionSeconds }); got < 1 {
		t.Fatalf("bigcorp pg active-session seconds = %v, want ≥ 1", got)
	}
	mem.mu.Lock()
	defer mem.mu.Unlock()
	found := false
	for _, st := range mem.stmts {
		found = found || (st.Tenant == "bigcorp" && st.Duration >= time.Second)
	}
	if !found {
		t.Fatalf("slow statement not stored: %+v", mem.stmts)
	}
}

// TestParallelWorkersAreLoadNotStatements: a parallel query's workers add to
// their leader's tenant load, but the statement is listed (and sampled as
// slow) once, for the leader.
func TestParallelWorkersAreLoadNotStatements(t *testing.T) {
	mem := newMemStore()
	s, err := New(Config{Store: "duckdb://unused", DataDir: t.TempDir(), Writer: "w1",
		Registerer: prometheus.NewRegistry(), OpenStore: func(string) (store.Store, error) { return mem, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	now := time.Now()
	q := "SELECT count(*) FROM big /*tenant='bigcorp'*/"
	b := func(pid, leader int32) pgactivity.Backend {
		return pgactivity.Backend{PID: pid, LeaderPID: leader, Tenant: "bigcorp", State: "active",
			QueryStart: now.Add(-5 * time.Second), Duration: 5 * time.Second, Query: q}
	}
	s.AddSample(pgactivity.Snapshot{Time: now, Backends: []pgactivity.Backend{b(100, 0), b(101, 100), b(102, 100)}}, time.Second)
	// Rates are over the complete seconds before the snapshot.
	snap := s.Snapshot(now.Add(time.Second), api.MeasureDB, 10)
	if len(snap.Statements) != 1 || snap.Statements[0].PID != 100 {
		t.Fatalf("statements %+v: want only the leader, pid 100", snap.Statements)
	}
	var load float64
	for _, tr := range snap.Tenants {
		if tr.Tenant == "bigcorp" {
			load = tr.DBLoad
		}
	}
	// Three active sessions for one second of a ten-second window.
	if math.Abs(load-0.3) > 1e-9 {
		t.Fatalf("bigcorp DB load %v, want 0.3 (leader and two workers, 1 s of 10)", load)
	}
	s.Tick(context.Background(), now.Add(2*time.Minute))
	mem.mu.Lock()
	defer mem.mu.Unlock()
	if len(mem.stmts) != 1 {
		t.Fatalf("sampled slow statements %+v: want one, the leader's", mem.stmts)
	}
}
