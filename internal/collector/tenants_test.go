package collector

import (
	"fmt"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/histogram"
	"github.com/qtop-dev/qtop/meter"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/tenant"
)

// The live view's "other" latency is every row's less the shown
// tenants': exactly the p95 of the tenants beyond the top, over two
// services, several routes, and DB rows (which have no latency).
func TestOtherLatencyIsTheRest(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	var rest histogram.Sparse
	for s, svc := range []string{"api", "jobs"} {
		p := newProcess(f.clk, svc, "p")
		for i := range 12 {
			name := fmt.Sprintf("t%02d", i)
			for k := range 5 {
				d := time.Duration(1+i*7+k*3+s*11) * time.Millisecond
				p.rec.Record(meter.Record{Tags: tenant.Tags{Tenant: name, Route: fmt.Sprintf("r%d", k%2)},
					Kind: report.KindRequest, Duration: d, RU: float64(100 - i)})
				p.rec.Record(meter.Record{Tags: tenant.Tags{Tenant: name, Route: "q"}, Kind: report.KindDB, Duration: time.Second})
				if i >= 3 { // beyond the top 3 by RU (t00, t01, t02)
					rest.ObserveDuration(d)
				}
			}
		}
		f.ingest(p.report(t, "t11", 0, ""))
	}
	snap := f.s.Snapshot(f.clk.Add(time.Second), api.MeasureRU, 3)
	if len(snap.Tenants) != 4 || snap.Tenants[0].Tenant != "t00" || snap.Tenants[3].Tenant != api.OtherTenant {
		t.Fatalf("tenants %+v", snap.Tenants)
	}
	if got, want := snap.Tenants[3].P95Seconds, rest.Quantile(0.95); got != want {
		t.Fatalf("other's p95 %v, want %v", got, want)
	}
}

// A tenant idle for longer than any view shows is forgotten, one sampled
// by the pg sampler only is kept while it is sampled.
func TestPruneReadsTheLastSecond(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	f.ingest(newProcess(f.clk, "api", "p").report(t, "acme", 1, ""))
	sec := f.clk.Now().Unix()
	f.s.agg.withTenant("pg-only", func(tl *tenantLive) { tl.touch(sec + histN) })
	f.s.agg.prune(sec + histN + rateN)
	if f.s.agg.tenants.Load() != 2 {
		t.Fatalf("%d tenants after %d s, want 2", f.s.agg.tenants.Load(), histN+rateN)
	}
	f.s.agg.prune(sec + histN + rateN + 1)
	var left []string
	f.s.agg.eachTenant(func(_ int, name string, _ *tenantLive) { left = append(left, name) })
	if len(left) != 1 || left[0] != "pg-only" {
		t.Fatalf("tenants left %v, want [pg-only]", left)
	}
}
