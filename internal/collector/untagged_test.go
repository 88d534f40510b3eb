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
// rows of the live view, the untagged one marked as such; a report that
// claims the reserved name for a tenant only adds to the untagged row.
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
	var named, untagged *api.TenantRow
	for i := range snap.Tenants {
		switch r := &snap.Tenants[i]; {
		case r.Untagged:
			untagged = r
		case r.Tenant == "unknown":
			named = r
		}
	}
	if named == nil || untagged == nil {
		t.Fatalf("rows %+v: want a tenant named unknown and the untagged row apart", snap.Tenants)
	}
	w := snap.Window.Seconds()
	if n, u := named.ReqPerSec*w, untagged.ReqPerSec*w; n < 2.99 || n > 3.01 || u < 2.99 || u > 3.01 {
		t.Errorf("tenant unknown %.2f requests (want 3), untagged %.2f (want 3: two without a tenant, one claiming the reserved name)", n, u)
	}
	if untagged.Tenant != tenant.Untagged {
		t.Errorf("untagged row named %q, want %q", untagged.Tenant, tenant.Untagged)
	}
}
