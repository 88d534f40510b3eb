package autopilot

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/policy"
)

// noise is a deterministic pseudo-random number in [0, 1) for (i, sec).
func noise(i, sec int) float64 {
	x := math.Sin(float64(i)*12.9898+float64(sec)*78.233) * 43758.5453
	return x - math.Floor(x)
}

// dayLoad is tenant i's RU/s at second sec of an hour of a normal day:
// 30 tenants of 5 to 92 RU/s, each swinging ±50% over the hour with its
// own phase and ±15% from second to second; tenant "cron" (T3) runs a
// batch at 3× its load for a minute every ten.
func dayLoad(i, sec int) float64 {
	base := 5 + 3*float64(i)
	d := 1 + 0.5*math.Sin(2*math.Pi*(float64(sec)/3600+float64(i)/30))
	v := base * d * (0.85 + 0.3*noise(i, sec))
	if i == 0 && sec >= 0 && sec%600 < 60 {
		v *= 3
	}
	return v
}

// daySnap is second sec of the hour.
func daySnap(sec int) *api.Snapshot {
	s := &api.Snapshot{Time: t0.Add(time.Duration(sec) * time.Second), Source: api.SourceCollector, Measure: api.MeasureRU,
		Collector: api.CollectorStatus{Uptime: 24 * time.Hour}}
	var ru float64
	for i := range 30 {
		h := make([]float64, api.HistoryLen)
		for j := range h {
			h[j] = dayLoad(i, sec-(api.HistoryLen-1-j))
		}
		name, tier := fmt.Sprintf("shop%02d", i), []string{"T0", "T1", "T2", "T3"}[i%4]
		if i == 0 {
			name, tier = "cron", "T3"
		}
		p95 := 0.020 * (0.9 + 0.2*noise(i+100, sec)) * (1 + 0.2*math.Sin(2*math.Pi*float64(sec)/3600))
		s.Tenants = append(s.Tenants, api.TenantRow{Tenant: name, Tier: tier, RUPerSec: h[len(h)-1], DBLoad: h[len(h)-1] / 200,
			P95Seconds: p95, History: h})
		ru += h[len(h)-1]
	}
	for i := range s.Tenants {
		s.Tenants[i].Share = s.Tenants[i].RUPerSec / ru
	}
	for k, svc := range []string{"storefront-api", "search-api"} {
		s.Services = append(s.Services, api.ServiceRow{Service: svc, Ratio: 0.95 + 0.1*noise(k+200, sec)})
	}
	return s
}

// TestNormalDayNoActions: an hour of a normal day's load — diurnal
// swings, second-to-second noise, a batch tenant's bursts — makes no
// decision under the default rules nor under a stricter-looking rule on
// DB load.
func TestNormalDayNoActions(t *testing.T) {
	db := rule(policy.AutopilotEnforce)
	db.Name, db.Resource, db.Action, db.MinShare = "db", policy.ResourceDB, policy.AutopilotBudget, 0.1
	a := Default()
	a.Rules = append(a.Rules, db)
	e := newEngine(t, a)
	hurt := 0
	for sec := range 3600 {
		s := daySnap(sec)
		for _, d := range e.Step(s) {
			t.Errorf("second %d: %v", sec, d)
		}
		if len(e.Headline().Victims) > 0 {
			hurt++
		}
	}
	t.Logf("seconds with a victim in the headline: %d of 3600", hurt)
}
