package autopilot

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/policy"
)

// BenchmarkStep1000: one second of the autopilot over a snapshot of 1000
// tenants (the live view's most), with the default rules, every tenant
// a victim so that every step searches for an offender among them all.
func BenchmarkStep1000(b *testing.B) {
	s := &api.Snapshot{Time: t0, Source: api.SourceCollector, Measure: api.MeasureRU, Collector: api.CollectorStatus{Uptime: time.Hour}}
	for i := range 1000 {
		h := make([]float64, api.HistoryLen)
		for j := range h {
			h[j] = float64(i%50 + 1)
		}
		s.Tenants = append(s.Tenants, api.TenantRow{Tenant: fmt.Sprintf("tenant-%04d", i), Tier: "T2", RUPerSec: h[0], DBLoad: h[0] / 100,
			P95Seconds: 0.02, BaselineP95Seconds: 0.005, BaselineShare: 0.001, History: h})
		s.PoolWait = append(s.PoolWait, api.PoolWaitRow{Tenant: s.Tenants[i].Tenant, WaitPerSec: 0.01})
	}
	e, err := New(Default())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		s.Time = s.Time.Add(time.Second)
		e.Step(s)
	}
}

// FuzzNew: any JSON decoded as the autopilot's part either fails
// validation with policy.ErrInvalid or makes an engine that steps.
func FuzzNew(f *testing.F) {
	f.Add([]byte(`{"rules":[{"name":"a","victims_min":3}]}`))
	f.Add([]byte(`{"allow":["x"],"rules":[{"name":"b","ratio_below":0.5,"action":"budget","concurrency":2,"relax_steps":10}]}`))
	f.Add([]byte(`{"rules":[{"name":"c","victims_min":1,"for_seconds":1,"hold_seconds":1,"factor":0.01,"action":"demote"}]}`))
	sc := &scenario{start: 12, end: 40, offenders: []string{"bigcorp"}, baselines: true}
	f.Fuzz(func(t *testing.T, b []byte) {
		var a policy.Autopilot
		if json.Unmarshal(b, &a) != nil {
			return
		}
		e, err := New(a)
		if err != nil {
			return
		}
		for sec := range 45 {
			for _, d := range e.Step(sc.snap(sec)) {
				if err := checkPart(d); err != nil {
					t.Fatalf("%s: %v: %v", b, d, err)
				}
			}
		}
	})
}
