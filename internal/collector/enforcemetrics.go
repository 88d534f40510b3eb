package collector

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/tenant"
)

// enforcementMetrics are the fleet totals of what the processes'
// enforcers decided, summed from their reports.
type enforcementMetrics struct {
	decisions *prometheus.CounterVec
	poolWait  prometheus.Counter
	acquires  prometheus.Counter
}

// The values of the decision label of qtop_collector_enforcement_decisions_total.
var decisionNames = [...]string{"admitted", "throttled", "shed", "dropped", "shadow_throttled", "shadow_shed", "shadow_dropped"}

func newEnforcementMetrics(reg prometheus.Registerer) (*enforcementMetrics, error) {
	m := &enforcementMetrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "qtop_collector_enforcement_decisions_total",
			Help: "Enforcement decisions reported by the fleet, by tier and decision (dropped: failed early by CoDel; shadow_*: decided in shadow mode and not applied)."},
			[]string{"tier", "decision"}),
		poolWait: prometheus.NewCounter(prometheus.CounterOpts{Name: "qtop_collector_pool_wait_seconds_total",
			Help: "Time the fleet's work waited for database connections from its pools."}),
		acquires: prometheus.NewCounter(prometheus.CounterOpts{Name: "qtop_collector_pool_acquires_total",
			Help: "Database connection acquisitions the fleet's pools reported."}),
	}
	for _, c := range []prometheus.Collector{m.decisions, m.poolWait, m.acquires} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("collector: metrics: %w", err)
		}
	}
	for t := range tenant.NumTiers {
		for _, d := range decisionNames {
			m.decisions.WithLabelValues(tierName(t), d)
		}
	}
	return m, nil
}

func tierName(i int) string { return (tenant.T0 + tenant.Tier(i)).String() }

// add counts one report's enforcement and pool waits.
func (m *enforcementMetrics) add(e *report.Enforcement, d *report.EnforcementDetail) {
	pw := d.PoolWait
	for t := range tenant.NumTiers {
		for i, v := range [...]uint64{e.Admitted[t], e.Throttled[t], e.Shed[t], d.Dropped[t], e.ShadowThrottled[t], e.ShadowShed[t], d.ShadowDropped[t]} {
			if v > 0 {
				m.decisions.WithLabelValues(tierName(t), decisionNames[i]).Add(float64(v))
			}
		}
	}
	for _, p := range pw {
		m.poolWait.Add(p.Wait.Seconds())
		m.acquires.Add(float64(p.Count))
	}
}
