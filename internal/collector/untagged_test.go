package collector

import (
	"testing"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/meter"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/tenant"
)

// TestUntaggedIsNotATenant: the load of records without a tenant and a
// real tenant named "unknown" (the name untagged load had before) are two
// rows of the live view, the untagged one marked as such; a record that
// claims the reserved name for a tenant counts under its stand-in, as the
// sampler counts that tenant's sessions, apart from both.
func TestUntaggedIsNotATenant(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	rec := newRec(t, meter.WithSource(report.Source{Service: "api", Instance: "p", Host: "h"}), meter.WithClock(f.clk.Now))
	for range 3 {
		rec.Record(meter.Record{Tags: tenant.Tags{Tenant: "unknown", Route: "r"}, Kind: report.KindRequest, Duration: time.Millisecond})
	}
	for range 2 {
		rec.Record(meter.Record{Tags: tenant.Tags{Route: "r"}, Kind: report.KindRequest, Duration: time.Millisecond})
	}
	rec.Record(meter.Record{Tags: tenant.Tags{Tenant: tenant.Untagged, Route: "r"}, Kind: report.KindRequest, Duration: time.Millisecond})
	f.clk.Add(time.Second)
	rep := rec.Cut(f.clk.Now())
	body, err := rep.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if code := f.ingest(body); code != 200 {
		t.Fatalf("ingest: %d", code)
	}
	f.clk.Add(2 * time.Second)
	snap := f.s.Snapshot(f.clk.Now(), api.MeasureReq, 20)
	var named, untagged, claimed *api.TenantRow
	stand, _ := tenant.Substitute(tenant.Untagged)
	for i := range snap.Tenants {
		switch r := &snap.Tenants[i]; {
		case r.Untagged:
			untagged = r
		case r.Tenant == "unknown":
			named = r
		case r.Tenant == stand:
			claimed = r
		}
	}
	if named == nil || untagged == nil || claimed == nil {
		t.Fatalf("rows %+v: want a tenant named unknown, the untagged row and %s apart", snap.Tenants, stand)
	}
	w := snap.Window.Seconds()
	if n, u, c := named.ReqPerSec*w, untagged.ReqPerSec*w, claimed.ReqPerSec*w; n < 2.99 || n > 3.01 || u < 1.99 || u > 2.01 || c < 0.99 || c > 1.01 {
		t.Errorf("tenant unknown %.2f requests (want 3), untagged %.2f (want 2), the reserved name's stand-in %.2f (want 1)", n, u, c)
	}
	if untagged.Tenant != tenant.Untagged {
		t.Errorf("untagged row named %q, want %q", untagged.Tenant, tenant.Untagged)
	}
}
