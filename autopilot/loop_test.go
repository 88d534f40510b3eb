package autopilot

import (
	"fmt"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/policy"
)

// loop is a closed-loop model of the demo's Monday-9am import: 20 shops
// of 30 RU/s share a database that serves 3000 RU/s; bigcorp, idle
// before, imports from second 120 in steps of 1200 RU/s every 3 s up to
// 4800 RU/s, until second 420. Every tenant's p95 grows with the
// database's utilisation ρ as a queue's does, 20 ms × (1−ρ₀)/(1−ρ)
// (capped at 10×). A quota the autopilot decides takes effect `delay`
// seconds later (the fleet's batch reporting) and caps bigcorp's
// admitted RU.
type loop struct {
	delay  int
	limit  float64 // 0: none
	from   int     // the second the limit takes effect
	demand func(sec int) float64
}

const (
	loopCapacity = 3000.0
	loopShops    = 20
	loopShopRU   = 30.0
)

func (l *loop) bigcorp(sec int) float64 {
	d := l.demand(sec)
	if l.limit > 0 && sec >= l.from {
		return min(d, l.limit)
	}
	return d
}

func importDemand(sec int) float64 {
	if sec < 120 || sec >= 420 {
		return 0
	}
	return min(float64((sec-120)/3+1)*1200, 4800)
}

// p95Factor is the tenants' p95 over their idle p95 at second sec.
func (l *loop) p95Factor(sec int) float64 {
	rho := min((loopShops*loopShopRU+l.bigcorp(sec))/loopCapacity, 0.99)
	rho0 := loopShops * loopShopRU / loopCapacity
	return min((1-rho0)/(1-rho), 10)
}

func (l *loop) snap(sec int) *api.Snapshot {
	s := &api.Snapshot{Time: t0.Add(time.Duration(sec) * time.Second), Source: api.SourceCollector, Measure: api.MeasureRU,
		Collector: api.CollectorStatus{Uptime: time.Hour}}
	h := make([]float64, api.HistoryLen)
	for j := range h {
		h[j] = l.bigcorp(sec - (api.HistoryLen - 1 - j))
	}
	f := l.p95Factor(sec)
	s.Tenants = append(s.Tenants, api.TenantRow{Tenant: "bigcorp", Tier: "T2", RUPerSec: h[len(h)-1], P95Seconds: 0.5 * f, History: h})
	for k := range loopShops {
		s.Tenants = append(s.Tenants, api.TenantRow{Tenant: fmt.Sprintf("shop%02d", k), Tier: "T2", RUPerSec: loopShopRU, ReqPerSec: 5,
			P95Seconds: 0.020 * f, History: flat(loopShopRU)})
	}
	return s
}

// TestClosedLoop: with the default rule in enforce and a quota that takes
// 2 s to reach the fleet, the shops' p95 is back under 1.5× their
// baseline within 15 s of the import's start; bigcorp is slowed, not
// stopped (its quota relaxes as the shops recover); the quota lifts
// when the import ends; nothing flaps in between.
func TestClosedLoop(t *testing.T) {
	a := Default()
	a.Rules[0].Mode = policy.AutopilotEnforce
	e := newEngine(t, a)
	l := &loop{delay: 2, demand: importDemand}
	var got []step
	recovered, admitted, demanded := -1, 0.0, 0.0
	for sec := range 600 {
		for _, d := range e.Step(l.snap(sec)) {
			got = append(got, step{sec, d.Kind, d.Tenant, d.Limit})
			l.limit, l.from = d.Limit, sec+l.delay
			if d.Kind == KindLift {
				l.limit = 0
			}
		}
		if sec >= 120 && sec < 420 {
			admitted += l.bigcorp(sec)
			demanded += l.demand(sec)
		}
		if sec > 120 && recovered < 0 && l.p95Factor(sec) < 1.5 {
			recovered = sec
		}
	}
	t.Logf("decisions %v; shops' p95 under 1.5× their baseline %d s after the import began; bigcorp admitted %.1f%% of its demand",
		got, recovered-120, 100*admitted/demanded)
	if recovered < 0 || recovered-120 > 15 {
		t.Fatalf("recovered at %d", recovered)
	}
	if len(got) != 4 || got[0].kind != KindApply || got[0].tenant != "bigcorp" || got[1].kind != KindRelax || got[2].kind != KindRelax ||
		got[3].kind != KindLift || got[3].sec != 420 {
		t.Fatalf("decisions %v", got)
	}
	if admitted <= 0 {
		t.Fatal("bigcorp stopped")
	}
}
