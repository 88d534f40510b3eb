package autopilot_test

import (
	"fmt"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/autopilot"
	"github.com/qtop-dev/qtop/policy"
)

// snapshot is second sec of an incident: from second 60 bigcorp imports
// at 800 RU/s and five shops' p95 goes from 20 to 50 ms.
func snapshot(sec int) *api.Snapshot {
	start := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	s := &api.Snapshot{Time: start.Add(time.Duration(sec) * time.Second), Source: api.SourceCollector, Measure: api.MeasureRU,
		Collector: api.CollectorStatus{Uptime: time.Hour}}
	hist := make([]float64, api.HistoryLen)
	for j := range hist {
		if sec-(api.HistoryLen-1-j) >= 60 {
			hist[j] = 800
		} else {
			hist[j] = 12
		}
	}
	s.Tenants = append(s.Tenants, api.TenantRow{Tenant: "bigcorp", Tier: "T2", RUPerSec: hist[len(hist)-1], P95Seconds: 0.5, History: hist})
	for k := range 5 {
		p95 := 0.020
		if sec >= 60 {
			p95 = 0.050
		}
		s.Tenants = append(s.Tenants, api.TenantRow{Tenant: fmt.Sprintf("shop%d", k), Tier: "T2", RUPerSec: 10, ReqPerSec: 5, P95Seconds: p95,
			BaselineP95Seconds: 0.020, BaselineShare: 0.1})
	}
	return s
}

// One rule in shadow: it decides, and the quota it writes is a shadow
// rule, counted and never applied.
func Example() {
	e, err := autopilot.New(policy.Autopilot{Rules: []policy.AutopilotRule{{Name: "import", VictimsMin: 3}}})
	if err != nil {
		panic(err)
	}
	for sec := range 90 {
		for _, d := range e.Step(snapshot(sec)) {
			r := d.PolicyRule
			fmt.Printf("%s shadow=%v %s %s %s at %.0f RU/s until %s\n", d.Time.Format("15:04:05"), d.Shadow, d.Kind, r.Action, d.Tenant,
				r.RUPerSecond, r.Expires.Format("15:04:05"))
			fmt.Printf("victims %d, %s p95 %.0f ms vs %.0f ms; bigcorp %.0f%% of RU at ×%.0f its baseline\n", d.Evidence.VictimsHurt,
				d.Evidence.Victims[0].Tenant, d.Evidence.Victims[0].P95Seconds*1000, d.Evidence.Victims[0].BaselineP95Seconds*1000,
				d.Evidence.Share*100, d.Evidence.Factor)
		}
	}
	fmt.Println(len(e.Active()), "action active")
	// Output:
	// 09:01:00 shadow=true apply quota bigcorp at 12 RU/s until 09:16:00
	// victims 5, shop0 p95 50 ms vs 20 ms; bigcorp 94% of RU at ×8 its baseline
	// 1 action active
}
