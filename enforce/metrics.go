package enforce

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/qtop-dev/qtop/tenant"
	"github.com/qtop-dev/qtop/topn"
)

// Metrics exports an Enforcer's counters as qtop_enforce_* metrics on an
// injected registerer: per tier from Stats at scrape time (nothing on the
// request path), and per tenant only through a topn ranking, so a metric
// has at most N+1 tenant series.
type Metrics struct {
	e       *Enforcer
	rank    *topn.Ranking
	every   int64
	next    atomic.Int64
	descs   map[string]*prometheus.Desc
	tenants *topn.Collector
}

var _ prometheus.Collector = (*Metrics)(nil)

// NewMetrics registers the enforcer's metrics on reg, with per-tenant RU,
// request and refusal counters for the top n tenants by RU (n ≥ 1) and
// "other". The ranking is re-cut every rerank interval (default 10 s when
// 0) as requests arrive.
func NewMetrics(reg prometheus.Registerer, e *Enforcer, n int, rerank time.Duration) (*Metrics, error) {
	if reg == nil || e == nil {
		return nil, fmt.Errorf("%w: nil registerer or enforcer", ErrConfig)
	}
	if rerank == 0 {
		rerank = 10 * time.Second
	}
	if rerank < 0 {
		return nil, fmt.Errorf("%w: rerank interval %v", ErrConfig, rerank)
	}
	rank, err := topn.New(n, topn.WithRankBy(topn.RU))
	if err != nil {
		return nil, fmt.Errorf("enforce: metrics: %w", err)
	}
	m := &Metrics{e: e, rank: rank, every: int64(rerank), descs: map[string]*prometheus.Desc{
		"admitted":   prometheus.NewDesc("qtop_enforce_admitted_total", "Work admitted, by tier.", []string{"tier"}, nil),
		"refused":    prometheus.NewDesc("qtop_enforce_refused_total", "Work refused, by tier and reason (throttle: RU bucket or policy, shed: tier shed, queue: CoDel).", []string{"tier", "reason"}, nil),
		"shadow":     prometheus.NewDesc("qtop_enforce_shadow_refused_total", "Work a shadow-mode rule would have refused and let through, by tier and reason.", []string{"tier", "reason"}, nil),
		"ru":         prometheus.NewDesc("qtop_enforce_ru_total", "Request units charged, prices included, by tier.", []string{"tier"}, nil),
		"multiplier": prometheus.NewDesc("qtop_enforce_price_multiplier", "Current RU price multiplier of a tier (its highest step while shed).", []string{"tier"}, nil),
		"shed":       prometheus.NewDesc("qtop_enforce_tier_shed", "1 while a tier is being shed.", []string{"tier"}, nil),
		"level":      prometheus.NewDesc("qtop_enforce_price_level", "Escalation steps the price controller has taken.", nil, nil),
		"tenants":    prometheus.NewDesc("qtop_enforce_tenants", "Tenants with an RU bucket in memory.", nil, nil),
		"evicted":    prometheus.NewDesc("qtop_enforce_evicted_tenants_total", "Idle tenant buckets evicted.", nil, nil),
		"policy":     prometheus.NewDesc("qtop_enforce_policy_version", "Version of the collector policy applied.", nil, nil),
	}}
	if err := reg.Register(m); err != nil {
		return nil, fmt.Errorf("enforce: register metrics: %w", err)
	}
	m.tenants, err = topn.NewCollector(reg, rank, "tenant",
		topn.Metric{Measure: topn.RU, Name: "qtop_enforce_tenant_ru_total", Help: "Request units charged per tenant, top N and other."},
		topn.Metric{Measure: topn.Requests, Name: "qtop_enforce_tenant_requests_total", Help: "Requests per tenant, top N and other."},
		topn.Metric{Measure: topn.Errors, Name: "qtop_enforce_tenant_refused_total", Help: "Requests refused per tenant, top N and other."})
	if err != nil {
		reg.Unregister(m)
		return nil, fmt.Errorf("enforce: register tenant metrics: %w", err)
	}
	return m, nil
}

// ObserveAt counts one request of tenant t: the RU charged and whether
// it was refused. A tenant named like the "other" series counts under its
// stand-in (tenant.Escape), apart from it.
func (m *Metrics) ObserveAt(now time.Time, t string, ru float64, refused bool) {
	var v topn.Values
	v[topn.RU] = ru
	v[topn.Requests] = 1
	if refused {
		v[topn.Errors] = 1
	}
	_ = m.rank.Add(tenant.Escape(t), v) // rejects only invalid values, which ru never is
	n := now.UnixNano()
	if next := m.next.Load(); n >= next && m.next.CompareAndSwap(next, n+m.every) && next != 0 {
		m.rank.Rerank()
	} else if next == 0 {
		m.next.CompareAndSwap(0, n+m.every)
	}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range m.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	s := m.e.Stats()
	c := func(d string, t prometheus.ValueType, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(m.descs[d], t, v, labels...)
	}
	for i, ts := range s.Tiers {
		tier := (tenant.T0 + tenant.Tier(i)).String()
		c("admitted", prometheus.CounterValue, float64(ts.Admitted), tier)
		c("refused", prometheus.CounterValue, float64(ts.Throttled), tier, "throttle")
		c("refused", prometheus.CounterValue, float64(ts.Shed), tier, "shed")
		c("refused", prometheus.CounterValue, float64(ts.Dropped), tier, "queue")
		c("shadow", prometheus.CounterValue, float64(ts.ShadowThrottled), tier, "throttle")
		c("shadow", prometheus.CounterValue, float64(ts.ShadowShed), tier, "shed")
		c("shadow", prometheus.CounterValue, float64(ts.ShadowDropped), tier, "queue")
		c("ru", prometheus.CounterValue, ts.RU, tier)
		shed := 0.0
		if ts.Shedding {
			shed = 1
		}
		c("multiplier", prometheus.GaugeValue, ts.Multiplier, tier)
		c("shed", prometheus.GaugeValue, shed, tier)
	}
	c("level", prometheus.GaugeValue, float64(s.Level))
	c("tenants", prometheus.GaugeValue, float64(s.Tenants))
	c("evicted", prometheus.CounterValue, float64(s.Evicted))
	c("policy", prometheus.GaugeValue, float64(s.PolicyVersion))
}
