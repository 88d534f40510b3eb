package collector

import (
	"math"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/meter"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/tenant"
)

// TestFleetServiceBaselineIsOwn: in a fleet, a collector learns a
// service's baseline from the p95 of its own processes, the p95 it
// exports, not from the fleet view's (the largest of the collectors'):
// the latency alerts divide the two series of one collector.
func TestFleetServiceBaselineIsOwn(t *testing.T) {
	peer := newFixture(t, func(c *Config) { c.Store = StoreNone })
	defer peer.stop()
	srv := httptest.NewServer(peer.s.Handler())
	defer srv.Close()
	f := newFixture(t, func(c *Config) { c.Store = StoreNone; c.Peers = []string{srv.URL} })
	defer f.stop()
	f.s.feat.base.gap, f.s.feat.base.need = 1, 2 // a baseline after 3 complete minutes

	fast := newProcess(f.clk, "api", "a1")    // 10 ms, reporting to f
	slow := newProcess(peer.clk, "api", "b1") // 40 ms, reporting to the peer
	slowReport := func() []byte {
		for range 30 {
			slow.rec.Record(meter.Record{Tags: tenant.Tags{Tenant: "acme", Route: "GET /x", Tier: tenant.T2},
				Kind: report.KindRequest, Duration: 40 * time.Millisecond, RU: 1})
		}
		b, err := slow.rec.Cut(peer.clk.Now()).MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	h := httpAPI{f.s}
	for range 4 * 60 {
		f.clk.Add(time.Second)
		peer.clk.Add(time.Second)
		f.ingest(fast.report(t, "acme", 30, ""))
		peer.ingest(slowReport())
		f.s.Tick(t.Context(), f.clk.Now())
		peer.s.Tick(t.Context(), peer.clk.Now())
		h.stepAutopilot(t.Context())
	}
	fleet := serviceOf(f.s.fleetSnapshotFor(t), "api")
	if fleet.P95Seconds < 0.039 || fleet.Processes != 2 {
		t.Fatalf("the fleet view of api: %+v; want both collectors' processes, the peer's 40 ms p95", fleet)
	}
	p95, ok := gauge(t, f, "qtop_collector_latency_p95_seconds", "api")
	if !ok || p95 > 0.011 {
		t.Fatalf("exported p95 %v, %v: want this collector's own 10 ms", p95, ok)
	}
	if base, ok := gauge(t, f, "qtop_collector_latency_baseline_p95_seconds", "api"); !ok || math.Abs(base-p95) > 1e-9 {
		t.Fatalf("exported baseline %v, %v: want the exported p95 %v, learnt from this collector's processes", base, ok, p95)
	}
}

// fleetSnapshotFor is the fleet view the autopilot and the baselines step on.
func (s *Server) fleetSnapshotFor(t *testing.T) api.Snapshot {
	return httpAPI{s}.fleetSnapshot(t.Context(), api.MeasureRU, maxTop)
}
