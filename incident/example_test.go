package incident_test

import (
	"fmt"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/incident"
)

// A tracker fed one snapshot a second: 40 quiet seconds, then bigcorp's
// import takes most of the RU and the other tenants' p95 doubles.
func Example() {
	var tr incident.Tracker
	start := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	var h incident.Headline
	for sec := range 45 {
		s := api.Snapshot{Time: start.Add(time.Duration(sec) * time.Second), Source: api.SourceCollector, Measure: api.MeasureRU}
		hist := make([]float64, api.HistoryLen)
		for j := range hist {
			if at := sec - (api.HistoryLen - 1 - j); at >= 40 {
				hist[j] = 800
			} else {
				hist[j] = 10
			}
		}
		p95 := 0.020
		if sec >= 40 {
			p95 = 0.045
		}
		s.Tenants = append(s.Tenants, api.TenantRow{Tenant: "bigcorp", RUPerSec: hist[len(hist)-1], P95Seconds: 0.5, History: hist})
		for k := range 5 {
			s.Tenants = append(s.Tenants, api.TenantRow{Tenant: fmt.Sprintf("shop%d", k), RUPerSec: 10, P95Seconds: p95})
		}
		h = tr.Add(&s)
	}
	fmt.Println(h.Line)
	fmt.Printf("%s: p95 %.0f ms, baseline %.0f ms\n", h.Victims[0].Tenant, h.Victims[0].P95Seconds*1000, h.Victims[0].BaselineP95Seconds*1000)
	// Output:
	// bigcorp 94% of RU, ×40 its baseline · victims: 5 tenants, p95 ×2.2 (key 8)
	// shop0: p95 45 ms, baseline 20 ms
}
