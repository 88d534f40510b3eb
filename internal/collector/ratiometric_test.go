package collector

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/qtop-dev/qtop/api"
)

// TestLatencyRatioMetric: qtop_collector_latency_ratio{service} carries the
// same ratio the live view shows, healthy before the demo's import and
// below the degraded threshold during it.
func TestLatencyRatioMetric(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Demo = true; c.Store = StoreNone })
	defer f.stop()
	fleet, err := newDemoFleet(f.s, f.clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	fleet.warm(f.clk.Now())
	gauges := func() map[string]float64 {
		t.Helper()
		mfs, err := f.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, mf := range mfs {
			if mf.GetName() != "qtop_collector_latency_ratio" {
				continue
			}
			for _, m := range mf.GetMetric() {
				out[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
			}
		}
		return out
	}
	step := func(n int) api.Snapshot {
		for range n {
			fleet.step(f.clk.Add(time.Second))
			f.s.Tick(t.Context(), f.clk.Now())
		}
		return f.s.Snapshot(f.clk.Now(), api.MeasureDB, 5)
	}
	before := step(3)
	g := gauges()
	if len(g) != len(before.Services) || len(g) == 0 {
		t.Fatalf("series %v for services %+v", g, before.Services)
	}
	for name, v := range g {
		if v < 0.8 {
			t.Fatalf("service %s healthy before the import but ratio %.2f", name, v)
		}
	}
	step(20)
	for name, v := range gauges() {
		if v <= 0 || v >= 0.5 {
			t.Fatalf("service %s during the import: ratio %.2f, want (0, 0.5)", name, v)
		}
	}
	if problems, err := testutil.CollectAndLint(ratioCollector{f.s}); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
	if n := testutil.CollectAndCount(ratioCollector{f.s}, "qtop_collector_latency_ratio"); n != len(g) {
		t.Fatalf("%d series, want %d", n, len(g))
	}
}
