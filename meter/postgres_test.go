package meter

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/sqlcomment"
	"github.com/qtop-dev/qtop/tenant"
)

// TestPostgresDBTimePerTenant is the package's end-to-end test: an
// application with the real OTel SDK (server spans through the span
// processor, beside a batch span processor) and the sqlcomment wrapper
// over the real PostgreSQL (db time through SQLObserver) runs pg_sleep
// statements of known durations per tenant, while its reporter ships
// reports to a collector that is in turn healthy, down, answering
// garbage, slow and healthy again. The reports, decoded with
// DecodeReport, must give each tenant's DB time within 5% and every
// request.
func TestPostgresDBTimePerTenant(t *testing.T) {
	// pg_sleep, and the time PostgreSQL itself measured for the statement.
	const query = "SELECT extract(epoch FROM clock_timestamp() - statement_timestamp())::float8 FROM pg_sleep($1)"
	dsn := testsvc.Postgres(t)
	c := newCollector(t)
	rec := mustRecorder(WithSource(Source{Service: "e2e", Instance: "e2e-1"}))
	rep := newReporter(t, c, rec, WithInterval(50*time.Millisecond), WithTimeout(100*time.Millisecond),
		WithBackoff(5*time.Millisecond, 50*time.Millisecond))
	rep.Start()

	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithSpanProcessor(mustSpanProcessor(rec, WithDBSpans(false))))
	defer tp.Shutdown(context.Background())
	tr := tp.Tracer("e2e")

	db, err := sqlcomment.Open("pgx", dsn, sqlcomment.WithObserver(mustSQLObserver(rec)))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// Open and warm up every connection first (pgx prepares a statement
	// on its first use on a connection: one more round trip that
	// PostgreSQL's statement clock below does not see), under a tenant of
	// its own.
	const conns = 6
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	warm := tenant.With(context.Background(), tenant.Tags{Tenant: "warmup"})
	var ready sync.WaitGroup
	for range conns {
		ready.Add(1)
		go func() {
			defer ready.Done()
			var secs float64
			if err := db.QueryRowContext(warm, query, 0.05).Scan(&secs); err != nil {
				t.Error(err)
			}
		}()
	}
	ready.Wait()

	// Each tenant runs requests of statements of known duration.
	type load struct {
		tenant   string
		tier     tenant.Tier
		requests int
		perReq   int
		sleep    time.Duration
	}
	// The meter measures each statement on the client: PostgreSQL's own
	// measure of it (below) and the test's measure around the call bracket
	// that exactly, however loaded the machine (which adds scheduling
	// delays to the client's measure, not to the server's).
	loads := []load{
		{"acme", tenant.T2, 6, 2, 250 * time.Millisecond},    // 3 s
		{"globex", tenant.T1, 4, 1, 400 * time.Millisecond},  // 1.6 s
		{"initech", tenant.T3, 8, 1, 200 * time.Millisecond}, // 1.6 s
	}
	// PostgreSQL's own measure of each statement (pg_sleep overshoots by
	// a millisecond or so): within the client's measure of it, which is
	// within the test's measure of the call.
	var serverMu sync.Mutex
	serverTime := map[string]time.Duration{}
	callTime := map[string]time.Duration{}
	modes := []string{"ok", "down", "garbage500", "slow", "ok"}
	stopModes := make(chan struct{})
	modesDone := make(chan struct{})
	go func() { // the collector's weather
		defer close(modesDone)
		for _, m := range modes {
			c.setMode(m)
			select {
			case <-stopModes:
				return
			case <-time.After(150 * time.Millisecond):
			}
		}
	}()

	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for _, l := range loads {
		for w := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < l.requests; i += 2 {
					ctx := tenant.With(context.Background(), tenant.Tags{Tenant: l.tenant, Route: "GET /work", Tier: l.tier})
					ctx, span := tr.Start(ctx, "GET /work", trace.WithSpanKind(trace.SpanKindServer))
					for range l.perReq {
						var secs float64
						start := time.Now()
						err := db.QueryRowContext(ctx, query, l.sleep.Seconds()).Scan(&secs)
						call := time.Since(start)
						if err != nil {
							errs <- fmt.Errorf("%s: %w", l.tenant, err)
						}
						serverMu.Lock()
						serverTime[l.tenant] += time.Duration(secs * float64(time.Second))
						callTime[l.tenant] += call
						serverMu.Unlock()
					}
					span.End()
				}
			}()
		}
	}
	wg.Wait()
	close(stopModes)
	<-modesDone
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	c.setMode("ok")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rep.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}

	// What the collector knows, each Seq once.
	seen := map[uint64]bool{}
	dbTime := map[string]time.Duration{}
	dbCount := map[string]uint64{}
	requests := map[string]uint64{}
	for _, r := range c.got() {
		if seen[r.Seq] {
			continue
		}
		seen[r.Seq] = true
		for _, row := range r.Rows {
			switch row.Kind {
			case KindDB:
				dbTime[row.Tenant] += row.Duration
				dbCount[row.Tenant] += row.Count
			case KindRequest:
				requests[row.Tenant] += row.Count
			}
		}
	}
	if rep.Dropped() != 0 {
		t.Errorf("%d reports dropped", rep.Dropped())
	}
	for _, l := range loads {
		nominal := time.Duration(l.requests*l.perReq) * l.sleep
		server, call := serverTime[l.tenant], callTime[l.tenant]
		got := dbTime[l.tenant]
		// Each statement's DB time once, under its own tenant: no less
		// than PostgreSQL measured, no more than the calls took. (A
		// statement lost or counted under another tenant falls out of
		// the bracket by its 200 ms or more; one counted twice too, and
		// in the count below.)
		if server < nominal || got < server || got > call {
			t.Errorf("%s: DB time %v, want within [%v PostgreSQL measured, %v the calls took] (pg_sleep asked %v)", l.tenant, got, server, call, nominal)
		}
		t.Logf("%s: DB time %v; pg_sleep asked %v (%+.2f%%), PostgreSQL measured %v (%+.2f%%), the calls took %v", l.tenant, got,
			nominal, 100*float64(got-nominal)/float64(nominal), server, 100*float64(got-server)/float64(server), call)
		if dbCount[l.tenant] != uint64(l.requests*l.perReq) {
			t.Errorf("%s: %d statements, want %d", l.tenant, dbCount[l.tenant], l.requests*l.perReq)
		}
		if requests[l.tenant] != uint64(l.requests) {
			t.Errorf("%s: %d requests, want %d", l.tenant, requests[l.tenant], l.requests)
		}
	}
	if len(seen) < 5 {
		t.Errorf("only %d reports arrived", len(seen))
	}
}
