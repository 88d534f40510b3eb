package otlpin

import (
	"bytes"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/tenant"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMapping(t *testing.T) {
	clk := &fakeClock{now: t0}
	s := &sink{}
	r := newTestReceiver(t, s, clk)
	srv := server(1, "acme", "/orders/{id}", 30*time.Millisecond)
	srv.attrs = append(srv.attrs, str("tenant.tier", "T1"))
	failed := server(2, "acme", "/orders/{id}", 10*time.Millisecond)
	failed.attrs[2] = num("http.response.status_code", 503)
	notFound := server(3, "acme", "/orders/{id}", 10*time.Millisecond)
	notFound.attrs[2] = num("http.response.status_code", 404)
	failed.attrs = append(failed.attrs, str("tenant.tier", "T1"))
	notFound.attrs = append(notFound.attrs, str("tenant.tier", "t1")) // ParseTier ignores case
	statusErr := server(4, "globex", "/pay", 5*time.Millisecond)
	statusErr.status = tracepb.Status_STATUS_CODE_ERROR
	noRoute := server(5, "globex", "", 7*time.Millisecond)
	noRoute.attrs = noRoute.attrs[:1]
	noRoute.name = "GET /legacy"
	untagged := server(6, "", "/health", time.Millisecond)
	untagged.attrs = untagged.attrs[1:]
	job := spanSpec{trace: 7, id: 701, name: "invoice.render", kind: tracepb.Span_SPAN_KIND_CONSUMER, start: t0, dur: 200 * time.Millisecond,
		attrs: []*commonpb.KeyValue{str("tenant.id", "initech")}}
	internal := spanSpec{trace: 1, id: 199, parent: 101, name: "render", kind: tracepb.Span_SPAN_KIND_INTERNAL, start: t0, dur: time.Millisecond}
	redis := spanSpec{trace: 1, id: 198, parent: 101, name: "GET", kind: tracepb.Span_SPAN_KIND_CLIENT, start: t0, dur: time.Millisecond,
		attrs: []*commonpb.KeyValue{str("db.system", "redis")}}
	bad := server(8, "acme", "/orders/{id}", 0)
	bad.start = time.Time{}
	req := request("shop",
		srv, failed, notFound, statusErr, noRoute, untagged, job, internal, redis, bad,
		pgSpan(1, 2, "SELECT * FROM orders WHERE id = $1", 12*time.Millisecond),
		pgSpan(1, 3, "update stock set n = n - 1", 3*time.Millisecond),
		pgSpan(1, 4, "select 1", time.Millisecond, str("db.query.summary", "SELECT ping")),
	)
	res, err := r.Consume(marshal(t, req))
	if err != nil {
		t.Fatal(err)
	}
	if res.Spans != 13 || res.Rejected != 1 || !strings.Contains(res.Message, "1 span") {
		t.Fatalf("result %+v", res)
	}
	r.Flush(clk.Now())
	got := s.rows()
	want := map[rowKey]rowSum{
		{"shop", "acme", "/orders/{id}", "request"}:  {count: 3, errors: 1, dur: 50 * time.Millisecond, tier: "T1"},
		{"shop", "globex", "/pay", "request"}:        {count: 1, errors: 1, dur: 5 * time.Millisecond},
		{"shop", "globex", "GET /legacy", "request"}: {count: 1, dur: 7 * time.Millisecond},
		{"shop", "(untagged)", "/health", "request"}: {count: 1, dur: time.Millisecond},
		{"shop", "initech", "invoice.render", "job"}: {count: 1, dur: 200 * time.Millisecond},
		{"shop", "acme", "SELECT orders", "db"}:      {count: 1, dur: 12 * time.Millisecond, tier: "T1"},
		{"shop", "acme", "UPDATE stock", "db"}:       {count: 1, dur: 3 * time.Millisecond, tier: "T1"},
		{"shop", "acme", "SELECT ping", "db"}:        {count: 1, dur: time.Millisecond, tier: "T1"},
	}
	for _, k := range keysOf(want) {
		if got[k] != want[k] {
			t.Errorf("%v: got %+v, want %+v", k, got[k], want[k])
		}
	}
	if len(got) != len(want) {
		t.Errorf("rows %v, want %d", keysOf(got), len(want))
	}
	if src := s.reports[0].Source; src.Service != "shop" || src.Host != "h1" || !strings.HasPrefix(src.Instance, "i-1~otlp-") {
		t.Errorf("source %+v", src)
	}
}

// A database span can arrive before its root (the SDK exports children
// first, in another batch): it waits for the root's tenant, by trace id,
// up to the trace wait, then counts for tenant unknown.
func TestDBSpanWaitsForItsRoot(t *testing.T) {
	clk := &fakeClock{now: t0}
	s := &sink{}
	r := newTestReceiver(t, s, clk, WithTraceWait(10*time.Second))
	steps := []struct {
		at   time.Duration
		send []spanSpec
	}{
		{0, []spanSpec{pgSpan(1, 2, "SELECT * FROM a", 10*time.Millisecond), pgSpan(2, 2, "SELECT * FROM b", 20*time.Millisecond)}},
		{3 * time.Second, []spanSpec{server(1, "acme", "/a", 15*time.Millisecond)}},
		// A later child of a trace whose root is known is attributed at once.
		{4 * time.Second, []spanSpec{pgSpan(1, 3, "SELECT * FROM a", 5*time.Millisecond)}},
		// Trace 2's root never comes: after 10 s its span is unknown's.
		{11 * time.Second, nil},
	}
	for _, st := range steps {
		clk.now = t0.Add(st.at)
		if len(st.send) > 0 {
			if _, err := r.Consume(marshal(t, request("api", st.send...))); err != nil {
				t.Fatal(err)
			}
		}
		r.Flush(clk.now)
		if st.at == 3*time.Second {
			if got := s.rows()[rowKey{"api", "acme", "SELECT a", "db"}]; got.count != 1 {
				t.Fatalf("at %v: trace 1's db span not attributed to acme: %+v", st.at, s.rows())
			}
			if len(s.rows()) != 2 {
				t.Fatalf("at %v: trace 2's span should still wait: %v", st.at, keysOf(s.rows()))
			}
		}
	}
	got := s.rows()
	if v := got[rowKey{"api", "acme", "SELECT a", "db"}]; v.count != 2 || v.dur != 15*time.Millisecond {
		t.Errorf("acme db %+v", v)
	}
	if v := got[rowKey{"api", report.UnknownTenant, "SELECT b", "db"}]; v.count != 1 || v.dur != 20*time.Millisecond {
		t.Errorf("unknown db %+v (rows %v)", v, keysOf(got))
	}
}

// The clock going back does not make a span wait longer than the wait.
func TestWaitClockBackwards(t *testing.T) {
	clk := &fakeClock{now: t0}
	s := &sink{}
	r := newTestReceiver(t, s, clk, WithTraceWait(10*time.Second))
	steps := []struct {
		at      time.Duration
		unknown uint64 // DB spans counted for unknown by then
	}{
		{0, 0},          // t0: the span arrives and waits until t0+10s
		{-time.Hour, 1}, // t1: the clock went back an hour: the wait is over
		{-time.Hour + time.Second, 1},
	}
	for i, st := range steps {
		clk.now = t0.Add(st.at)
		if i == 0 {
			r.Consume(marshal(t, request("api", pgSpan(1, 2, "SELECT * FROM a", time.Millisecond))))
		}
		r.Flush(clk.now)
		if got := s.rows()[rowKey{"api", "(untagged)", "SELECT a", "db"}].count; got != st.unknown {
			t.Fatalf("step %d (%v): unknown %d, want %d", i, st.at, got, st.unknown)
		}
	}
}

// With the wait list full, a span that would wait counts for unknown at
// once: memory stays bounded whatever the order of arrival.
func TestWaitListBounded(t *testing.T) {
	clk := &fakeClock{now: t0}
	s := &sink{}
	r := newTestReceiver(t, s, clk, WithTraceLimits(10, 3))
	var spans []spanSpec
	for i := uint64(1); i <= 5; i++ {
		spans = append(spans, pgSpan(i, 2, "SELECT * FROM t", time.Millisecond))
	}
	if _, err := r.Consume(marshal(t, request("api", spans...))); err != nil {
		t.Fatal(err)
	}
	r.Flush(clk.now)
	if v := s.rows()[rowKey{"api", "(untagged)", "SELECT t", "db"}]; v.count != 2 {
		t.Fatalf("unknown right away: %+v", v)
	}
	if r.wait.len() != 3 {
		t.Fatalf("waiting %d, want 3", r.wait.len())
	}
	if _, err := r.Consume(marshal(t, request("api", server(1, "acme", "/x", time.Millisecond), server(2, "acme", "/x", time.Millisecond)))); err != nil {
		t.Fatal(err)
	}
	r.Flush(clk.now)
	if v := s.rows()[rowKey{"api", "acme", "SELECT t", "db"}]; v.count != 2 {
		t.Fatalf("acme after roots: %+v", v)
	}
}

func TestTenantFromCommentAndBaggage(t *testing.T) {
	clk := &fakeClock{now: t0}
	s := &sink{}
	r := newTestReceiver(t, s, clk, WithTenantAttribute("app.tenant"))
	own := pgSpan(9, 2, "SELECT * FROM x", 4*time.Millisecond, str("app.tenant", "hooli"))
	commented := pgSpan(10, 2, "SELECT * FROM y /*route='%2Fr',tenant='piedpiper',tier='T2'*/", 6*time.Millisecond)
	srv := server(11, "", "/s", time.Millisecond)
	srv.attrs[0] = str("app.tenant", "vandelay")
	if _, err := r.Consume(marshal(t, request("api", own, commented, srv))); err != nil {
		t.Fatal(err)
	}
	r.Flush(clk.now)
	got := s.rows()
	if v := got[rowKey{"api", "hooli", "SELECT x", "db"}]; v.count != 1 {
		t.Errorf("own attribute: %v", keysOf(got))
	}
	if v := got[rowKey{"api", "piedpiper", "SELECT y", "db"}]; v.count != 1 || v.tier != "T2" {
		t.Errorf("comment: %v %+v", keysOf(got), v)
	}
	if v := got[rowKey{"api", "vandelay", "/s", "request"}]; v.count != 1 {
		t.Errorf("configured attribute: %v", keysOf(got))
	}
}

// TestRouteNamedOther: a span's route really named like the overflow
// route counts under its stand-in (tenant.EscapeValue), and a route that
// is not valid under its own (tenant.SubstituteRoute): neither is in the
// overflow route, and neither with the other.
func TestRouteNamedOther(t *testing.T) {
	clk := &fakeClock{now: t0}
	s := &sink{}
	r := newTestReceiver(t, s, clk)
	if _, err := r.Consume(marshal(t, request("api", server(1, "acme", "other", time.Millisecond), server(2, "acme", "/r\x00oute", time.Millisecond)))); err != nil {
		t.Fatal(err)
	}
	r.Flush(clk.now)
	got := s.rows()
	bad, _ := tenant.SubstituteRoute("/r\x00oute")
	if len(got) != 2 || got[rowKey{"api", "acme", tenant.EscapeValue("other"), "request"}].count != 1 || got[rowKey{"api", "acme", bad, "request"}].count != 1 {
		t.Errorf("rows %v, want one in other's stand-in and the invalid one in %s", keysOf(got), bad)
	}
}

// Hostile values are validated as the collector validates reports: an
// invalid tenant counts under its stand-in (tenant.Substitute), an
// invalid route under its own (tenant.SubstituteRoute).
func TestHostileValues(t *testing.T) {
	clk := &fakeClock{now: t0}
	s := &sink{}
	r := newTestReceiver(t, s, clk)
	a := server(1, "badQZ", "/ok", time.Millisecond) // QZ becomes invalid UTF-8 below
	b := server(2, "ok", "/r\x00oute", time.Millisecond)
	c := server(3, strings.Repeat("t", 10_000), strings.Repeat("r", 100_000), time.Millisecond)
	c.attrs = append(c.attrs, str("tenant.tier", "T9"))
	req := request(strings.Repeat("s", 5000), a, b, c)
	body := bytes.Replace(marshal(t, req), []byte("badQZ"), []byte("bad\xff\xfe"), 1)
	if _, err := r.Consume(body); err != nil {
		t.Fatal(err)
	}
	r.Flush(clk.now)
	got := s.rows()
	for _, k := range []rowKey{
		{"unknown_service", `bad\xff\xfe#ddbfb754e1822835`, "/ok", "request"},
		{"unknown_service", "ok", `/r\x00oute#717a48232c1b835d`, "request"},
		{"unknown_service", strings.Repeat("t", 48) + "…#7919a1abbfe91bcd", standInOf(strings.Repeat("r", 100_000)), "request"},
	} {
		if got[k].count != 1 {
			t.Errorf("%v missing: %v", k, keysOf(got))
		}
	}
}

func standInOf(route string) string {
	s, _ := tenant.SubstituteRoute(route)
	return s
}

// A malformed body records nothing, even after well-formed spans.
func TestMalformedRecordsNothing(t *testing.T) {
	clk := &fakeClock{now: t0}
	s := &sink{}
	r := newTestReceiver(t, s, clk)
	good := marshal(t, request("api", server(1, "acme", "/a", time.Millisecond)))
	for _, body := range [][]byte{
		append(append([]byte{}, good...), 0x0a, 0x05, 1), // truncated second resource
		{0xff, 0xff, 0xff},
		good[:len(good)-3],
	} {
		if _, err := r.Consume(body); !errors.Is(err, ErrMalformed) {
			t.Errorf("%x: err %v, want ErrMalformed", body[:min(8, len(body))], err)
		}
	}
	r.Flush(clk.now)
	if len(s.rows()) != 0 {
		t.Fatalf("recorded %v", keysOf(s.rows()))
	}
}

// A refused window is kept and offered again first; while the collector
// keeps refusing, the receiver answers busy.
func TestRetryAndBackpressure(t *testing.T) {
	clk := &fakeClock{now: t0}
	s := &sink{refuse: 1, retry: time.Second}
	r := newTestReceiver(t, s, clk)
	if _, err := r.Consume(marshal(t, request("api", server(1, "acme", "/a", time.Millisecond)))); err != nil {
		t.Fatal(err)
	}
	r.Flush(clk.now)
	if len(s.reports) != 0 {
		t.Fatal("merged though refused")
	}
	clk.Add(time.Second)
	r.Consume(marshal(t, request("api", server(2, "acme", "/a", time.Millisecond))))
	r.Flush(clk.now)
	if len(s.reports) != 2 || s.reports[0].Seq >= s.reports[1].Seq {
		t.Fatalf("reports %d, want 2 in order", len(s.reports))
	}
	if v := s.rows()[rowKey{"api", "acme", "/a", "request"}]; v.count != 2 {
		t.Fatalf("count %+v", v)
	}
	s.refuse, s.retry = 1000, time.Second
	for i := 0; i < maxBacklog+1; i++ {
		clk.Add(time.Second)
		r.Consume(marshal(t, request("svc"+string(rune('a'+i)), server(uint64(10+i), "acme", "/a", time.Millisecond))))
		r.Flush(clk.now)
	}
	if _, retry, err := r.acquire(t.Context(), 1); !errors.Is(err, ErrBusy) || retry != retryLater {
		t.Fatalf("acquire with a backlog: %v, retry %v", err, retry)
	}
	s.refuse = 0
	r.Flush(clk.now)
	done, _, err := r.acquire(t.Context(), 1)
	if err != nil {
		t.Fatalf("acquire after the backlog drained: %v", err)
	}
	done()
}

func TestShutdown(t *testing.T) {
	clk := &fakeClock{now: t0}
	s := &sink{}
	r, err := New(s, WithClock(clk.Now), WithInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	r.Start()
	r.Consume(marshal(t, request("api", pgSpan(1, 2, "SELECT * FROM a", time.Millisecond))))
	if err := r.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if v := s.rows()[rowKey{"api", "(untagged)", "SELECT a", "db"}]; v.count != 1 {
		t.Fatalf("waiting span not flushed at shutdown: %v", keysOf(s.rows()))
	}
	if err := r.Shutdown(t.Context()); !errors.Is(err, ErrShutdown) {
		t.Fatalf("second shutdown: %v", err)
	}
	if _, _, err := r.acquire(t.Context(), 1); !errors.Is(err, ErrShutdown) {
		t.Fatalf("acquire after shutdown: %v", err)
	}
}

func TestOptions(t *testing.T) {
	for _, o := range []Option{WithTenantAttribute(""), WithInterval(0), WithMaxBody(10, 5), WithInflight(0),
		WithMaxSources(0), WithTraceWait(2 * time.Minute), WithTraceLimits(0, 1), WithMaxRows(0), WithClock(nil)} {
		if _, err := New(&sink{}, o); !errors.Is(err, ErrInvalid) {
			t.Errorf("err %v, want ErrInvalid", err)
		}
	}
	if _, err := New(nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil sink: %v", err)
	}
}

// Sources beyond the limit share the service "other".
func TestMaxSources(t *testing.T) {
	clk := &fakeClock{now: t0}
	s := &sink{}
	r := newTestReceiver(t, s, clk, WithMaxSources(2))
	for _, svc := range []string{"a", "b", "c", "d"} {
		r.Consume(marshal(t, request(svc, server(1, "acme", "/x", time.Millisecond))))
	}
	r.Flush(clk.now)
	got := s.rows()
	if got[rowKey{"other", "acme", "/x", "request"}].count != 2 || got[rowKey{"a", "acme", "/x", "request"}].count != 1 {
		t.Fatalf("rows %v", keysOf(got))
	}
}

// 100,000 spans in one request: accepted, and the receiver allocates a
// bounded multiple of the body, not a message tree per span.
func TestHundredThousandSpans(t *testing.T) {
	clk := &fakeClock{now: t0}
	s := &sink{}
	r := newTestReceiver(t, s, clk)
	const n = 100_000
	spans := make([]spanSpec, n)
	for i := range spans {
		if i%2 == 0 {
			spans[i] = server(uint64(i/2+1), "tenant-"+string(rune('a'+i%7)), "/route/"+string(rune('a'+i%5)), time.Millisecond)
		} else {
			spans[i] = pgSpan(uint64(i/2+1), 2, "SELECT * FROM items WHERE id = $1", time.Millisecond)
		}
	}
	body := marshal(t, request("big", spans...))
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	res, err := r.Consume(body)
	runtime.ReadMemStats(&m1)
	if err != nil || res.Spans != n {
		t.Fatalf("res %+v err %v", res, err)
	}
	alloc := m1.TotalAlloc - m0.TotalAlloc
	t.Logf("body %d bytes, %d spans: allocated %d bytes (%.0f per span)", len(body), n, alloc, float64(alloc)/n)
	// The records are buffered (160 B each) and the trace cache grows by
	// the 50,000 roots (about 400 B per span in all, measured); a
	// materialised request would take well over 1 KiB per span.
	if alloc > 600*n {
		t.Fatalf("allocated %d bytes for %d spans", alloc, n)
	}
	r.Flush(clk.now)
	var total uint64
	for _, v := range s.rows() {
		total += v.count
	}
	if total != n {
		t.Fatalf("recorded %d, want %d", total, n)
	}
	if v := s.rows()[rowKey{"big", "(untagged)", "SELECT items", "db"}]; v.count != 0 {
		t.Fatalf("db spans unattributed: %d", v.count)
	}
}

// An idle source is forgotten only after a cut found its window empty:
// a late flush loses nothing.
func TestIdleSourceForgotten(t *testing.T) {
	clk := &fakeClock{now: t0}
	s := &sink{}
	r := newTestReceiver(t, s, clk)
	r.Consume(marshal(t, request("api", server(1, "acme", "/a", time.Millisecond))))
	steps := []struct {
		at      time.Duration
		sources int
		merged  int
	}{
		{10 * time.Minute, 1, 1},               // late flush: the window is merged, not dropped
		{10*time.Minute + time.Second, 1, 1},   // this cut finds the window empty
		{10*time.Minute + 2*time.Second, 0, 1}, // idle, and its last cut was empty: forgotten
	}
	for _, st := range steps {
		clk.now = t0.Add(st.at)
		r.Flush(clk.now)
		if len(r.sources) != st.sources || len(s.reports) != st.merged {
			t.Fatalf("at %v: %d sources, %d reports; want %d, %d", st.at, len(r.sources), len(s.reports), st.sources, st.merged)
		}
	}
}

// Windows the collector still refuses at shutdown are dropped, and the
// log and qtop_otlp_reports_total{result="dropped"} say how many.
func TestShutdownTellsOfRefusedWindows(t *testing.T) {
	clk := &fakeClock{now: t0}
	s := &sink{refuse: 1000, retry: time.Second}
	var logs strings.Builder
	r, err := New(s, WithClock(clk.Now), WithInterval(time.Hour), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	for i, svc := range []string{"a", "b", "c"} {
		if _, err := r.Consume(marshal(t, request(svc, server(uint64(i+1), "acme", "/a", time.Millisecond)))); err != nil {
			t.Fatal(err)
		}
	}
	r.Flush(clk.now)
	if err := r.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(r.met.reports.WithLabelValues("dropped")); got != 3 {
		t.Fatalf("dropped %v windows, want 3", got)
	}
	if !strings.Contains(logs.String(), "windows the collector refused until shutdown are dropped") || !strings.Contains(logs.String(), "windows=3") ||
		!strings.Contains(logs.String(), `reason="refused (retry after 1s)"`) {
		t.Fatalf("log:\n%s", logs.String())
	}
}

// A service behind a gate (WithGated) has its SERVER spans give their
// traces' tenants, not requests: the gate counted those. Its statements
// are recorded as any service's; another service's requests are.
func TestGatedServiceCountsNoRequests(t *testing.T) {
	clk := &fakeClock{now: t0}
	s := &sink{}
	r := newTestReceiver(t, s, clk, WithGated(func(service string) bool { return service == "shop-node" }))
	for _, req := range []*coltracepb.ExportTraceServiceRequest{
		request("shop-node", server(1, "acme", "/a", 15*time.Millisecond), pgSpan(1, 2, "SELECT * FROM a", 10*time.Millisecond)),
		request("api", server(2, "acme", "/b", 5*time.Millisecond)),
	} {
		if _, err := r.Consume(marshal(t, req)); err != nil {
			t.Fatal(err)
		}
	}
	r.Flush(clk.now)
	got := s.rows()
	want := map[rowKey]uint64{{"shop-node", "acme", "SELECT a", "db"}: 1, {"api", "acme", "/b", "request"}: 1}
	if len(got) != len(want) {
		t.Errorf("rows %v, want %v", keysOf(got), want)
	}
	for k, n := range want {
		if got[k].count != n {
			t.Errorf("%v: %d, want %d (rows %v)", k, got[k].count, n, keysOf(got))
		}
	}
	if n := testutil.ToFloat64(r.met.spans[resGated]); n != 1 {
		t.Errorf("request_gated spans %v, want 1", n)
	}
}
