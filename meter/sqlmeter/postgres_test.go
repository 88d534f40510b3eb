package sqlmeter

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/meter"
	"github.com/qtop-dev/qtop/meter/otelmeter"
	"github.com/qtop-dev/qtop/report"
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
// report.Decode, must give each tenant a DB time between PostgreSQL's own
// measure and the client's around each call (so no machine load can fail
// it), and every request.
func TestPostgresDBTimePerTenant(t *testing.T) {
	// pg_sleep, and the time PostgreSQL itself measured for the statement.
	const query = "SELECT extract(epoch FROM clock_timestamp() - statement_timestamp())::float8 FROM pg_sleep($1)"
	dsn := testsvc.Postgres(t)
	c := newCollector(t)
	rec := mustRecorder(meter.WithSource(report.Source{Service: "e2e", Instance: "e2e-1"}))
	reg := prometheus.NewRegistry() // says why a report was dropped, if one is
	rep := newReporter(t, c, rec, meter.WithInterval(50*time.Millisecond), meter.WithTimeout(100*time.Millisecond),
		meter.WithBackoff(5*time.Millisecond, 50*time.Millisecond), meter.WithRegisterer(reg))
	rep.Start()

	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithSpanProcessor(mustSpanProcessor(rec, otelmeter.WithDBSpans(false))))
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
	// Statements of 200 ms or more, so that each is long against what the
	// round trip adds.
	loads := []load{
		{"acme", tenant.T2, 6, 2, 250 * time.Millisecond},    // 3 s
		{"globex", tenant.T1, 4, 1, 400 * time.Millisecond},  // 1.6 s
		{"initech", tenant.T3, 8, 1, 200 * time.Millisecond}, // 1.6 s
	}
	// PostgreSQL's own measure of each statement (pg_sleep overshoots by
	// a millisecond or so), the ground truth for the client-side DB time.
	var serverMu sync.Mutex
	serverTime := map[string]time.Duration{}
	// The client's own measure of each statement, around the call: what
	// the wrapper records lies between the two, whatever the machine's
	// load.
	clientTime := map[string]time.Duration{}
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
						took := time.Since(start)
						if err != nil {
							errs <- fmt.Errorf("%s: %w", l.tenant, err)
						}
						serverMu.Lock()
						serverTime[l.tenant] += time.Duration(secs * float64(time.Second))
						clientTime[l.tenant] += took
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
			case report.KindDB:
				dbTime[row.Tenant] += row.Duration
				dbCount[row.Tenant] += row.Count
			case report.KindRequest:
				requests[row.Tenant] += row.Count
			}
		}
	}
	if rep.Dropped() != 0 {
		var why []string
		if mfs, err := reg.Gather(); err == nil {
			for _, mf := range mfs {
				for _, m := range mf.GetMetric() {
					if strings.Contains(mf.GetName(), "dropped") || strings.Contains(mf.GetName(), "fail") {
						why = append(why, fmt.Sprintf("%s%v %v", mf.GetName(), m.GetLabel(), m.GetCounter().GetValue()))
					}
				}
			}
		}
		t.Errorf("%d reports dropped: %v", rep.Dropped(), why)
	}
	for _, l := range loads {
		nominal := time.Duration(l.requests*l.perReq) * l.sleep
		server := serverTime[l.tenant]
		got := dbTime[l.tenant]
		// PostgreSQL's measure of a statement lies inside the wrapper's,
		// which lies inside the client's around the call (PostgreSQL's
		// wall clock against Go's monotonic one: 1 ms of slack per
		// statement). On a loaded machine PostgreSQL's can exceed even
		// the client's: a backend descheduled between sending its answer
		// and stopping its clock (beside stress-ng: globex 1.610 s by
		// PostgreSQL, 1.606 s around the calls), so the floor is the
		// lower of the two.
		slack := time.Duration(l.requests*l.perReq) * time.Millisecond
		if client := clientTime[l.tenant]; got < min(server, client)-slack || got > client {
			t.Errorf("%s: DB time %v, want between PostgreSQL's %v and the client's %v", l.tenant, got, server, client)
		}
		if got < nominal-slack {
			t.Errorf("%s: DB time %v below the %v of pg_sleep asked", l.tenant, got, nominal)
		}
		t.Logf("%s: DB time %v; pg_sleep asked %v (%+.2f%%), PostgreSQL measured %v (%+.2f%%)", l.tenant, got,
			nominal, 100*float64(got-nominal)/float64(nominal), server, 100*float64(got-server)/float64(server))
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

// collector is a stand-in for the collector's POST /v1/reports whose
// weather (setMode) changes: ok, down (the connection closed), garbage500
// or slow (no answer before the reporter's timeout).
type collector struct {
	srv     *httptest.Server
	mu      sync.Mutex
	mode    string
	reports []*report.Report
}

func newCollector(t *testing.T) *collector {
	c := &collector{mode: "ok"}
	c.srv = httptest.NewServer(http.HandlerFunc(c.serve))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *collector) setMode(m string) {
	c.mu.Lock()
	c.mode = m
	c.mu.Unlock()
}

func (c *collector) got() []*report.Report {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*report.Report(nil), c.reports...)
}

func (c *collector) serve(w http.ResponseWriter, req *http.Request) {
	c.mu.Lock()
	mode := c.mode
	c.mu.Unlock()
	switch mode {
	case "down":
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close()
		return
	case "slow":
		t := time.NewTimer(time.Second) // past the reporter's timeout
		defer t.Stop()
		select {
		case <-req.Context().Done():
		case <-t.C:
		}
		return
	case "garbage500":
		w.WriteHeader(500)
		io.WriteString(w, "<html>upstream error</html>")
		return
	}
	body, _ := io.ReadAll(req.Body)
	r, err := report.Decode(body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	c.reports = append(c.reports, r)
	c.mu.Unlock()
	b, _ := report.EncodeReply(report.Reply{Accepted: true})
	w.Header().Set("Content-Type", report.ReplyContentType)
	w.Write(b)
}

func newReporter(t *testing.T, c *collector, rec *meter.Recorder, opts ...meter.ReporterOption) *meter.Reporter {
	t.Helper()
	opts = append([]meter.ReporterOption{meter.WithHTTPClient(c.srv.Client()), meter.WithBackoff(time.Millisecond, 20*time.Millisecond)}, opts...)
	r, err := meter.NewReporter(c.srv.URL+"/v1/reports", rec, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_ = r.Shutdown(ctx)
	})
	return r
}
