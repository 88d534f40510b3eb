package collector

import (
	"math"
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
	gauges := func(metric ...string) map[string]float64 {
		t.Helper()
		mfs, err := f.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, mf := range mfs {
			if name := append(metric, "qtop_collector_latency_ratio")[0]; mf.GetName() != name {
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
	p95Before := gauges("qtop_collector_latency_p95_seconds")
	for _, r := range before.Services {
		if p95Before[r.Service] != r.P95Seconds {
			t.Fatalf("service %s: p95 %v exported, %v in the live view", r.Service, p95Before[r.Service], r.P95Seconds)
		}
	}
	step(20)
	for name, v := range gauges() {
		if v <= 0 || v >= 0.5 {
			t.Fatalf("service %s during the import: ratio %.2f, want (0, 0.5)", name, v)
		}
	}
	for name, v := range gauges("qtop_collector_latency_p95_seconds") {
		if b := p95Before[name]; b <= 0 || v < 2*b {
			t.Fatalf("service %s: p95 %.4f s during the import, %.4f s before; want more than twice", name, v, b)
		}
	}
	if problems, err := testutil.CollectAndLint(ratioCollector{f.s}); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
	// No baseline yet: the collector has seen 23 seconds.
	if n := testutil.CollectAndCount(ratioCollector{f.s}, "qtop_collector_latency_ratio", "qtop_collector_latency_p95_seconds",
		"qtop_collector_latency_baseline_p95_seconds"); n != 2*len(g) {
		t.Fatalf("%d series, want %d", n, 2*len(g))
	}
}

// TestSmallServiceP95: a service of a few requests a second, too few for
// its latency ratio, still has a p95 series and learns a baseline, so the
// latency alerts cover it; one under minP95Requests in 10 s has neither.
func TestSmallServiceP95(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Store = StoreNone })
	defer f.stop()
	f.s.feat.base.gap, f.s.feat.base.need = 1, 2 // a baseline after 3 complete minutes
	small := newProcess(f.clk, "small", "s1")
	tiny := newProcess(f.clk, "tiny", "t1")
	h := httpAPI{f.s}
	for range 4 * 60 {
		f.clk.Add(time.Second)
		f.ingest(small.report(t, "acme", 3, ""))
		f.ingest(tiny.report(t, "acme", 1, ""))
		f.s.Tick(t.Context(), f.clk.Now())
		h.stepAutopilot(t.Context())
	}
	if r, ok := gauge(t, f, "qtop_collector_latency_ratio", "small"); !ok || r != 0 {
		t.Fatalf("small's ratio %v, %v: want 0, too few samples for it", r, ok)
	}
	p95, ok := gauge(t, f, "qtop_collector_latency_p95_seconds", "small")
	if !ok || p95 < 0.009 || p95 > 0.011 {
		t.Fatalf("small's p95 %v, %v: want its 10 ms", p95, ok)
	}
	if base, ok := gauge(t, f, "qtop_collector_latency_baseline_p95_seconds", "small"); !ok || math.Abs(base-p95) > 1e-9 {
		t.Fatalf("small's baseline %v, %v: want its p95 %v", base, ok, p95)
	}
	for _, m := range []string{"qtop_collector_latency_p95_seconds", "qtop_collector_latency_baseline_p95_seconds"} {
		if v, ok := gauge(t, f, m, "tiny"); ok {
			t.Fatalf("tiny (10 requests in 10 s): %s = %v, want no series", m, v)
		}
	}
}
