package incident

import (
	"testing"
	"time"

	"github.com/qtop-dev/qtop/api"
)

// mixedAt is second i of a steady tenant "mixed" whose routes answer in
// 2 ms (GET /products) and 50 ms (GET /reports), and whose p95 follows
// its mix: every fourth second enough reports fall in the window to
// make it 50 ms, else 3 ms. A rare import's p95 swings ×3 on its own. From second slow on, both routes take three
// times as long (a real victim). Nine quiet tenants take the rest.
func mixedAt(i, slow int) api.Snapshot {
	s := api.Snapshot{Time: t0.Add(time.Duration(i) * time.Second), Source: api.SourceCollector, Measure: api.MeasureRU}
	k := 1.0
	if i >= slow {
		k = 3
	}
	p95 := 0.003
	if i%4 == 0 {
		p95 = 0.050
	}
	// Three imports a window: their p95 is their slowest, 40 ms or,
	// one window in three, 120.
	importP95 := 0.040
	if i%3 == 0 {
		importP95 = 0.120
	}
	s.Tenants = append(s.Tenants, api.TenantRow{Tenant: "mixed", RUPerSec: 10, P95Seconds: k * p95, Share: 0.1,
		History: make([]float64, api.HistoryLen), Routes: []api.RouteRow{
			{Route: "GET /products", ReqPerSec: 8, P95Seconds: k * 0.002}, {Route: "GET /reports", ReqPerSec: 2, P95Seconds: k * 0.050},
			{Route: "POST /import", ReqPerSec: 0.3, P95Seconds: importP95}}})
	for j := range 9 {
		s.Tenants = append(s.Tenants, api.TenantRow{Tenant: string(rune('a' + j)), RUPerSec: 10, P95Seconds: 0.02, Share: 0.1,
			History: make([]float64, api.HistoryLen)})
	}
	return s
}

// TestVictimJudgedByRoute: a tenant whose p95 rises only because its mix
// of fast and slow routes moved is no victim once its routes have
// baselines; one whose routes are slower is, with the routes named.
func TestVictimJudgedByRoute(t *testing.T) {
	var in Tracker
	const slow = 400
	var wrong []int
	for i := range slow {
		s := mixedAt(i, slow)
		for _, v := range in.Add(&s).Victims {
			wrong = append(wrong, i)
			if v.Tenant != "mixed" {
				t.Fatalf("second %d: victim %q", i, v.Tenant)
			}
		}
	}
	if len(wrong) != 0 {
		t.Errorf("the mix alone made mixed a victim in %d seconds (%v)", len(wrong), wrong)
	}
	s := mixedAt(slow, slow)
	h := in.Add(&s)
	if len(h.Victims) != 1 || h.Victims[0].Tenant != "mixed" {
		t.Fatalf("both routes ×3: victims %+v, want mixed", h.Victims)
	}
	got := h.Victims[0].Routes
	if len(got) != 2 || got[0].Route != "GET /reports" || got[1].Route != "GET /products" {
		t.Errorf("routes hurt %+v, want GET /reports then GET /products", got)
	}
}
