package collector

import (
	"math"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

// maxRatioSeries bounds the series of qtop_collector_latency_ratio: services
// are deployments, not tenants, but their names come from reports.
const maxRatioSeries = 256

var ratioDesc = prometheus.NewDesc("qtop_collector_latency_ratio",
	"Latency ratio per service: p95 over the long window / p95 over the short window, "+
		"merged over the service's processes; about 1 healthy, 0.33 when latency just tripled, "+
		"0 while there are too few samples.",
	[]string{"service"}, nil)

var (
	p95Desc = prometheus.NewDesc("qtop_collector_latency_p95_seconds",
		"p95 latency per service over the last 10 s, merged over the service's processes (qtop's latency view); "+
			"absent while its latency ratio is unknown (too few samples).",
		[]string{"service"}, nil)
	baselineDesc = prometheus.NewDesc("qtop_collector_latency_baseline_p95_seconds",
		"A service's usual p95: the median over the trailing hour (less the last 3 minutes and any incident's) "+
			"of each minute's p95; absent until 5 such minutes exist. The latency alerts compare the p95 with it.",
		[]string{"service"}, nil)
)

// ratioCollector exports each reporting service's latency ratio, p95 and
// baseline p95 as they are at scrape time, so a service that stops
// reporting drops its series.
type ratioCollector struct{ s *Server }

var _ prometheus.Collector = ratioCollector{}

func (c ratioCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- ratioDesc
	ch <- p95Desc
	ch <- baselineDesc
}

func (c ratioCollector) Collect(ch chan<- prometheus.Metric) {
	now := c.s.cfg.Now()
	c.s.mu.Lock()
	names := make([]string, 0, len(c.s.view.services))
	for name := range c.s.view.services {
		names = append(names, name)
	}
	slices.Sort(names)
	names = names[:min(len(names), maxRatioSeries)]
	// Per service: the ratio (0: unknown), the p95 and the baseline p95
	// (0: no series).
	values := make([][3]float64, len(names))
	for i, name := range names {
		sv := c.s.view.services[name]
		if v, ok := sv.sig.ValueAt(now); ok && !math.IsNaN(v) && !math.IsInf(v, 0) {
			values[i][0] = v
			values[i][1] = sv.w.rates(now.Unix()).p95
		}
		values[i][2] = c.s.feat.base.serviceBaseline(name)
	}
	c.s.mu.Unlock()
	for i, name := range names {
		// Names are cleaned at ingest; should one still not be a valid
		// label value, the series is left out: a scrape never fails
		// because of data.
		for j, d := range [3]*prometheus.Desc{ratioDesc, p95Desc, baselineDesc} {
			if v := values[i][j]; j > 0 && !(v > 0 && !math.IsInf(v, 0)) {
				continue
			}
			if m, err := prometheus.NewConstMetric(d, prometheus.GaugeValue, values[i][j], name); err == nil {
				ch <- m
			}
		}
	}
}
