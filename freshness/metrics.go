package freshness

import "github.com/prometheus/client_golang/prometheus"

// freshMetrics exports the freshness counters at scrape time: nothing on
// the request path but atomic adds. Rule and route label values are
// bounded (maxRuleIDs and WithRoutes, then "other").
type freshMetrics struct{ f *Shedder }

var _ prometheus.Collector = (*freshMetrics)(nil)

var (
	freshRequestsDesc = prometheus.NewDesc("qtop_freshness_requests_total",
		"GET requests seen by the freshness middleware, by route.", []string{"route"}, nil)
	freshRevalidDesc = prometheus.NewDesc("qtop_freshness_revalidated_total",
		"GETs answered 304 after the handler ran because the response equalled the client's copy, by route.", []string{"route"}, nil)
	freshMatchedDesc = prometheus.NewDesc("qtop_freshness_rule_matched_total",
		"GETs an armed freshness rule matched (whatever the load), by rule and route.", []string{"rule", "route"}, nil)
	freshServedDesc = prometheus.NewDesc("qtop_freshness_rule_not_modified_total",
		"304 Not Modified answers a freshness rule served without running the handler, by rule and route.", []string{"rule", "route"}, nil)
	freshShadowDesc = prometheus.NewDesc("qtop_freshness_shadow_total",
		"Would-be 304s of shadow rules, by rule, route and outcome (right: the new response equalled the client's copy).", []string{"rule", "route", "outcome"}, nil)
	freshPrecisionDesc = prometheus.NewDesc("qtop_freshness_precision_ratio",
		"Share of a shadow rule's would-be 304s that were right, by rule and route.", []string{"rule", "route"}, nil)
	freshCutDesc = prometheus.NewDesc("qtop_freshness_cut_ratio",
		"Share of a route's GETs a rule matched (would cut, or cut), by rule and route.", []string{"rule", "route"}, nil)
	freshActiveDesc = prometheus.NewDesc("qtop_freshness_active",
		"1 when armed freshness rules applied at the last judged request (overload or forced).", nil, nil)
	freshDroppedDesc = prometheus.NewDesc("qtop_freshness_samples_dropped_total",
		"Waste samples dropped because the window's sample buffer was full.", nil, nil)
)

func (m *freshMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{freshRequestsDesc, freshRevalidDesc, freshMatchedDesc, freshServedDesc,
		freshShadowDesc, freshPrecisionDesc, freshCutDesc, freshActiveDesc, freshDroppedDesc} {
		ch <- d
	}
}

func (m *freshMetrics) Collect(ch chan<- prometheus.Metric) {
	f := m.f
	t := f.totals()
	nr := f.cfg.maxRoutes + 1
	for i, g := range t.gets {
		if g == 0 && t.revalid[i] == 0 {
			continue
		}
		route := f.routeName(i)
		ch <- prometheus.MustNewConstMetric(freshRequestsDesc, prometheus.CounterValue, float64(g), route)
		ch <- prometheus.MustNewConstMetric(freshRevalidDesc, prometheus.CounterValue, float64(t.revalid[i]), route)
	}
	for i, c := range t.cells {
		if c == [4]uint64{} {
			continue
		}
		rule, ri := f.ruleName(i/nr), i%nr
		route := f.routeName(ri)
		ch <- prometheus.MustNewConstMetric(freshMatchedDesc, prometheus.CounterValue, float64(c[0]), rule, route)
		ch <- prometheus.MustNewConstMetric(freshServedDesc, prometheus.CounterValue, float64(c[1]), rule, route)
		ch <- prometheus.MustNewConstMetric(freshShadowDesc, prometheus.CounterValue, float64(c[2]), rule, route, "right")
		ch <- prometheus.MustNewConstMetric(freshShadowDesc, prometheus.CounterValue, float64(c[3]), rule, route, "wrong")
		if n := c[2] + c[3]; n > 0 {
			ch <- prometheus.MustNewConstMetric(freshPrecisionDesc, prometheus.GaugeValue, float64(c[2])/float64(n), rule, route)
		}
		if g := t.gets[ri]; g > 0 {
			ch <- prometheus.MustNewConstMetric(freshCutDesc, prometheus.GaugeValue, float64(c[0])/float64(g), rule, route)
		}
	}
	active := 0.0
	if f.overNow.Load() {
		active = 1
	}
	ch <- prometheus.MustNewConstMetric(freshActiveDesc, prometheus.GaugeValue, active)
	ch <- prometheus.MustNewConstMetric(freshDroppedDesc, prometheus.CounterValue, float64(t.dropped))
}
