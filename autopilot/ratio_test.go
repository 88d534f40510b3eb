package autopilot

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/policy"
)

// lastingSlowdown is second sec of an incident read by a ratio_below rule
// alone: from second 60 bigcorp imports at 800 RU/s and the service's p95
// triples for good (20 → 60 ms). Its latency ratio reads 0.35 for a minute
// and then 0.9, its 5-minute window having taken in the new level; the
// service's hour baseline (withBaseline) stays at 20 ms.
func lastingSlowdown(sec int, withBaseline bool) *api.Snapshot {
	s := &api.Snapshot{Time: t0.Add(time.Duration(sec) * time.Second), Source: api.SourceCollector, Measure: api.MeasureRU,
		Collector: api.CollectorStatus{Uptime: time.Hour}}
	hist := make([]float64, api.HistoryLen)
	for j := range hist {
		hist[j] = 12
		if sec-(api.HistoryLen-1-j) >= 60 {
			hist[j] = 800
		}
	}
	s.Tenants = append(s.Tenants, api.TenantRow{Tenant: "bigcorp", Tier: "T2", RUPerSec: hist[len(hist)-1], P95Seconds: 0.5, History: hist})
	for k := range 5 {
		s.Tenants = append(s.Tenants, api.TenantRow{Tenant: fmt.Sprintf("shop%d", k), Tier: "T2", RUPerSec: 10, P95Seconds: 0.02})
	}
	sv := api.ServiceRow{Service: "api", Ratio: 1, P95Seconds: 0.020}
	switch {
	case sec >= 120:
		sv.Ratio, sv.P95Seconds = 0.9, 0.060
	case sec >= 60:
		sv.Ratio, sv.P95Seconds = 0.35, 0.060
	}
	if withBaseline {
		sv.BaselineP95Seconds = 0.020
	}
	s.Services = []api.ServiceRow{sv}
	return s
}

// TestRatioBelowHoldsOnALastingSlowdown: a ratio_below rule acts when the
// import starts. With the service's hour baseline in the snapshot, the
// p95 still three times it keeps the rule hurt for as long as the
// slowdown lasts, so its quota holds; on the latency ratio alone (no
// baseline yet), the rule took the 5-minute window's catching up for a
// recovery and relaxed and lifted the quota while the service was still
// three times as slow.
func TestRatioBelowHoldsOnALastingSlowdown(t *testing.T) {
	r := policy.AutopilotRule{Name: "ratio", Mode: policy.AutopilotEnforce, RatioBelow: 0.5}
	for _, withBaseline := range []bool{true, false} {
		e := newEngine(t, policy.Autopilot{Rules: []policy.AutopilotRule{r}})
		var kinds []string
		for sec := range 400 {
			for _, d := range e.Step(lastingSlowdown(sec, withBaseline)) {
				kinds = append(kinds, fmt.Sprintf("%d %s", sec, d.Kind))
				// The evidence names the lower ratio: the baseline's 1/3.
				want := 0.35
				if withBaseline {
					want = 0.020 / 0.060
				}
				if d.Kind == KindApply && (d.Evidence.Service != "api" || math.Abs(d.Evidence.Ratio-want) > 0.005) {
					t.Fatalf("evidence %+v, want ratio %v", d.Evidence, want)
				}
			}
		}
		switch {
		case withBaseline && (len(kinds) != 1 || kinds[0] != "60 "+string(KindApply)):
			t.Fatalf("with the hour baseline: %v, want the quota applied at 60 and held", kinds)
		case !withBaseline && len(kinds) < 2:
			t.Fatalf("on the ratio alone: %v, want a relax once the ratio recovers (the test shows nothing)", kinds)
		}
		t.Logf("baseline %v: %v", withBaseline, kinds)
	}
}
