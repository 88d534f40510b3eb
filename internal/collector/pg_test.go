package collector

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/ingest/store"
	"github.com/qtop-dev/qtop/internal/live"
	"github.com/qtop-dev/qtop/internal/testsvc"
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

	var snap live.Snapshot
	deadline := time.Now().Add(10 * time.Second)
	for {
		snap = s.Snapshot(time.Now(), live.MeasureDB, 10)
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
		if found && load > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sampler did not show bigcorp's statement and load: statements %+v tenants %+v err %q",
				snap.Statements, snap.Tenants, snap.Collector.SamplerError)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !snap.Collector.Sampler || snap.Source != live.SourcePostgres {
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
