package otlpin

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/qtop-dev/qtop/tenant"
)

// TestNumericTenant: tenant ids are often numbers, and an SDK sends
// span.setAttribute("tenant.id", 42) as an int. Such a span is the
// tenant "42" (on a span or on its resource), not "(untagged)"; a value
// of another type (a bool, a list) names no tenant and is counted
// invalid rather than dropped without a word.
func TestNumericTenant(t *testing.T) {
	clk := &fakeClock{now: t0}
	s := &sink{}
	reg := prometheus.NewRegistry()
	r := newTestReceiver(t, s, clk, WithRegisterer(reg))
	withTenant := func(trace uint64, route string, v *commonpb.AnyValue) spanSpec {
		sp := server(trace, "", route, time.Millisecond)
		sp.attrs[0] = &commonpb.KeyValue{Key: "tenant.id", Value: v}
		return sp
	}
	req := request("api",
		withTenant(1, "/int", &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: 42}}),
		withTenant(2, "/neg", &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: -7}}),
		withTenant(3, "/bool", &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: true}}),
		withTenant(4, "/list", &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{
			Values: []*commonpb.AnyValue{{Value: &commonpb.AnyValue_StringValue{StringValue: "acme"}}}}}}),
	)
	// A resource whose tenant is a number, with a span that has none.
	res := request("billing", spanSpec{trace: 5, id: 501, name: "GET", kind: tracepb.Span_SPAN_KIND_SERVER, start: t0,
		dur: time.Millisecond, attrs: []*commonpb.KeyValue{str("http.route", "/res")}})
	res.ResourceSpans[0].Resource.Attributes = append(res.ResourceSpans[0].Resource.Attributes, num("tenant.id", 1001))
	req.ResourceSpans = append(req.ResourceSpans, res.ResourceSpans...)
	if _, err := r.Consume(marshal(t, req)); err != nil {
		t.Fatal(err)
	}
	r.Flush(clk.now)
	got := s.rows()
	for _, k := range []rowKey{
		{"api", "42", "/int", "request"},
		{"api", "-7", "/neg", "request"},
		{"api", "(untagged)", "/bool", "request"},
		{"api", "(untagged)", "/list", "request"},
		{"billing", "1001", "/res", "request"},
	} {
		if got[k].count != 1 {
			t.Errorf("%v missing: %v", k, keysOf(got))
		}
	}
	if n := testutil.ToFloat64(r.met.invalid); n != 2 {
		t.Errorf("qtop_otlp_invalid_values_total %v, want 2 (the bool and the list)", n)
	}
}

// TestLongTenantsStayApart: a tenant name that fails tenant.ValidateTenant
// counts under its own stand-in (tenant.Substitute), counted invalid, and
// never with another tenant: two names that share their first 200 bytes
// are two rows, neither is "(untagged)", and a sqlcommenter comment naming
// the same bad name gives the same stand-in as the span attribute does.
func TestLongTenantsStayApart(t *testing.T) {
	clk := &fakeClock{now: t0}
	s := &sink{}
	reg := prometheus.NewRegistry()
	r := newTestReceiver(t, s, clk, WithRegisterer(reg))
	long := strings.Repeat("a", 200)
	req := request("api",
		server(1, long+"1", "/a", time.Millisecond),
		server(2, long+"2", "/a", time.Millisecond),
		server(3, "acme", "/a", time.Millisecond),
		pgSpan(3, 2, "SELECT 1 /*tenant='"+long+"1'*/", time.Millisecond),
	)
	if _, err := r.Consume(marshal(t, req)); err != nil {
		t.Fatal(err)
	}
	r.Flush(clk.now)
	got := s.rows()
	one, _ := tenant.Substitute(long + "1")
	two, _ := tenant.Substitute(long + "2")
	for _, k := range []rowKey{
		{"api", one, "/a", "request"},
		{"api", two, "/a", "request"},
		{"api", "acme", "/a", "request"},
		{"api", one, "SELECT", "db"},
	} {
		if got[k].count != 1 {
			t.Errorf("%v: %+v; rows %v", k, got[k], keysOf(got))
		}
	}
	if len(got) != 4 {
		t.Errorf("rows %v, want 4", keysOf(got))
	}
	if n := testutil.ToFloat64(r.met.invalid); n != 3 {
		t.Errorf("qtop_otlp_invalid_values_total %v, want 3", n)
	}
}
