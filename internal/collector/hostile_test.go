package collector

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/meter"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/store/duckstore"
	"github.com/qtop-dev/qtop/tenant"
)

func postReport(h http.Handler, body []byte, header ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, api.PathReports, bytes.NewReader(body))
	req.Header.Set("Content-Type", report.ContentType)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

// A report sent with another Content-Type is refused with 415, as the
// ingest docs promise; the bearer scheme is case-insensitive (RFC 7235).
func TestContentTypeAndBearerScheme(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Token = "sekret" })
	defer f.stop()
	h := f.s.Handler()
	p := newProcess(f.clk, "api", "p1")
	body := p.report(t, "acme", 1, "")
	for _, ct := range []string{"application/json", "text/plain", ""} {
		w := postReport(h, body, "Authorization", "Bearer sekret", "Content-Type", ct)
		if w.Code != http.StatusUnsupportedMediaType || !strings.Contains(w.Body.String(), report.ContentType) {
			t.Fatalf("Content-Type %q: %d %s", ct, w.Code, w.Body)
		}
	}
	if got := testutil.ToFloat64(f.s.met.rejected.WithLabelValues(reasonContentType)); got != 3 {
		t.Fatalf("415s counted %v", got)
	}
	for i, auth := range []string{"bearer sekret", "BEARER sekret"} {
		f.clk.Add(time.Second)
		ct := report.ContentType
		if i == 1 {
			ct = "Application/Vnd.Qtop.Report; charset=binary"
		}
		if w := postReport(h, p.report(t, "acme", 1, ""), "Authorization", auth, "Content-Type", ct); w.Code != 200 {
			t.Fatalf("%q: %d %s", auth, w.Code, w.Body)
		}
	}
}

// TestPoisonBinaryStrings: a binary cache key and a service name that is
// not UTF-8, sent through the project's own Recorder, used to be merged,
// refused by DuckDB ("NOT NULL constraint failed") and retried first
// forever. Now they are cleaned at ingest (counted) and every minute is
// written, on the real DuckDB store.
func TestPoisonBinaryStrings(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "qtop.duckdb")
	clk := &clock{t: t0}
	reg := prometheus.NewRegistry()
	s, err := New(Config{Store: "duckdb://" + path, DataDir: filepath.Join(dir, "data"), Writer: "w1", Registerer: reg, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	bad := newProcess(clk, "api\xff\xfe", "p\x00")
	good := newProcess(clk, "api", "p2")
	for minute := range 2 {
		for range 3 {
			clk.Add(time.Second)
			for _, p := range []*process{bad, good} {
				for range 4 {
					p.rec.Record(meter.Record{Tags: tenant.Tags{Tenant: "acme", Route: "GET /x", Key: "\x00\xffbin\x80"},
						Kind: report.KindRequest, Duration: time.Millisecond, RU: 1})
				}
				body, err := p.rec.Cut(clk.Now()).MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}
				if status, _, msg, _, _ := ingest(s, body); status != 200 {
					t.Fatalf("refused: %d %s", status, msg)
				}
			}
		}
		clk.Set(t0.Truncate(time.Minute).Add(time.Duration(minute+1)*time.Minute + DefaultGrace + time.Second))
		s.Tick(context.Background(), clk.Now())
	}
	st := s.em.spool.Stats()
	if st.PendingRows != 0 || st.DeadLetters != 0 {
		t.Fatalf("spool %+v: rows stuck or set aside", st)
	}
	snap := s.Snapshot(clk.Now(), api.MeasureRU, 10)
	if !snap.Collector.StoreHealthy {
		t.Fatalf("store unhealthy: %s", snap.Collector.StoreError)
	}
	if n := testutil.ToFloat64(s.guard.cleaned.WithLabelValues("service")); n == 0 {
		t.Error("the invalid service name was not counted as cleaned")
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	db, err := duckstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	us, err := db.Usage(context.Background(), t0.Add(-time.Hour), t0.Add(time.Hour), false)
	if err != nil {
		t.Fatal(err)
	}
	var req uint64
	for _, u := range us {
		req += u.Requests
	}
	if req != 2*3*2*4 {
		t.Fatalf("stored %d requests, want %d (%+v)", req, 2*3*2*4, us)
	}
}

// A spool whose oldest batch waits longer than spoolStuckAfter makes the
// store unhealthy although it answers its ping.
func TestSpoolNotDrainingIsUnhealthy(t *testing.T) {
	now := time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)
	if _, err := spoolStuck(store.SpoolStats{}, now); err != nil {
		t.Fatalf("empty spool: %v", err)
	}
	if _, err := spoolStuck(store.SpoolStats{PendingRows: 5, Oldest: now.Add(-time.Minute)}, now); err != nil {
		t.Fatalf("a minute behind: %v", err)
	}
	// Writes failing now (a shard down while the node pinged answers):
	// unhealthy at once, not after spoolStuckAfter.
	if _, err := spoolStuck(store.SpoolStats{PendingRows: 5, Oldest: now.Add(-5 * time.Second), Failing: true}, now); err == nil || !strings.Contains(err.Error(), "failed a write") {
		t.Fatalf("writes failing: %v", err)
	}
	age, err := spoolStuck(store.SpoolStats{PendingRows: 5, DeadLetters: 1, Oldest: now.Add(-10 * time.Minute)}, now)
	if err == nil || !strings.Contains(err.Error(), "not draining") || age != 10*time.Minute {
		t.Fatalf("ten minutes behind: %v %v", err, age)
	}
}

// One service name that is not UTF-8 used to make every /metrics scrape
// answer 500 (MustNewConstMetric panicked) until the service was pruned.
func TestMetricsSurviveInvalidLabel(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	p := newProcess(f.clk, "svc\xff\xfe", "p1")
	for range 3 {
		f.clk.Add(time.Second)
		if f.ingest(p.report(t, "acme\xff", 2, "k\x00")) != 200 {
			t.Fatal("refused")
		}
	}
	f.clk.Add(time.Second)
	w := httptest.NewRecorder()
	f.s.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if w.Code != 200 {
		t.Fatalf("/metrics: %d %s", w.Code, w.Body)
	}
	if !strings.Contains(w.Body.String(), `qtop_collector_latency_ratio{service="svc\\xff\\xfe"}`) {
		t.Fatalf("latency ratio of the cleaned service missing:\n%s", w.Body)
	}
}

// TestJunkSourcesCannotEvictRealOnes: a flood of made-up sources used to
// fill the source table, after which a new real process got 503 for
// minutes. Now the real, established process keeps its place (its
// duplicate filter still knows its reports), and a newcomer is served
// from its first report.
func TestJunkSourcesCannotEvictRealOnes(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MaxSources = 200 })
	defer f.stop()
	real := newProcess(f.clk, "api", "real")
	var first []byte
	for i := range 3 {
		f.clk.Add(time.Second)
		b := real.report(t, "acme", 1, "")
		if i == 0 {
			first = b
		}
		if f.ingest(b) != 200 {
			t.Fatal("real source refused")
		}
	}
	f.clk.Add(time.Second)
	for i := range f.s.cfg.MaxSources + 50 {
		junk := newProcess(f.clk, "junk", fmt.Sprintf("j%d", i))
		if status := f.ingest(junk.report(t, "spam", 1, "")); status != 200 {
			t.Fatalf("junk source %d: %d", i, status)
		}
	}
	newcomer := newProcess(f.clk, "api", "new")
	if status := f.ingest(newcomer.report(t, "acme", 1, "")); status != 200 {
		t.Fatalf("new real process after the flood: %d", status)
	}
	before := testutil.ToFloat64(f.s.met.duplicates)
	if f.ingest(first) != 200 || testutil.ToFloat64(f.s.met.duplicates) != before+1 {
		t.Fatal("the established source was forgotten: its retried report was merged again")
	}
	if n := len(f.s.in.sources); n > f.s.cfg.MaxSources+f.s.in.probationCap() {
		t.Fatalf("%d sources tracked, bound %d", n, f.s.cfg.MaxSources+f.s.in.probationCap())
	}
	if testutil.ToFloat64(f.s.guard.sourcesEvicted) == 0 {
		t.Fatal("no probationary source was evicted by the flood")
	}
}

// A client sending junk in a loop is slowed down: the answer to a report
// refused for what it is waits Config.RefusalDelay (here until the client
// gives up), and once maxHeldRefusals answers are held the next one is
// answered at once with its connection closed; a report refused for
// being early (busy, admission) is never held.
func TestRefusalsAreHeld(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.RefusalDelay = time.Hour })
	defer f.stop()
	h := f.s.Handler()
	junk := []byte("qtrp junk that is not a report")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan int)
	go func() {
		req := httptest.NewRequest(http.MethodPost, api.PathReports, bytes.NewReader(junk)).WithContext(ctx)
		req.Header.Set("Content-Type", report.ContentType)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		done <- w.Code
	}()
	waitFor(t, time.Minute, "the refusal to be held", func() bool {
		select {
		case code := <-done:
			t.Fatalf("answered %d without being held", code)
		default:
		}
		return testutil.ToFloat64(f.s.guard.refusalsHeld) >= 1
	})
	// Fill the remaining places: the next refusal is not held.
	for range maxHeldRefusals - 1 {
		f.s.in.held <- struct{}{}
	}
	w := postReport(h, junk)
	if w.Code != http.StatusBadRequest || w.Header().Get("Connection") != "close" {
		t.Fatalf("with every place held: %d, Connection %q", w.Code, w.Header().Get("Connection"))
	}
	if got := testutil.ToFloat64(f.s.guard.refusalsUnheld); got != 1 {
		t.Fatalf("unheld %v", got)
	}
	for range maxHeldRefusals - 1 {
		<-f.s.in.held
	}
	cancel() // the client gives up: the held answer ends with it
	if code := <-done; code != http.StatusBadRequest {
		t.Fatalf("held refusal: %d", code)
	}
	// A good report is never held, nor a refusal for admission.
	p := newProcess(f.clk, "api", "p1")
	if w := postReport(h, p.report(t, "acme", 1, "")); w.Code != 200 {
		t.Fatalf("good report: %d %s", w.Code, w.Body)
	}
	if got := testutil.ToFloat64(f.s.guard.refusalsHeld); got != 1 {
		t.Fatalf("held %v, want 1", got)
	}
}
