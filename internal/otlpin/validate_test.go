package otlpin

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"

	"github.com/qtop-dev/qtop/report"
)

func dbl(k string, v float64) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: v}}}
}

// The case: a span with end − start = 2^63 ns beside 100 good
// spans of another tenant of the same source. The absurd span is refused
// alone (partial success, counted); the 100 reach the collector's merge,
// whose decoder (the sink decodes with meter's checks) would refuse the
// whole window for the absurd one.
func TestAbsurdSpanRefusedAlone(t *testing.T) {
	clk := &fakeClock{now: t0}
	s := &sink{}
	reg := prometheus.NewPedanticRegistry()
	r := newTestReceiver(t, s, clk, WithRegisterer(reg))

	absurd := server(1, "evil", "/x", 0)
	absurd.start = time.Unix(0, 1)
	sp := absurd.proto()
	sp.EndTimeUnixNano = sp.StartTimeUnixNano + 1<<63
	var bads []spanSpec
	for i, a := range []*commonpb.KeyValue{
		dbl(AttrRU, math.NaN()), dbl(AttrRU, math.Inf(1)), dbl(AttrRU, -1), dbl(AttrRU, 2e6),
		dbl("http.response.body.size", 1e300), num("http.response.body.size", 1<<62),
	} {
		b := server(uint64(10+i), "evil", "/x", time.Millisecond)
		b.attrs = append(b.attrs, a)
		bads = append(bads, b)
	}
	bads = append(bads, pgSpan(16, 2, "SELECT 1", time.Millisecond, str("tenant.id", "evil"), num("db.response.returned_rows", 1<<51)))
	good := make([]spanSpec, 100)
	for i := range good {
		good[i] = server(uint64(100+i), "acme", "/orders", 10*time.Millisecond)
	}
	req := request("shop", append(bads, good...)...)
	req.ResourceSpans[0].ScopeSpans[0].Spans = append(req.ResourceSpans[0].ScopeSpans[0].Spans, sp)
	res, err := r.Consume(marshal(t, req))
	if err != nil {
		t.Fatal(err)
	}
	if res.Spans != 108 || res.Rejected != 8 {
		t.Fatalf("result %+v, want 108 spans, 8 rejected", res)
	}
	for _, want := range []string{"1 span(s) with a duration above 24h0m0s", "4 span(s) with a qtop.ru", "3 span(s) with a byte or row count", "other spans were kept"} {
		if !strings.Contains(res.Message, want) {
			t.Errorf("message %q lacks %q", res.Message, want)
		}
	}
	// Another request of another source in the same second is kept too.
	if _, err := r.Consume(marshal(t, request("billing", server(300, "globex", "/pay", time.Millisecond)))); err != nil {
		t.Fatal(err)
	}
	r.Flush(clk.Now())
	got := s.rows()
	if g := got[rowKey{"shop", "acme", "/orders", "request"}]; g.count != 100 || g.dur != time.Second {
		t.Errorf("acme: %+v, want the 100 spans (1s)", g)
	}
	if g := got[rowKey{"billing", "globex", "/pay", "request"}]; g.count != 1 {
		t.Errorf("globex: %+v", g)
	}
	for k := range got {
		if k.tenant == "evil" {
			t.Errorf("a refused span was recorded: %v", k)
		}
	}
	want := `
# HELP qtop_otlp_spans_rejected_total OTLP spans refused alone (partial success; the request's other spans kept), by reason: time (zero start, end before start), duration (above 24h), ru (qtop.ru not a number from 0 to 1e6), size (bytes or rows above 2^50).
# TYPE qtop_otlp_spans_rejected_total counter
qtop_otlp_spans_rejected_total{reason="duration"} 1
qtop_otlp_spans_rejected_total{reason="ru"} 4
qtop_otlp_spans_rejected_total{reason="size"} 3
qtop_otlp_spans_rejected_total{reason="time"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "qtop_otlp_spans_rejected_total"); err != nil {
		t.Error(err)
	}
}

// Spans each within a record's bounds may add up, in one row of one
// second, beyond a report's: the window is merged with the sums held at
// their bounds rather than refused whole.
func TestSumsHeldAtBounds(t *testing.T) {
	clk := &fakeClock{now: t0}
	s := &sink{}
	r := newTestReceiver(t, s, clk)
	var spans []spanSpec
	for i := range 3 {
		sp := server(uint64(1+i), "acme", "/big", time.Millisecond)
		sp.attrs = append(sp.attrs, num("http.response.body.size", report.MaxBytes), dbl(AttrRU, report.MaxRecordRU))
		spans = append(spans, sp)
	}
	spans = append(spans, server(9, "acme", "/small", time.Millisecond))
	if _, err := r.Consume(marshal(t, request("shop", spans...))); err != nil {
		t.Fatal(err)
	}
	r.Flush(clk.Now())
	if len(s.reports) != 1 {
		t.Fatalf("%d reports merged, want 1", len(s.reports))
	}
	for _, row := range s.reports[0].Rows {
		switch row.Route {
		case "/big":
			if row.Count != 3 || row.Bytes != report.MaxBytes || row.RU != 3*report.MaxRecordRU {
				t.Errorf("big row %+v", row)
			}
		case "/small":
			if row.Count != 1 || row.Bytes != 0 {
				t.Errorf("small row %+v", row)
			}
		}
	}
}

func TestBound(t *testing.T) {
	rep := &report.Report{Rows: []report.Row{
		{Count: 2, Errors: 3, Duration: -5, RU: math.NaN(), Bytes: 1 << 60, Rows: 1 << 60},
		{Count: 1, Duration: 25 * time.Hour, RU: 2e6},
		{Count: 4, Errors: 1, Duration: time.Second, RU: 1, Bytes: 10, Rows: 2},
	}}
	if n := bound(rep); n != 2 {
		t.Errorf("changed %d rows, want 2", n)
	}
	a, b, c := rep.Rows[0], rep.Rows[1], rep.Rows[2]
	if a.Errors != 2 || a.Duration != 48*time.Hour || a.RU != 2e6 || a.Bytes != report.MaxBytes || a.Rows != report.MaxBytes {
		t.Errorf("row 0 %+v", a)
	}
	if b.Duration != report.MaxRecordDuration || b.RU != report.MaxRecordRU {
		t.Errorf("row 1 %+v", b)
	}
	if c.Errors != 1 || c.Duration != time.Second || c.RU != 1 || c.Bytes != 10 || c.Rows != 2 {
		t.Errorf("row 2 %+v", c)
	}
}

// TestSkewedSpansCounted: spans dated years away from the collector's
// clock (a sender whose clock is wrong) are recorded, in the window open
// when they arrive, and counted by direction; they are not refused and
// take none of the other spans of their request with them. Within the
// bound (an hour either way) a span is not counted.
func TestSkewedSpansCounted(t *testing.T) {
	clk := &fakeClock{now: t0}
	s := &sink{}
	reg := prometheus.NewPedanticRegistry()
	r := newTestReceiver(t, s, clk, WithRegisterer(reg))
	at := func(sp spanSpec, start time.Time) spanSpec { sp.start = start; return sp }
	year := 365 * 24 * time.Hour
	req := request("shop",
		at(server(1, "acme", "/a", time.Millisecond), t0.Add(-time.Millisecond)),
		at(server(2, "acme", "/a", time.Millisecond), t0.Add(5*year)),                      // future
		at(server(3, "acme", "/a", time.Millisecond), t0.Add(-3*year)),                     // past
		at(server(4, "acme", "/a", time.Millisecond), t0.Add(59*time.Minute)),              // within the bound
		at(server(5, "acme", "/a", time.Millisecond), t0.Add(-time.Hour-time.Millisecond)), // ends exactly an hour before: within
		at(pgSpan(2, 2, "SELECT * FROM t", time.Millisecond), t0.Add(5*year)),              // future, its trace's tenant
		at(server(6, "acme", "/a", time.Millisecond), time.Unix(0, math.MaxInt64-10)),      // year 2262
	)
	res, err := r.Consume(marshal(t, req))
	if err != nil {
		t.Fatal(err)
	}
	if res.Spans != 7 || res.Rejected != 0 {
		t.Fatalf("result %+v, want 7 spans, none rejected", res)
	}
	r.Flush(clk.Now())
	got := s.rows()
	if g := got[rowKey{"shop", "acme", "/a", "request"}]; g.count != 6 {
		t.Errorf("requests of acme: %+v, want 6", g)
	}
	if g := got[rowKey{"shop", "acme", "SELECT t", "db"}]; g.count != 1 {
		t.Errorf("statement of acme: %+v, want 1; rows %v", g, keysOf(got))
	}
	want := `
# HELP qtop_otlp_spans_skewed_total OTLP spans whose end is further than the clock skew bound (WithClockSkew, 1h by default) from the collector's clock, by direction (past, future): a sender's clock is wrong, or a queue held its spans for long. They are recorded, like every span, in the window open when they arrive.
# TYPE qtop_otlp_spans_skewed_total counter
qtop_otlp_spans_skewed_total{direction="future"} 3
qtop_otlp_spans_skewed_total{direction="past"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "qtop_otlp_spans_skewed_total"); err != nil {
		t.Error(err)
	}
}

// TestSkewOf: a span's end is skewed only beyond the bound, either way;
// an end past what int64 nanoseconds hold (year 2262) is in the future.
func TestSkewOf(t *testing.T) {
	const bound = time.Hour
	ns := func(d time.Duration) uint64 { return uint64(t0.Add(d).UnixNano()) }
	for _, c := range []struct {
		end  uint64
		want int
	}{
		{ns(0), skewNone},
		{ns(bound), skewNone},
		{ns(bound + 1), skewFuture},
		{ns(-bound), skewNone},
		{ns(-bound - 1), skewPast},
		{1, skewPast},
		{math.MaxInt64, skewFuture},
		{math.MaxUint64, skewFuture},
	} {
		if got := skewOf(c.end, t0, bound); got != c.want {
			t.Errorf("end %d: %d, want %d", c.end, got, c.want)
		}
	}
	if _, err := New(&sink{}, WithClockSkew(0)); !errors.Is(err, ErrInvalid) {
		t.Errorf("a zero bound: %v", err)
	}
	// A narrower bound counts what the default does not.
	clk := &fakeClock{now: t0}
	reg := prometheus.NewPedanticRegistry()
	r := newTestReceiver(t, &sink{}, clk, WithRegisterer(reg), WithClockSkew(time.Minute))
	sp := server(1, "acme", "/a", time.Millisecond)
	sp.start = t0.Add(-2 * time.Minute)
	if _, err := r.Consume(marshal(t, request("shop", sp))); err != nil {
		t.Fatal(err)
	}
	if n := testutil.ToFloat64(r.met.skewed[skewPast]); n != 1 {
		t.Errorf("past %v, want 1", n)
	}
}

// TestTenantsBeyondMaxRowsCounted: a service's second with more tenants
// than WithMaxRows counts the spans beyond under tenant other and says how
// many (qtop_otlp_spans_folded_total); a larger WithMaxRows names them
// all. Before, 600 tenants in a second lost 89 spans' tenants silently,
// and no setting raised the 512.
func TestTenantsBeyondMaxRowsCounted(t *testing.T) {
	for _, c := range []struct {
		maxRows      int
		named        int
		folded, rows uint64
	}{{0, DefaultMaxRows - 1, 600 - DefaultMaxRows + 1, DefaultMaxRows}, {1024, 600, 0, 600}} {
		clk := &fakeClock{now: t0}
		s := &sink{}
		var opts []Option
		if c.maxRows > 0 {
			opts = append(opts, WithMaxRows(c.maxRows))
		}
		r := newTestReceiver(t, s, clk, opts...)
		var spans []spanSpec
		for i := range 600 {
			spans = append(spans, server(uint64(1+i), fmt.Sprintf("t%03d", i), "/r", time.Millisecond))
		}
		if _, err := r.Consume(marshal(t, request("shop", spans...))); err != nil {
			t.Fatal(err)
		}
		r.Flush(clk.Now())
		if len(s.reports) != 1 {
			t.Fatalf("max rows %d: %d reports, want 1", c.maxRows, len(s.reports))
		}
		named, other := 0, uint64(0)
		for _, row := range s.reports[0].Rows {
			if row.Tenant == report.OtherTenant {
				other += row.Count
			} else {
				named++
			}
		}
		got := testutil.ToFloat64(r.met.folded)
		if named != c.named || other != c.folded || got != float64(c.folded) || uint64(len(s.reports[0].Rows)) != c.rows {
			t.Errorf("max rows %d: %d tenants named, %d spans under other, metric %v, %d rows; want %d, %d, %d, %d",
				c.maxRows, named, other, got, len(s.reports[0].Rows), c.named, c.folded, c.folded, c.rows)
		}
	}
}
