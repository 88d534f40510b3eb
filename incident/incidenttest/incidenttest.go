// Package incidenttest holds the scripted incident that the tests of
// package incident and of qtop's headline both replay.
package incidenttest

import (
	"fmt"
	"time"

	"github.com/qtop-dev/qtop/api"
)

// At is second i (from t0) of a scripted incident: 20 quiet tenants at
// 10 RU/s and p95 20 ms; from second 40 bigcorp's import takes 80% of
// the RU and the others' p95 doubles while their load stays.
func At(t0 time.Time, i int) api.Snapshot {
	s := api.Snapshot{Time: t0.Add(time.Duration(i) * time.Second), Source: api.SourceCollector, Measure: api.MeasureRU}
	busy := i >= 40
	hist := make([]float64, api.HistoryLen)
	for j := range hist {
		if sec := i - (api.HistoryLen - 1 - j); sec >= 40 {
			hist[j] = 800
		} else if sec >= 0 {
			hist[j] = 1
		}
	}
	big := api.TenantRow{Tenant: "bigcorp", RUPerSec: 1, P95Seconds: 0.5, Share: 0.005, History: hist}
	p95 := 0.020
	if busy {
		big.RUPerSec, big.Share = 800, 0.8
		p95 = 0.041
	}
	s.Tenants = append(s.Tenants, big)
	for k := range 20 {
		s.Tenants = append(s.Tenants, api.TenantRow{Tenant: fmt.Sprintf("t%02d", k), RUPerSec: 10, P95Seconds: p95, Share: 0.01,
			History: make([]float64, api.HistoryLen)})
	}
	return s
}
