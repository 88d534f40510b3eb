package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.uber.org/goleak"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/internal/collector"
	"github.com/qtop-dev/qtop/internal/testsvc"
)

// The end-to-end tests of OTLP in: a real service instrumented with
// OpenTelemetry only (the Go one in this package, the Node.js one in
// node/) exports its spans to an in-process collector on DuckDB; a load of
// a few seconds goes to several tenants and routes on the real
// PostgreSQL; then `qtop --once` (the real binary, against the collector)
// and a cost report from the store must attribute the requests exactly and
// the database time within 2% of what the service itself measured per
// tenant.

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// load is the steady mix the test sends: per round, each tenant's routes.
var load = map[string][]string{
	"acme":    {"/reports/1", "/reports/2", "/orders"},
	"globex":  {"/products", "/orders", "/products"},
	"initech": {"/products"},
}

const loadFor = 4 * time.Second

// buildQtop builds the qtop command (before the load, so that the build
// does not push the load out of the live window).
func buildQtop(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "qtop")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/qtop").CombinedOutput(); err != nil {
		t.Fatalf("go build qtop: %v\n%s", err, out)
	}
	return bin
}

// startCollector runs a collector on DuckDB in a temporary folder.
func startCollector(t *testing.T, opts ...func(*collector.Config)) (*collector.Server, string) {
	t.Helper()
	dir := t.TempDir()
	cfg := collector.Config{
		Listen: "127.0.0.1:0", Store: "duckdb://" + filepath.Join(dir, "qtop.duckdb"),
		DataDir: filepath.Join(dir, "data"), Token: "report-token",
	}
	for _, o := range opts {
		o(&cfg)
	}
	s, err := collector.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	return s, cfg.Store
}

// runLoad sends the mix with two workers per tenant for loadFor and
// returns the requests answered 200 per tenant.
func runLoad(t *testing.T, base string, header func(r *http.Request, tenant string)) map[string]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), loadFor)
	defer cancel()
	var mu sync.Mutex
	ok := map[string]int64{}
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 10 * time.Second}
	for tn, paths := range load {
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					for _, p := range paths {
						req, _ := http.NewRequest(http.MethodGet, base+p, nil)
						header(req, tn)
						resp, err := client.Do(req)
						if err != nil {
							t.Errorf("%s %s: %v", tn, p, err)
							return
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != http.StatusOK {
							t.Errorf("%s %s: %d", tn, p, resp.StatusCode)
							return
						}
						mu.Lock()
						ok[tn]++
						mu.Unlock()
					}
				}
			}()
		}
	}
	wg.Wait()
	client.CloseIdleConnections()
	return ok
}

// truth is what a service measured for a tenant: the requests it served,
// the time of its PostgreSQL spans, and (Node) the wall time around each
// query, which also holds the event loop's delays.
type truth struct {
	Requests      int64   `json:"requests"`
	DBSeconds     float64 `json:"db_seconds"`
	DBWallSeconds float64 `json:"db_wall_seconds"`
}

func getStats(t *testing.T, base string) map[string]truth {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(base + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]truth
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// otlpMetrics returns the collector's qtop_otlp_* series, for a failure's
// message.
func otlpMetrics(base string) string {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "qtop_otlp_") || strings.HasPrefix(l, "qtop_collector_reports") || strings.HasPrefix(l, "qtop_collector_rejected") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func within(got, want, rel float64) bool { return math.Abs(got-want) <= rel*want }

// check waits until the collector has merged every request, then compares
// qtop --once and the cost report with the service's own figures.
func check(t *testing.T, bin string, coll *collector.Server, storeURL, service string, sent map[string]int64, want map[string]truth) {
	t.Helper()
	untagged := want[""] // work of no tenant: the Node pool's connections opened at start
	delete(want, "")
	for tn, n := range sent {
		if want[tn].Requests != n {
			t.Fatalf("%s: the service counted %d requests, the load sent %d", tn, want[tn].Requests, n)
		}
	}
	base := "http://" + coll.Addr()
	var snap api.Snapshot
	var total float64
	var all int64
	for _, n := range sent {
		all += n
	}
	if !testsvc.PollEvery(20*time.Second, 200*time.Millisecond, func() bool {
		snap = coll.Snapshot(time.Now(), api.MeasureDB, 10)
		total = 0.0 // requests of the load's tenants (not the service's own untagged calls)
		for _, r := range snap.Tenants {
			if _, ok := sent[r.Tenant]; ok {
				total += r.ReqPerSec * snap.Window.Seconds()
			}
		}
		return math.Round(total) == float64(all)
	}) {
		t.Fatalf("the collector shows %.0f requests, %d were sent: %+v\n%s", total, all, snap.Tenants, otlpMetrics(base))
	}
	// qtop --once, the real binary, while the load is in its window.
	out, err := exec.Command(bin, "--collector", base, "--once", "--format", "json", "--sort", "db", "--top", "20").Output()
	if err != nil {
		t.Fatalf("qtop --once: %v", err)
	}
	var once api.Snapshot
	if err := json.Unmarshal(out, &once); err != nil {
		t.Fatalf("qtop --once output: %v\n%s", err, out)
	}
	seen := map[string]bool{}
	for _, r := range once.Tenants {
		w, ok := want[r.Tenant]
		if r.Untagged {
			// Untagged work of the service: its /flush call, the pool's
			// connections opened at start.
			t.Logf("qtop --once: untagged: %.0f requests, %.3f s DB", r.ReqPerSec*once.Window.Seconds(), r.DBLoad*once.Window.Seconds())
			continue
		}
		if !ok {
			t.Errorf("qtop --once: tenant %q the service never served (%+v)", r.Tenant, r)
			continue
		}
		seen[r.Tenant] = true
		reqs := r.ReqPerSec * once.Window.Seconds()
		db := r.DBLoad * once.Window.Seconds()
		t.Logf("qtop --once: %-8s %6.0f requests (service: %d)  %7.3f s DB (service: %.3f s)", r.Tenant, reqs, w.Requests, db, w.DBSeconds)
		if math.Round(reqs) != float64(w.Requests) {
			t.Errorf("qtop --once: %s: %.1f requests, the service served %d", r.Tenant, reqs, w.Requests)
		}
		if !within(db, w.DBSeconds, 0.002) {
			t.Errorf("qtop --once: %s: %.3f s of DB time, the service measured %.3f s (more than 0.2%% apart: the same spans)", r.Tenant, db, w.DBSeconds)
		}
		if w.DBWallSeconds > 0 && !within(db, w.DBWallSeconds, 0.15) {
			t.Errorf("qtop --once: %s: %.3f s of DB time, the service's wall time around its queries %.3f s (more than 15%% apart)", r.Tenant, db, w.DBWallSeconds)
		}
	}
	for tn := range want {
		if !seen[tn] {
			t.Errorf("qtop --once: tenant %s missing: %s", tn, out)
		}
	}
	found := false
	for _, sv := range once.Services {
		found = found || sv.Service == service
	}
	if !found {
		t.Errorf("qtop --once: service %s missing from %+v", service, once.Services)
	}

	// The cost report, from the store once the collector has written its
	// minutes (at shutdown).
	if err := coll.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	st, err := collector.OpenStore(context.Background(), storeURL, collector.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rep, err := collector.BuildReport(context.Background(), st, collector.ReportRequest{
		From: time.Now().Add(-time.Hour), To: time.Now().Add(time.Hour), Measure: collector.MeasureDBTime}, nil)
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string]collector.CostLine{}
	var unattributed collector.CostLine
	for _, l := range rep.Lines {
		if l.Unattributed {
			unattributed = l
		} else {
			lines[l.Tenant] = l
		}
	}
	t.Logf("cost report: (unattributed) %d requests  %7.3f s DB (service, untagged: %.3f s)", unattributed.Requests, unattributed.DBSeconds, untagged.DBSeconds)
	if !within(unattributed.DBSeconds, untagged.DBSeconds, 0.002) {
		t.Errorf("cost report: unattributed DB time %.3f s, the service's untagged %.3f s", unattributed.DBSeconds, untagged.DBSeconds)
	}
	for tn, w := range want {
		l := lines[tn]
		t.Logf("cost report: %-8s %6d requests  %7.3f s DB  share %.3f", tn, l.Requests, l.DBSeconds, l.Share)
		if int64(l.Requests) != w.Requests {
			t.Errorf("cost report: %s: %d requests, the service served %d", tn, l.Requests, w.Requests)
		}
		if !within(l.DBSeconds, w.DBSeconds, 0.002) {
			t.Errorf("cost report: %s: %.3f s of DB time, the service measured %.3f s", tn, l.DBSeconds, w.DBSeconds)
		}
	}
	if len(lines) != len(want) {
		t.Errorf("cost report lines %+v, want the tenants %v", rep.Lines, want)
	}
}

// TestGoExporter: the Go SDK's otlptracehttp exporter, with no qtop code
// in the service. Its database spans carry no tenant: the collector takes
// their trace's (the server span's), also when they arrive in an earlier
// batch than it.
func TestGoExporter(t *testing.T) {
	dsn := testsvc.Postgres(t)
	bin := buildQtop(t)
	coll, storeURL := startCollector(t)
	ctx := t.Context()
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL("http://"+coll.Addr()+"/v1/traces"),
		otlptracehttp.WithHeaders(map[string]string{"Authorization": "Bearer report-token"}))
	if err != nil {
		t.Fatal(err)
	}
	res := resource.NewSchemaless(semconv.ServiceName("shop-go"), semconv.ServiceInstanceID("test-1"))
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res),
		sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(200*time.Millisecond), sdktrace.WithMaxExportBatchSize(256)))
	defer tp.Shutdown(context.Background())
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	svc := httptest.NewServer(newService(pool, tp).handler())
	defer svc.Close()
	sent := runLoad(t, svc.URL, func(r *http.Request, tn string) { r.Header.Set("X-Tenant", tn) })
	if err := tp.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	check(t, bin, coll, storeURL, "shop-go", sent, getStats(t, svc.URL))
}

// TestNodeService: the Node.js service of node/ with the stock SDK, OTLP
// protobuf exporter, HTTP and pg instrumentations and the baggage span
// processor. scripts/test runs npm ci there; under CI a missing node or
// node_modules fails the test.
func TestNodeService(t *testing.T) {
	dsn := testsvc.Postgres(t)
	node := nodeOrSkip(t)
	bin := buildQtop(t)
	coll, storeURL := startCollector(t)
	base := startNode(t, node, dsn, coll.Addr())
	sent := runLoad(t, base, func(r *http.Request, tn string) {
		r.Header.Set("baggage", "tenant.id="+tn+",tenant.tier=T1")
	})
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Post(base+"/flush", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	check(t, bin, coll, storeURL, "shop-node", sent, getStats(t, base))
}

// startNode runs the Node.js service of node/ (its npm packages installed)
// against dsn, exporting to the collector at collAddr, and returns its
// base URL; the test's cleanup stops it.
func startNode(t *testing.T, node, dsn, collAddr string) string {
	t.Helper()
	cmd := exec.Command(node, "--require", "./tracing.js", "server.js")
	cmd.Dir = "node"
	cmd.Env = append(os.Environ(),
		"PORT=0", "DATABASE_URL="+dsn,
		"OTEL_SERVICE_NAME=shop-node",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://"+collAddr+"/v1/traces",
		"OTEL_EXPORTER_OTLP_HEADERS=Authorization=Bearer%20report-token",
		"OTEL_BSP_SCHEDULE_DELAY=200",
		"OTEL_TRACES_SAMPLER=always_on",
		"OTEL_METRICS_EXPORTER=none", "OTEL_LOGS_EXPORTER=none",
	)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("node stderr:\n%s", stderr.String())
		}
	})
	port := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if p, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				port <- p
			}
		}
		close(port)
	}()
	var base string
	select {
	case p, ok := <-port:
		if !ok {
			t.Fatalf("node exited: %s", stderr.String())
		}
		base = "http://127.0.0.1:" + p
	case <-time.After(30 * time.Second):
		t.Fatalf("node did not start: %s", stderr.String())
	}
	return base
}

// nodeOrSkip returns the node binary, or fails (CI) or skips the test when
// node or the example's npm packages are missing.
func nodeOrSkip(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join("node", "node_modules", "@opentelemetry", "sdk-node"))
	}
	if err != nil {
		if testsvc.Required() {
			t.Fatalf("node or the example's npm packages missing (run npm ci in examples/otlp/node): %v", err)
		}
		t.Skipf("node or the npm packages missing (run npm ci in examples/otlp/node): %v", err)
	}
	return node
}
