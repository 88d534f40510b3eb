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

// ratioCollector exports each reporting service's latency ratio as it is
// at scrape time, so a service that stops reporting drops its series.
type ratioCollector struct{ s *Server }

var _ prometheus.Collector = ratioCollector{}

func (c ratioCollector) Describe(ch chan<- *prometheus.Desc) { ch <- ratioDesc }

func (c ratioCollector) Collect(ch chan<- prometheus.Metric) {
	now := c.s.cfg.Now()
	c.s.mu.Lock()
	names := make([]string, 0, len(c.s.view.services))
	for name := range c.s.view.services {
		names = append(names, name)
	}
	slices.Sort(names)
	names = names[:min(len(names), maxRatioSeries)]
	values := make([]float64, len(names))
	for i, name := range names {
		if v, ok := c.s.view.services[name].sig.ValueAt(now); ok && !math.IsNaN(v) && !math.IsInf(v, 0) {
			values[i] = v
		}
	}
	c.s.mu.Unlock()
	for i, name := range names {
		// Names are cleaned at ingest; should one still not be a valid
		// label value, the series is left out: a scrape never fails
		// because of data.
		if m, err := prometheus.NewConstMetric(ratioDesc, prometheus.GaugeValue, values[i], name); err == nil {
			ch <- m
		}
	}
}
