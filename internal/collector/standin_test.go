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
	ctx := context.Background()
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
	b, err := p.rec.Cut(f.clk.Now()).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if code := f.ingest(b); code != 200 {
		t.Fatalf("ingest %d", code)
	}
	f.s.Tick(ctx, f.clk.Add(5*time.Minute))
	f.stop()
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
