package collector

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/meter"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/tenant"
)

// TestEnforcementDetailFleetTotals: CoDel drops and pool waits sent in a
// report's enforcement detail reach the live snapshot and the fleet
// metrics, drops apart from shedding.
func TestEnforcementDetailFleetTotals(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	for i, inst := range []string{"a1", "b1"} {
		p := newProcess(f.clk, "api", inst)
		p.rec.Record(meter.Record{Tags: tenant.Tags{Tenant: "acme", Route: "GET /x"}, Kind: report.KindRequest, RU: 1})
		rep := p.rec.Cut(f.clk.Now())
		rep.Enforcement.Admitted[2] = 10
		rep.Enforcement.Shed[3] = 1
		d := report.EnforcementDetail{PoolWait: []report.PoolWait{{Tenant: "acme", Count: 4, Wait: 200 * time.Millisecond, Max: 100 * time.Millisecond}, {Tenant: "globex", Count: 1, Wait: time.Millisecond, Max: time.Millisecond}}}
		d.Dropped[3] = uint64(2 + i)
		d.ShadowDropped[2] = 1
		rep.SetSection(d)
		b, err := rep.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if f.ingest(b) != 200 {
			t.Fatal("refused")
		}
	}
	snap := f.s.Snapshot(f.clk.Add(time.Second), api.MeasureRU, 5)
	t3, t2 := snap.Enforcement.Tiers[3], snap.Enforcement.Tiers[2]
	if t3.Dropped != 5 || t3.Shed != 2 || t2.ShadowDropped != 2 || t2.Admitted != 20 {
		t.Errorf("tiers %+v", snap.Enforcement.Tiers)
	}
	if len(snap.PoolWait) != 2 || snap.PoolWait[0].Tenant != "acme" || snap.PoolWait[0].AcquirePerSec != 0.8 || snap.PoolWait[0].MaxSeconds != 0.1 {
		t.Errorf("pool wait %+v", snap.PoolWait)
	}
	m := f.s.met.enforcement
	if got := testutil.ToFloat64(m.decisions.WithLabelValues("T3", "dropped")); got != 5 {
		t.Errorf("dropped total %v", got)
	}
	if got := testutil.ToFloat64(m.decisions.WithLabelValues("T3", "shed")); got != 2 {
		t.Errorf("shed total %v", got)
	}
	if got := testutil.ToFloat64(m.poolWait); got < 0.401 || got > 0.403 {
		t.Errorf("pool wait total %v", got)
	}
	if probs, err := testutil.CollectAndLint(m.decisions); err != nil || len(probs) > 0 {
		t.Error(probs, err)
	}
}
