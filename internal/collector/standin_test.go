package collector

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/meter"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/tenant"
)

// TestInvalidTenantsStandIn: a report's tenant that is not a valid name
// — too long (the recorder names it), unprintable or in parentheses (the
// door does) — counts under its stand-in, the one the OTLP door and the
// sampler give it, never with the untagged load or another tenant; each
// is counted.
func TestInvalidTenantsStandIn(t *testing.T) {
	f := newFixture(t)
	p := newProcess(f.clk, "api", "p1")
	long := strings.Repeat("a", tenant.MaxTenantLen) + "-one"
	long2 := strings.Repeat("a", tenant.MaxTenantLen) + "-two"
	names := map[string]int{long: 2, long2: 3, "line\nbreak": 4, "(other)": 5, "": 6, "acme": 7}
	for name, n := range names {
		for range n {
			p.rec.Record(meter.Record{Tags: tenant.Tags{Tenant: name, Route: "GET /x", Tier: tenant.T2, Key: "k:" + name},
				Kind: report.KindRequest, Duration: 10 * time.Millisecond, RU: 1, Bytes: 100})
		}
	}
	mergeAndStop(t, f, p.rec.Cut(f.clk.Now()))
	for name, n := range names {
		want := name
		if name == "" {
			want = report.UnknownTenant
		} else if tenant.ValidateTenant(name) != nil {
			want, _ = tenant.Substitute(name)
		}
		if got := f.mem.sum(want, "request", count); got != float64(n) {
			t.Errorf("%q: %v requests under %q, want %d", name, got, want, n)
		}
	}
	if got := counterValue(f.s.met.invalidTags); got != 2 { // the door's two; the recorder cut the long ones
		t.Errorf("invalid tags counted %v, want 2", got)
	}
}

// TestInvalidRoutesStandIn: a report's route that is not a valid tag
// value (unprintable, not UTF-8) counts under its stand-in
// (tenant.SubstituteRoute, as the OTLP door names it), a row of its own,
// never in the reporter's overflow route; the rest of the report is
// merged as sent, and a row whose tenant and route are both bad is one
// invalid row, not two.
func TestInvalidRoutesStandIn(t *testing.T) {
	f := newFixture(t)
	p := newProcess(f.clk, "api", "p1")
	type tr struct{ tenant, route string }
	sent := map[tr]int{{"acme", "GET /ok"}: 2, {"acme", "GET /beyond"}: 3, {"acme", "GET /a\nb"}: 4,
		{"acme", "\xffroute"}: 5, {"line\nbreak", "bad\x00"}: 6}
	for k, n := range sent {
		for range n {
			p.rec.Record(meter.Record{Tags: tenant.Tags{Tenant: k.tenant, Route: k.route}, Kind: report.KindRequest,
				Duration: 10 * time.Millisecond, RU: 1})
		}
	}
	rep := p.rec.Cut(f.clk.Now())
	for i := range rep.Rows { // as a recorder past its route limit names the routes beyond it
		if rep.Rows[i].Route == "GET /beyond" {
			rep.Rows[i].Route = report.OtherRoute
		}
	}
	mergeAndStop(t, f, rep)
	want := map[tr]uint64{}
	for k, n := range sent {
		switch {
		case k.route == "GET /beyond":
			k.route = report.OtherRoute
		case tenant.ValidateRoute(k.route) != nil:
			k.route, _ = tenant.SubstituteRoute(k.route)
		}
		if tenant.ValidateTenant(k.tenant) != nil {
			k.tenant, _ = tenant.Substitute(k.tenant)
		}
		want[k] = uint64(n)
	}
	got := map[tr]uint64{}
	f.mem.mu.Lock()
	for _, r := range f.mem.rollups {
		got[tr{r.Tenant, r.Route}] += r.Count
	}
	f.mem.mu.Unlock()
	if len(got) != len(want) {
		t.Errorf("rows %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%q: %d requests, want %d", k, got[k], n)
		}
	}
	if got := counterValue(f.s.met.invalidTags); got != 3 { // three rows, one of them bad twice
		t.Errorf("invalid rows counted %v, want 3", got)
	}
}

// mergeAndStop sends rep to f's collector, closes its minute and stops it,
// so that f.mem holds what the store was given.
func mergeAndStop(t *testing.T, f *fixture, rep *report.Report) {
	t.Helper()
	b, err := rep.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if code := f.ingest(b); code != 200 {
		t.Fatalf("ingest %d", code)
	}
	f.s.Tick(context.Background(), f.clk.Add(5*time.Minute))
	f.stop()
}
