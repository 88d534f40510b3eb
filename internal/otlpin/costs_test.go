package otlpin

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/ru"
)

// poolSpan is a connection-pool span of trace as the Node.js pg
// instrumentation makes it: a PostgreSQL client span with no statement.
func poolSpan(trace, id uint64, name string, start time.Time, dur time.Duration, tn string) spanSpec {
	return spanSpec{trace: trace, id: trace*100 + id, parent: trace*100 + 1, name: name, kind: tracepb.Span_SPAN_KIND_CLIENT,
		start: start, dur: dur, attrs: []*commonpb.KeyValue{str("db.system", "postgresql"), str("tenant.id", tn)}}
}

// DB time comes from statement spans only: pool spans become the
// tenant's pool wait, a PostgreSQL span with neither a statement nor a
// pool name is dropped, and statements of one trace that overlap or nest
// count their time once.
func TestDBTimeFromStatementsOnly(t *testing.T) {
	clk := &fakeClock{now: t0}
	s := &sink{}
	r := newTestReceiver(t, s, clk)
	ms := time.Millisecond
	outer := pgSpan(1, 2, "SELECT * FROM orders", 10*ms, str("tenant.id", "acme")) // t0+40ms … +50ms
	nested := pgSpan(1, 3, "SELECT * FROM orders", 4*ms, str("tenant.id", "acme"))
	nested.start = outer.start.Add(2 * ms) // inside outer: adds nothing
	overlap := pgSpan(1, 4, "SELECT * FROM orders", 10*ms, str("tenant.id", "acme"))
	overlap.start = outer.start.Add(5 * ms) // half inside: adds 5 ms
	other := pgSpan(2, 2, "SELECT * FROM orders", 10*ms, str("tenant.id", "acme"))
	other.start = outer.start // another trace: its own 10 ms
	bare := poolSpan(1, 9, "pg.something", t0, ms, "acme")
	req := request("shop", server(1, "acme", "/o", 60*ms), outer, nested, overlap, other,
		poolSpan(1, 5, "pg-pool.connect", t0, 3*ms, "acme"),
		poolSpan(1, 6, "pg.connect", t0, 2*ms, "acme"),
		poolSpan(2, 7, "pgxpool.acquire", t0, 7*ms, "globex"),
		bare)
	if _, err := r.Consume(marshal(t, req)); err != nil {
		t.Fatal(err)
	}
	r.Flush(clk.Now())
	got := s.rows()[rowKey{"shop", "acme", "SELECT orders", "db"}]
	if got.count != 4 || got.dur != 25*ms {
		t.Errorf("acme DB %+v, want 4 statements and 25 ms", got)
	}
	if len(s.reports) != 1 {
		t.Fatalf("%d reports", len(s.reports))
	}
	d, ok := report.SectionOf[report.EnforcementDetail](s.reports[0])
	if !ok {
		t.Fatal("no pool wait in the report")
	}
	want := []report.PoolWait{
		{Tenant: "globex", Count: 1, Wait: 7 * ms, Max: 7 * ms},
		{Tenant: "acme", Count: 2, Wait: 5 * ms, Max: 3 * ms},
	}
	if len(d.PoolWait) != len(want) || d.PoolWait[0] != want[0] || d.PoolWait[1] != want[1] {
		t.Errorf("pool wait %+v, want %+v", d.PoolWait, want)
	}
	for k := range s.rows() {
		if k.route == "pg.something" || k.route == "pg-pool.connect" {
			t.Errorf("a span without a statement became a row: %v", k)
		}
	}
}

// Requests and jobs without qtop.ru are priced by the cost model (the
// agent's: by HTTP method, bytes and duration); an explicit qtop.ru wins.
func TestRUFromCostModel(t *testing.T) {
	clk := &fakeClock{now: t0}
	s := &sink{}
	m := ru.Model{Base: [ru.NumOps]float64{1, 6, 6, 2}, PerKiB: 1, PerMs: 0.5}
	r := newTestReceiver(t, s, clk, WithCostModel(m))
	get := server(1, "acme", "/a", 10*time.Millisecond)
	get.attrs = append(get.attrs, str("http.request.method", "GET"), num("http.response.body.size", 2048))
	post := server(2, "acme", "/b", 4*time.Millisecond)
	post.attrs = append(post.attrs, str("http.method", "POST"))
	explicit := server(3, "acme", "/c", 4*time.Millisecond)
	explicit.attrs = append(explicit.attrs, &commonpb.KeyValue{Key: "qtop.ru", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: 42}}})
	job := spanSpec{trace: 4, id: 401, name: "render", kind: tracepb.Span_SPAN_KIND_CONSUMER, start: t0, dur: 2 * time.Millisecond,
		attrs: []*commonpb.KeyValue{str("tenant.id", "acme")}}
	if _, err := r.Consume(marshal(t, request("shop", get, post, explicit, job))); err != nil {
		t.Fatal(err)
	}
	r.Flush(clk.Now())
	want := map[string]float64{"/a": 1 + 2 + 5, "/b": 6 + 2, "/c": 42, "render": 6 + 1}
	for _, row := range s.reports[0].Rows {
		if w, ok := want[row.Route]; ok && math.Abs(row.RU-w) > 1e-9 {
			t.Errorf("%s: %v RU, want %v", row.Route, row.RU, w)
		}
		delete(want, row.Route)
	}
	if len(want) != 0 {
		t.Errorf("rows missing: %v", want)
	}
	if _, err := New(s, WithCostModel(ru.Model{PerMs: -1})); err == nil {
		t.Error("a negative cost model was accepted")
	}
}

// Start times cut to the millisecond (OpenTelemetry JS 2.x takes a span's
// start from Date.now() and adds a precise duration): two statements run
// one after the other seem to overlap by less than a millisecond, and a
// short one can seem to lie inside the one before; neither is deducted.
// A statement inside its parent statement counts once, however short, an
// overlap of a millisecond or more is deducted, and precise start times
// are merged as before.
func TestDBTimeMillisecondStarts(t *testing.T) {
	ms := uint64(time.Millisecond)
	base := uint64(t0.UnixNano()) // a whole millisecond
	type span struct{ id, parent, s, e uint64 }
	for _, c := range []struct {
		name          string
		first, second span
		wantSecond    uint64
	}{
		// 2.3 ms then 1.5 ms, siblings under the request (id 1); the
		// second's start was cut back 0.3 ms before the first's end.
		{"sequential", span{2, 1, 0, 2300_000}, span{3, 1, 2 * ms, 3500_000}, 1500_000},
		{"sequential, later one first", span{3, 1, 2 * ms, 3500_000}, span{2, 1, 0, 2300_000}, 2300_000},
		// a 0.3 ms statement that seems to lie inside the 2.5 ms before it
		{"short after long", span{2, 1, 0, 2500_000}, span{3, 1, 2 * ms, 2300_000}, 300_000},
		// a 0.6 ms query span inside its 3 ms driver span: nothing more,
		// in either order of arrival
		{"child inside parent", span{2, 1, 0, 3 * ms}, span{3, 2, 2 * ms, 2600_000}, 0},
		{"parent after child", span{3, 2, 2 * ms, 2600_000}, span{2, 1, 0, 3 * ms}, 2400_000},
		// queries in parallel, 1.5 ms of overlap: deducted
		{"parallel", span{2, 1, 0, 3500_000}, span{3, 1, 2 * ms, 4 * ms}, 500_000},
		// an export sent again: the span adds nothing
		{"sent again", span{2, 1, 0, 2 * ms}, span{2, 1, 0, 2 * ms}, 0},
		// precise starts: an overlap of 0.3 ms is deducted
		{"precise starts", span{2, 1, 100, 2300_100}, span{3, 1, 2000_100, 3500_100}, 1200_000},
	} {
		d := newDBIntervals(4)
		id := traceID{1}
		f, sc := c.first, c.second
		if got := d.add(id, base+f.s, base+f.e, f.id, f.parent); got != f.e-f.s {
			t.Errorf("%s: first statement %d ns, want %d", c.name, got, f.e-f.s)
		}
		if got := d.add(id, base+sc.s, base+sc.e, sc.id, sc.parent); got != c.wantSecond {
			t.Errorf("%s: second statement %d ns, want %d", c.name, got, c.wantSecond)
		}
	}
}

// With precise start times a trace's statements count the length of their
// union, whatever order they arrive in: checked against the union computed
// the long way, nanosecond by nanosecond, on random spans.
func TestDBTimeUnion(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		d := newDBIntervals(4)
		id := traceID{byte(round)}
		covered := make([]bool, 2000)
		var sum, want uint64
		for range 1 + rng.IntN(40) {
			s := 1 + uint64(rng.IntN(1900))
			e := s + 1 + uint64(rng.IntN(100))
			sum += d.add(id, s, e, 0, 0)
			for i := s; i < e; i++ {
				if !covered[i] {
					covered[i] = true
					want++
				}
			}
		}
		if sum != want {
			t.Fatalf("round %d: the statements counted %d ns, their union is %d", round, sum, want)
		}
	}
}

// TestDBTimeMemoryBudget: past the byte budget the oldest traces are
// forgotten, whatever the trace count allows, and what is kept stays
// under it.
func TestDBTimeMemoryBudget(t *testing.T) {
	d := newDBIntervals(1000)
	d.budget = 100 * int(unsafe.Sizeof(interval{}))
	for tr := range 30 {
		id := traceID{byte(tr)}
		for i := range uint64(10) { // ten disjoint statements a trace
			if got := d.add(id, 1+i*10, 5+i*10, 0, 0); got != 4 {
				t.Fatalf("trace %d statement %d counted %d ns, want 4", tr, i, got)
			}
		}
	}
	if d.n != 10 || d.bytes != d.budget {
		t.Fatalf("%d traces kept in %d bytes, want 10 in %d", d.n, d.bytes, d.budget)
	}
	if _, ok := d.m[traceID{19}]; ok {
		t.Fatal("trace 19 is kept, past the budget")
	}
	// A statement of a kept trace still overlaps; of a forgotten one it
	// counts whole.
	if got := d.add(traceID{29}, 1, 5, 0, 0); got != 0 {
		t.Fatalf("a kept trace's statement sent again counted %d ns", got)
	}
	if got := d.add(traceID{0}, 1, 5, 0, 0); got != 4 {
		t.Fatalf("a forgotten trace's statement counted %d ns, want 4", got)
	}
	sum := 0
	for _, tr := range d.m {
		sum += tr.size()
	}
	if sum != d.bytes || d.bytes > d.budget {
		t.Fatalf("bytes %d, the traces hold %d, budget %d", d.bytes, sum, d.budget)
	}
}
