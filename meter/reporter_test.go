package meter

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/tenant"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// collector is a test collector: it decodes every report with
// DecodeReport, the real decoder, and answers as its mode says.
type collector struct {
	t     *testing.T
	srv   *httptest.Server
	token string

	mu      sync.Mutex
	mode    string // "ok", "down", "slow", "garbage200", "garbage500", "400", "429", "lostreply"
	reports []*report.Report
	ages    []string // report.AgeHeader of each report taken
	pol     *policy.Policy
	arrived chan struct{}
}

func newCollector(t *testing.T) *collector {
	c := &collector{t: t, mode: "ok", arrived: make(chan struct{}, 1000)}
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
	mode, pol, token := c.mode, c.pol, c.token
	c.mu.Unlock()
	defer func() { c.arrived <- struct{}{} }()
	switch mode {
	case "down":
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close()
		return
	case "slow":
		select {
		case <-req.Context().Done():
		case <-time.After(time.Second):
		}
		return
	case "garbage500":
		w.WriteHeader(500)
		io.WriteString(w, "<html>upstream error</html>")
		return
	case "400":
		w.WriteHeader(400)
		io.WriteString(w, `{"accepted":false,"message":"malformed"}`)
		return
	case "429":
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(429)
		return
	case "401":
		w.WriteHeader(401)
		io.WriteString(w, `{"accepted":false,"message":"unknown token"}`)
		return
	case "403":
		w.WriteHeader(403)
		return
	case "paced":
		// The collector's per-source limit: an exact delay in the reply,
		// the header's rounded up to a second, the message an error's.
		b, _ := report.EncodeReply(report.Reply{RetryAfter: 100 * time.Millisecond, Message: "collector: over the per-source report limit (retry after 100ms)"})
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(429)
		w.Write(b)
		return
	}
	if req.Method != http.MethodPost || req.Header.Get("Content-Type") != report.ContentType {
		c.t.Errorf("request %s with content type %q", req.Method, req.Header.Get("Content-Type"))
	}
	if token != "" && req.Header.Get("Authorization") != "Bearer "+token {
		w.WriteHeader(401)
		return
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, report.MaxReportBytes+1))
	if err != nil {
		c.t.Errorf("reading body: %v", err)
		return
	}
	rep, err := dec.Decode(body)
	if err != nil {
		c.t.Errorf("collector cannot decode the report: %v", err)
		w.WriteHeader(400)
		return
	}
	c.mu.Lock()
	c.reports = append(c.reports, rep)
	c.ages = append(c.ages, req.Header.Get(report.AgeHeader))
	c.mu.Unlock()
	switch mode {
	case "garbage200":
		io.WriteString(w, "not json")
		return
	case "lostreply":
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close()
		return
	}
	var raw json.RawMessage
	if pol != nil {
		raw, _ = json.Marshal(pol)
	}
	b, err := report.EncodeReply(report.Reply{Accepted: true, Policy: raw})
	if err != nil {
		c.t.Error(err)
	}
	w.Header().Set("Content-Type", report.ReplyContentType)
	w.Write(b)
}

func newReporter(t *testing.T, c *collector, rec *Recorder, opts ...ReporterOption) *Reporter {
	t.Helper()
	opts = append([]ReporterOption{WithHTTPClient(c.srv.Client()), WithBackoff(time.Millisecond, 20*time.Millisecond)}, opts...)
	r, err := NewReporter(c.srv.URL+"/v1/reports", rec, opts...)
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

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func seqs(rs []*report.Report) []uint64 {
	var out []uint64
	for _, r := range rs {
		out = append(out, r.Seq)
	}
	return out
}

func TestReporterSendsAndHandsPolicy(t *testing.T) {
	c := newCollector(t)
	c.token = "s3cret"
	c.pol = samplePolicy()
	rec := mustRecorder(WithSource(report.Source{Service: "api", Instance: "i-1", Host: "h"}))
	var mu sync.Mutex
	var got []policy.Policy
	reg := prometheus.NewPedanticRegistry()
	r := newReporter(t, c, rec, WithToken("s3cret"), WithRegisterer(reg),
		WithPolicyHandler(func(p policy.Policy) { mu.Lock(); got = append(got, p); mu.Unlock() }),
		WithEnforcementSource(func() report.Enforcement { return report.Enforcement{Shed: [4]uint64{0, 0, 1, 9}} }))

	rec.Record(Record{Tags: tenant.Tags{Tenant: "acme", Route: "GET /a"}, Duration: 3 * time.Millisecond})
	if err := r.ForceFlush(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	rec.Record(Record{Tags: tenant.Tags{Tenant: "acme", Route: "GET /a"}, Duration: 4 * time.Millisecond})
	if err := r.ForceFlush(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	reps := c.got()
	if len(reps) != 2 || reps[0].Seq != 1 || reps[1].Seq != 2 {
		t.Fatalf("collector got seqs %v, want [1 2]", seqs(reps))
	}
	if reps[0].Source.Instance != "i-1" || len(reps[0].Rows) != 1 || reps[0].Rows[0].Duration != 3*time.Millisecond {
		t.Errorf("first report %+v", reps[0])
	}
	if reps[1].Enforcement.Shed[3] != 9 {
		t.Errorf("enforcement not sent: %+v", reps[1].Enforcement)
	}
	mu.Lock()
	if len(got) != 1 || got[0].Version != 3 {
		t.Errorf("policy handler got %d policies, want version 3 once", len(got))
	}
	mu.Unlock()
	if n := testutil.ToFloat64(r.m.sent); n != 2 {
		t.Errorf("sent %v", n)
	}
	if probs, err := testutil.GatherAndLint(reg); err != nil || len(probs) > 0 {
		t.Errorf("lint: %v %v", err, probs)
	}
}

func (c *collector) setToken(tok string) {
	c.mu.Lock()
	c.token = tok
	c.mu.Unlock()
}

// sendOnce cuts a window and makes one attempt per queued report,
// oldest first, until one must wait (its wait is returned).
func sendOnce(t *testing.T, r *Reporter) time.Duration {
	t.Helper()
	r.cut(false)
	return r.drain(ctxTimeout(t, 10*time.Second), 0)
}

// TestReporterWrongToken: a 401 or 403 refuses the token, not the
// report: it stays queued, and goes with the next token the collector
// takes (a rotation), as the collector switches tokens with no overlap.
func TestReporterWrongToken(t *testing.T) {
	for _, mode := range []string{"ok", "403"} {
		c := newCollector(t)
		c.setToken("new")
		c.setMode(mode)
		reg := prometheus.NewPedanticRegistry()
		var mu sync.Mutex
		token := "old"
		r := newReporter(t, c, mustRecorder(), WithRegisterer(reg), WithTokenFunc(func() string { mu.Lock(); defer mu.Unlock(); return token }))
		if wait := sendOnce(t, r); wait <= 0 || r.QueueLen() != 1 || r.Dropped() != 0 {
			t.Fatalf("%s: refused token: wait %v, queued %d, dropped %d; want the report kept for a retry", mode, wait, r.QueueLen(), r.Dropped())
		}
		if n := testutil.ToFloat64(r.m.failed.WithLabelValues("unauthorized")); n != 1 {
			t.Errorf("%s: %v unauthorized attempts counted", mode, n)
		}
		mu.Lock()
		token = "new"
		mu.Unlock()
		c.setMode("ok")
		if err := r.ForceFlush(ctxTimeout(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
		if got := seqs(c.got()); len(got) != 2 || got[0] != 1 || r.Dropped() != 0 {
			t.Errorf("%s: after the rotation the collector got %v, dropped %d; want [1 2], 0", mode, got, r.Dropped())
		}
	}
}

// TestReporterBadReportDropped: a refusal of the report itself (400,
// 413) is for good: it is dropped, not retried.
func TestReporterBadReportDropped(t *testing.T) {
	c := newCollector(t)
	c.setMode("400")
	r := newReporter(t, c, mustRecorder())
	if wait := sendOnce(t, r); wait != 0 || r.QueueLen() != 0 || r.Dropped() != 1 {
		t.Errorf("a 400: wait %v, queued %d, dropped %d; want 0, 0, 1", wait, r.QueueLen(), r.Dropped())
	}
}

// TestReporterCollectorDown: nothing is lost while the collector is down
// (within the queue), and everything arrives in order once it is back.
func TestReporterCollectorDown(t *testing.T) {
	c := newCollector(t)
	c.setMode("down")
	rec := mustRecorder()
	reg := prometheus.NewPedanticRegistry()
	r := newReporter(t, c, rec, WithRegisterer(reg))
	for i := range 3 {
		rec.Record(Record{Tags: tenant.Tags{Tenant: "t", Route: "r"}, Duration: time.Duration(i+1) * time.Millisecond})
		err := r.ForceFlush(ctxTimeout(t, 30*time.Millisecond))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("flush to a collector that is down: %v", err)
		}
	}
	if r.QueueLen() != 3 || r.Dropped() != 0 {
		t.Fatalf("queued %d, dropped %d; want 3, 0", r.QueueLen(), r.Dropped())
	}
	if n := testutil.ToFloat64(r.m.failed.WithLabelValues("network")); n < 3 {
		t.Errorf("%v network failures counted", n)
	}
	c.setMode("ok")
	if err := r.ForceFlush(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	reps := c.got()
	if len(reps) != 4 {
		t.Fatalf("collector got %v", seqs(reps))
	}
	var total time.Duration
	for i, rep := range reps {
		if rep.Seq != uint64(i+1) {
			t.Errorf("seqs %v out of order", seqs(reps))
		}
		for _, row := range rep.Rows {
			total += row.Duration
		}
	}
	if total != 6*time.Millisecond {
		t.Errorf("total %v, want 6ms", total)
	}
}

// TestReporterSendsAge: each attempt says how long its report waited
// since its window was cut, on the reporter's clock (report.AgeHeader),
// so the collector counts a backlog in its minutes, not as load of the
// second it arrives.
func TestReporterSendsAge(t *testing.T) {
	c := newCollector(t)
	// The outage is the client's: no attempt of it reaches the collector,
	// which would otherwise take one sent before the clock moved but
	// handled after it came back (a busy machine's scheduling).
	down := &refusing{next: c.srv.Client().Transport}
	down.on.Store(true)
	var mu sync.Mutex
	now := time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	rec := mustRecorder(WithClock(clock))
	r := newReporter(t, c, rec, WithClock(clock), WithHTTPClient(&http.Client{Transport: down}))
	rec.Record(Record{Tags: tenant.Tags{Tenant: "t", Route: "r"}, Duration: time.Millisecond})
	if err := r.ForceFlush(ctxTimeout(t, 30*time.Millisecond)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("flush to a collector that is down: %v", err)
	}
	mu.Lock()
	now = now.Add(4500 * time.Millisecond)
	mu.Unlock()
	down.on.Store(false)
	if err := r.ForceFlush(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.ages) != 2 || c.ages[0] != "4500" || c.ages[1] != "0" {
		t.Fatalf("ages %q, want [4500 0]: the backlog's report, then the one cut now", c.ages)
	}
}

// refusing fails every request at once while on, as a collector whose
// port is closed would, without a byte reaching next.
type refusing struct {
	on   atomic.Bool
	next http.RoundTripper
}

func (r *refusing) RoundTrip(req *http.Request) (*http.Response, error) {
	if r.on.Load() {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, errors.New("connection refused (test)")
	}
	return r.next.RoundTrip(req)
}

// TestReporterUnreachable: a collector whose port is closed.
func TestReporterUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	r, err := NewReporter("http://"+addr+"/v1/reports", mustRecorder(), WithBackoff(time.Millisecond, 10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.ForceFlush(ctxTimeout(t, 50*time.Millisecond)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("flush: %v", err)
	}
	err = r.Shutdown(ctxTimeout(t, 50*time.Millisecond))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("shutdown: %v", err)
	}
	if r.Dropped() != 2 {
		t.Errorf("dropped %d at shutdown, want 2", r.Dropped())
	}
}

func TestReporterSlowCollector(t *testing.T) {
	c := newCollector(t)
	c.setMode("slow")
	rec := mustRecorder()
	reg := prometheus.NewPedanticRegistry()
	r := newReporter(t, c, rec, WithTimeout(20*time.Millisecond), WithRegisterer(reg))
	r.Start()
	// The request path does not wait for the collector.
	done := make(chan struct{})
	go func() {
		for range 10000 {
			rec.Record(Record{Tags: tenant.Tags{Tenant: "t"}, Duration: time.Millisecond})
		}
		close(done)
	}()
	<-done
	if err := r.ForceFlush(ctxTimeout(t, 100*time.Millisecond)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("flush: %v", err)
	}
	if n := testutil.ToFloat64(r.m.failed.WithLabelValues("timeout")); n < 1 {
		t.Errorf("%v timeouts counted", n)
	}
	c.setMode("ok")
	if err := r.ForceFlush(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	// Counted as a collector counts: once per Seq. With a 20 ms timeout a
	// report may arrive, time out on its way back and be sent again with
	// its Seq on a loaded machine; the real collector drops the copy.
	var n uint64
	seen := map[uint64]bool{}
	for _, rep := range c.got() {
		if seen[rep.Seq] {
			continue
		}
		seen[rep.Seq] = true
		for _, row := range rep.Rows {
			n += row.Count
		}
	}
	if n != 10000 {
		t.Errorf("collector counted %d records, want 10000", n)
	}
}

func TestReporterGarbageReplies(t *testing.T) {
	c := newCollector(t)
	reg := prometheus.NewPedanticRegistry()
	r := newReporter(t, c, mustRecorder(), WithRegisterer(reg))

	c.setMode("garbage200") // accepted, reply unreadable
	if err := r.ForceFlush(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if testutil.ToFloat64(r.m.replyErrors) != 1 || testutil.ToFloat64(r.m.sent) != 1 || r.QueueLen() != 0 {
		t.Errorf("garbage 200: reply errors %v, sent %v, queued %d",
			testutil.ToFloat64(r.m.replyErrors), testutil.ToFloat64(r.m.sent), r.QueueLen())
	}

	c.setMode("garbage500") // retried
	if err := r.ForceFlush(ctxTimeout(t, 50*time.Millisecond)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("garbage 500: %v", err)
	}
	if r.QueueLen() != 1 || testutil.ToFloat64(r.m.failed.WithLabelValues("server")) < 1 {
		t.Errorf("garbage 500: queued %d", r.QueueLen())
	}

	c.setMode("400") // dropped, counted
	if err := r.ForceFlush(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if r.QueueLen() != 0 || r.Dropped() != 2 || testutil.ToFloat64(r.m.dropped.WithLabelValues("rejected")) != 2 {
		t.Errorf("400: queued %d, dropped %d", r.QueueLen(), r.Dropped())
	}
}

func TestReporterRetryAfter(t *testing.T) {
	c := newCollector(t)
	c.setMode("429")
	r := newReporter(t, c, mustRecorder(), WithBackoff(time.Millisecond, 5*time.Second))
	start := time.Now()
	if err := r.ForceFlush(ctxTimeout(t, 300*time.Millisecond)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("flush: %v", err)
	}
	// Retry-After: 1 means a single attempt within the 300 ms.
	if n := len(c.arrived); n != 1 {
		t.Errorf("%d attempts in %v despite Retry-After: 1", n, time.Since(start))
	}
}

func TestReporterQueueDropsOldest(t *testing.T) {
	c := newCollector(t)
	c.setMode("down")
	reg := prometheus.NewPedanticRegistry()
	r := newReporter(t, c, mustRecorder(), WithQueueLen(3), WithRegisterer(reg))
	for range 5 {
		r.cut(false)
	}
	if r.QueueLen() != 3 || r.Dropped() != 2 {
		t.Fatalf("queued %d, dropped %d; want 3, 2", r.QueueLen(), r.Dropped())
	}
	c.setMode("ok")
	if err := r.ForceFlush(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	// The flush cut a sixth window, which pushed out the third.
	if got := seqs(c.got()); len(got) != 3 || got[0] != 4 || got[2] != 6 {
		t.Errorf("collector got %v, want [4 5 6]", got)
	}
	expected := `
# HELP qtop_ingest_reports_dropped_total Reports given up, by reason: queue_full, rejected, shutdown, encode.
# TYPE qtop_ingest_reports_dropped_total counter
qtop_ingest_reports_dropped_total{reason="encode"} 0
qtop_ingest_reports_dropped_total{reason="queue_full"} 3
qtop_ingest_reports_dropped_total{reason="rejected"} 0
qtop_ingest_reports_dropped_total{reason="shutdown"} 0
# HELP qtop_ingest_queue_reports Reports waiting to be sent.
# TYPE qtop_ingest_queue_reports gauge
qtop_ingest_queue_reports 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expected), "qtop_ingest_reports_dropped_total", "qtop_ingest_queue_reports"); err != nil {
		t.Error(err)
	}
}

// TestReporterLostReply: the collector merged the report but the reply
// was lost; the retry carries the same Seq, so the collector can drop it.
func TestReporterLostReply(t *testing.T) {
	c := newCollector(t)
	c.setMode("lostreply")
	r := newReporter(t, c, mustRecorder())
	if err := r.ForceFlush(ctxTimeout(t, 30*time.Millisecond)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("flush: %v", err)
	}
	c.setMode("ok")
	if err := r.ForceFlush(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	got := seqs(c.got())
	if len(got) < 3 || got[0] != 1 || got[1] != 1 || got[len(got)-1] != 2 {
		t.Errorf("collector got seqs %v, want 1 repeated, then 2", got)
	}
}

func TestReporterBackground(t *testing.T) {
	c := newCollector(t)
	rec := mustRecorder()
	ticks := make(chan time.Time)
	stopped := make(chan struct{})
	r := newReporter(t, c, rec, WithTicker(func(d time.Duration) (<-chan time.Time, func()) {
		if d != DefaultInterval {
			t.Errorf("ticker of %v, want the default interval", d)
		}
		return ticks, func() { close(stopped) }
	}))
	r.Start()
	r.Start() // a second Start does nothing
	rec.Record(Record{Tags: tenant.Tags{Tenant: "t"}, Duration: time.Millisecond})
	for range 3 {
		ticks <- time.Time{} // a cut, sent in the background
		select {
		case <-c.arrived:
		case <-time.After(10 * time.Second):
			t.Fatal("no report within 10 s of a tick")
		}
	}
	if err := r.Shutdown(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := r.Shutdown(context.Background()); err != nil {
		t.Errorf("second shutdown: %v", err)
	}
	if err := r.ForceFlush(context.Background()); err != nil {
		t.Errorf("flush after shutdown: %v", err)
	}
	select {
	case <-stopped:
	default:
		t.Error("Shutdown did not stop the ticker")
	}
	// Deduplicate by Seq, as the collector does: an attempt aborted by
	// Shutdown may have arrived.
	var reps []*report.Report
	for _, rep := range c.got() {
		if len(reps) == 0 || rep.Seq != reps[len(reps)-1].Seq {
			reps = append(reps, rep)
		}
	}
	var n uint64
	for i, rep := range reps {
		if rep.Seq != uint64(i+1) {
			t.Errorf("seqs %v", seqs(reps))
		}
		if i > 0 && !rep.Start.Equal(reps[i-1].End) {
			t.Errorf("windows not contiguous at %d", i)
		}
		for _, row := range rep.Rows {
			n += row.Count
		}
	}
	if n != 1 {
		t.Errorf("%d records arrived, want 1", n)
	}
}

func TestReporterShutdownFlushes(t *testing.T) {
	c := newCollector(t)
	rec := mustRecorder()
	r := newReporter(t, c, rec, WithInterval(time.Hour))
	r.Start()
	rec.Record(Record{Tags: tenant.Tags{Tenant: "t"}, Duration: time.Millisecond})
	if err := r.Shutdown(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if reps := c.got(); len(reps) != 1 || len(reps[0].Rows) != 1 {
		t.Errorf("shutdown did not flush the last window: %v", seqs(reps))
	}
}

func TestNewReporterInvalid(t *testing.T) {
	rec := mustRecorder()
	for _, u := range []string{"", "collector:7070", "ftp://x/v1/reports", "http://"} {
		if _, err := NewReporter(u, rec); !errors.Is(err, ErrInvalid) {
			t.Errorf("url %q: %v", u, err)
		}
	}
	if _, err := NewReporter("http://x/v1/reports", nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil recorder: %v", err)
	}
	for _, o := range []ReporterOption{WithInterval(0), WithTimeout(-1), WithQueueLen(0), WithBackoff(time.Second, time.Millisecond)} {
		if _, err := NewReporter("http://x/v1/reports", rec, o); !errors.Is(err, ErrInvalid) {
			t.Errorf("option: %v", err)
		}
	}
	reg := prometheus.NewRegistry()
	if _, err := NewReporter("http://x/v1/reports", rec, WithRegisterer(reg)); err != nil {
		t.Fatal(err)
	}
	if _, err := NewReporter("http://x/v1/reports", rec, WithRegisterer(reg)); !errors.Is(err, ErrInvalid) {
		t.Errorf("registering twice: %v", err)
	}
}

// TestReporterConcurrentFlushShutdown: flushes racing with Shutdown
// neither hang nor lose a report silently.
func TestReporterConcurrentFlushShutdown(t *testing.T) {
	c := newCollector(t)
	rec := mustRecorder()
	r := newReporter(t, c, rec, WithInterval(time.Millisecond))
	r.Start()
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				rec.Record(Record{Tags: tenant.Tags{Tenant: "t"}, Duration: time.Millisecond})
				_ = r.ForceFlush(ctxTimeout(t, 10*time.Second))
			}
		}()
	}
	// Shut down once sending has begun, while the flushes go on.
	select {
	case <-c.arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("no report reached the collector in 10 s")
	}
	if err := r.Shutdown(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Errorf("shutdown: %v", err)
	}
	wg.Wait()
	var n uint64
	seen := map[uint64]bool{}
	for _, rep := range c.got() {
		if seen[rep.Seq] {
			continue
		}
		seen[rep.Seq] = true
		for _, row := range rep.Rows {
			n += row.Count
		}
	}
	// Records after the last cut stay in the recorder; every cut report
	// was either sent or counted as dropped.
	if r.Dropped() == 0 && n == 0 {
		t.Errorf("nothing arrived and nothing was dropped")
	}
	if r.QueueLen() != 0 {
		t.Errorf("%d reports left queued after shutdown", r.QueueLen())
	}
}

// TestReporterCutRacingShutdown: the interval's cut that lands after
// Shutdown began but before its last cut keeps its rows (they are drained
// from the recorder): Shutdown's flush sends it with the last one. Only a
// cut after the last one is dropped, and counted.
func TestReporterCutRacingShutdown(t *testing.T) {
	c := newCollector(t)
	rec := mustRecorder()
	r := newReporter(t, c, rec, WithInterval(time.Hour))
	rec.Record(Record{Tags: tenant.Tags{Tenant: "racing"}, Duration: time.Millisecond})
	r.mu.Lock()
	r.shut = true // Shutdown has begun; the tick loop has not stopped yet
	r.mu.Unlock()
	if r.cut(false) == 0 || r.QueueLen() != 1 || r.Dropped() != 0 {
		t.Fatalf("a cut before the last one: queued %d, dropped %d; want 1, 0", r.QueueLen(), r.Dropped())
	}
	rec.Record(Record{Tags: tenant.Tags{Tenant: "last"}, Duration: time.Millisecond})
	if err := r.flush(ctxTimeout(t, 10*time.Second), r.cut(true)); err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, rep := range c.got() {
		for _, row := range rep.Rows {
			got[row.Tenant] += row.Count
		}
	}
	if got["racing"] != 1 || got["last"] != 1 {
		t.Errorf("records that arrived: %v, want racing and last once each", got)
	}
	rec.Record(Record{Tags: tenant.Tags{Tenant: "late"}, Duration: time.Millisecond})
	if r.cut(false) != 0 || r.Dropped() != 1 {
		t.Errorf("a cut after the last one: dropped %d, want 1", r.Dropped())
	}
}

// TestReporterFlushSkipsBackoff: a flush tries at once even when earlier
// failures set a long backoff.
func TestReporterFlushSkipsBackoff(t *testing.T) {
	c := newCollector(t)
	c.setMode("down")
	r := newReporter(t, c, mustRecorder(), WithBackoff(time.Minute, time.Hour))
	if err := r.ForceFlush(ctxTimeout(t, 50*time.Millisecond)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("flush to a collector that is down: %v", err)
	}
	c.setMode("ok")
	if err := r.ForceFlush(ctxTimeout(t, 5*time.Second)); err != nil {
		t.Fatalf("flush after the collector came back, with a minute of backoff pending: %v", err)
	}
	if got := seqs(c.got()); len(got) != 2 {
		t.Errorf("collector got %v", got)
	}
}

// TestReporterBackoff: the wait doubles from the minimum up to the
// maximum, a random half of it waived, and never falls below the
// collector's RetryAfter (itself capped at the maximum).
func TestReporterBackoff(t *testing.T) {
	r, err := NewReporter("http://collector/v1/reports", mustRecorder(), WithBackoff(100*time.Millisecond, 2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		attempt    int
		retryAfter time.Duration
		lo, hi     time.Duration
	}{
		{1, 0, 50 * time.Millisecond, 100 * time.Millisecond},
		{2, 0, 100 * time.Millisecond, 200 * time.Millisecond},
		{3, 0, 200 * time.Millisecond, 400 * time.Millisecond},
		{5, 0, 800 * time.Millisecond, 1600 * time.Millisecond},
		{6, 0, time.Second, 2 * time.Second},
		{60, 0, time.Second, 2 * time.Second},
		{1, time.Second, time.Second, time.Second},
		{1, time.Hour, 2 * time.Second, 2 * time.Second},
	}
	for _, s := range steps {
		seen := map[time.Duration]bool{}
		for range 200 {
			d := r.backoff(s.attempt, s.retryAfter)
			if d < s.lo || d > s.hi {
				t.Fatalf("attempt %d, retry after %v: %v outside [%v, %v]", s.attempt, s.retryAfter, d, s.lo, s.hi)
			}
			seen[d] = true
		}
		if s.lo != s.hi && len(seen) < 10 {
			t.Errorf("attempt %d: only %d distinct waits in 200, jitter missing", s.attempt, len(seen))
		}
	}
}

// dec knows the sections of the test sources (WithSectionSource).
var dec = report.NewDecoder(testSection{})

func samplePolicy() *policy.Policy {
	return &policy.Policy{
		Version: 3,
		Updated: t0,
		Rules: []policy.Rule{
			{ID: "r1", Tenant: "acme", Action: policy.Throttle, RUPerSecond: 100, Expires: t0.Add(time.Hour), Reason: "catalog import", Created: t0},
			{ID: "r2", Tier: tenant.T3, Action: policy.Price, Multiplier: 2, Shadow: true, Expires: t0.Add(time.Minute), Reason: "ratio 0.4", Created: t0},
		},
	}
}

// testSection is a section of tag 99 holding a number.
type testSection struct{ N uint64 }

func (testSection) SectionTag() uint64 { return 99 }

func (s testSection) AppendSection(b []byte) ([]byte, error) {
	return binary.AppendUvarint(b, s.N), nil
}

func (testSection) DecodeSection(d *report.Reader) report.Section {
	return testSection{N: d.Uvarint("n")}
}

// TestReporterSendsSections: a section source's section travels in the
// window's report, and none when it has nothing to say.
func TestReporterSendsSections(t *testing.T) {
	c := newCollector(t)
	rec := mustRecorder(WithSource(report.Source{Service: "api", Instance: "i-f"}))
	calls := 0
	r := newReporter(t, c, rec, WithSectionSource(func() report.Section {
		calls++
		if calls > 1 {
			return nil
		}
		return testSection{N: 42}
	}))
	rec.Record(Record{Tags: tenant.Tags{Tenant: "acme", Route: "GET /a"}, Duration: time.Millisecond})
	if err := r.ForceFlush(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := r.ForceFlush(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	reps := c.got()
	if len(reps) < 2 {
		t.Fatalf("reports %+v", reps)
	}
	if s, ok := report.SectionOf[testSection](reps[0]); !ok || s.N != 42 {
		t.Errorf("first report's section %+v, %v", s, ok)
	}
	if _, ok := report.SectionOf[testSection](reps[1]); ok {
		t.Error("second report carries a section its source did not give")
	}
}

// badSection is a section that cannot be encoded (as a tenant-name
// section holding a name the collector would refuse).
type badSection struct{}

func (badSection) SectionTag() uint64 { return 98 }
func (badSection) AppendSection([]byte) ([]byte, error) {
	return nil, fmt.Errorf("%w: not encodable", report.ErrInvalid)
}
func (badSection) DecodeSection(*report.Reader) report.Section { return badSection{} }

// TestReporterLeavesOutBadSection: a section source's section that cannot
// be encoded is left out, logged and counted; the report's rows and its
// other sections still go (before, the whole report was dropped).
func TestReporterLeavesOutBadSection(t *testing.T) {
	c := newCollector(t)
	reg := prometheus.NewRegistry()
	var logged bytes.Buffer
	rec := mustRecorder(WithSource(report.Source{Service: "api", Instance: "i-b"}))
	r := newReporter(t, c, rec, WithRegisterer(reg), WithLogger(slog.New(slog.NewTextHandler(&logged, nil))),
		WithSectionSource(func() report.Section { return badSection{} }),
		WithSectionSource(func() report.Section { return testSection{N: 7} }))
	rec.Record(Record{Tags: tenant.Tags{Tenant: "acme", Route: "GET /a"}, Duration: time.Millisecond})
	if err := r.ForceFlush(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	reps := c.got()
	if len(reps) != 1 || len(reps[0].Rows) != 1 || r.Dropped() != 0 {
		t.Fatalf("reports %+v, dropped %d", reps, r.Dropped())
	}
	if s, ok := report.SectionOf[testSection](reps[0]); !ok || s.N != 7 {
		t.Errorf("the good section: %+v, %v", s, ok)
	}
	if got := testutil.ToFloat64(r.m.sectionsDropped); got != 1 {
		t.Errorf("qtop_ingest_sections_dropped_total %v", got)
	}
	if !strings.Contains(logged.String(), "section=98") || !strings.Contains(logged.String(), "not encodable") {
		t.Errorf("log %q", logged.String())
	}
}

// TestDecodeReplyPolicy: a reply whose policy does not pass
// policy.Validate is malformed; the reporter keeps the policy it had.
func TestDecodeReplyPolicy(t *testing.T) {
	bad := `{"accepted":true,"policy":{"version":1,"rules":[{"id":"x","action":"ban","tenant":"a","expires":"2030-01-01T00:00:00Z","reason":"r"}]}}`
	if _, _, _, err := decodeReply([]byte(bad)); !errors.Is(err, report.ErrMalformed) {
		t.Errorf("bad policy: %v", err)
	}
	raw, _ := json.Marshal(samplePolicy())
	b, _ := report.EncodeReply(report.Reply{Accepted: true, Policy: raw})
	if _, pol, _, err := decodeReply(b); err != nil || !reflect.DeepEqual(pol, samplePolicy()) {
		t.Errorf("policy %+v, %v", pol, err)
	}
}

// TestReporterToConsumer: with ConsumerExporter the reports reach the
// consumer as they are cut (no encoding); a retryable refusal is sent
// again, a permanent one dropped, and the reply's policy is applied.
func TestReporterToConsumer(t *testing.T) {
	var mu sync.Mutex
	var got []*report.Report
	refuse := []error{report.NewRetryable(errors.New("busy"), time.Millisecond), nil, errors.New("never")}
	pol, _ := json.Marshal(samplePolicy())
	c := report.ConsumerFunc(func(_ context.Context, r *report.Report, raw []byte) (report.Reply, error) {
		mu.Lock()
		defer mu.Unlock()
		if raw != nil {
			t.Error("an in-process report came encoded")
		}
		var err error
		if len(refuse) > 0 {
			err, refuse = refuse[0], refuse[1:]
		}
		if err != nil {
			return report.Reply{}, err
		}
		got = append(got, r)
		return report.Reply{Accepted: true, Policy: pol}, nil
	})
	rec := mustRecorder(WithSource(report.Source{Service: "api", Instance: "i-c"}))
	var applied uint64
	r, err := NewReporterTo(ConsumerExporter(c), rec, WithBackoff(time.Millisecond, 2*time.Millisecond),
		WithPolicyHandler(func(p policy.Policy) { applied = p.Version }))
	if err != nil {
		t.Fatal(err)
	}
	rec.Record(Record{Tags: tenant.Tags{Tenant: "acme", Route: "GET /a"}, Duration: time.Millisecond})
	if err := r.ForceFlush(ctxTimeout(t, 10*time.Second)); err != nil { // refused for now, then merged
		t.Fatal(err)
	}
	rec.Record(Record{Tags: tenant.Tags{Tenant: "acme", Route: "GET /a"}, Duration: time.Millisecond})
	if err := r.ForceFlush(ctxTimeout(t, 10*time.Second)); err != nil { // refused for good
		t.Fatal(err)
	}
	if err := r.Shutdown(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) < 1 || got[0].Seq != 1 || len(got[0].Rows) != 1 || applied != samplePolicy().Version || r.Dropped() != 1 {
		t.Fatalf("got %d reports (first %+v), policy %d, dropped %d", len(got), got, applied, r.Dropped())
	}
	if _, err := NewReporterTo(nil, rec); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil exporter: %v", err)
	}
}
