package collector

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

var shedDesc = prometheus.NewDesc("qtop_collector_service_shed_level",
	"Shedding per service, from the processes' reports over the last seconds: 0 none, 1 T3, 2 T2–T3, 3 T1–T3 "+
		"(the fleet view of qtop_enforce_tier_shed, for alerts on the collector alone).",
	[]string{"service"}, nil)

// shedCollector exports each reporting service's shed level as the live
// view computes it (at most maxRatioSeries services).
type shedCollector struct{ s *Server }

var _ prometheus.Collector = shedCollector{}

func (c shedCollector) Describe(ch chan<- *prometheus.Desc) { ch <- shedDesc }

func (c shedCollector) Collect(ch chan<- prometheus.Metric) {
	sec := c.s.cfg.Now().Unix()
	c.s.mu.Lock()
	names := make([]string, 0, len(c.s.view.services))
	for name := range c.s.view.services {
		names = append(names, name)
	}
	slices.Sort(names)
	names = names[:min(len(names), maxRatioSeries)]
	levels := make([]int, len(names))
	for i, name := range names {
		sv := c.s.view.services[name]
		for j := range rateN {
			if sv.shedAt[j] >= sec-rateN {
				levels[i] = max(levels[i], sv.shed[j])
			}
		}
	}
	c.s.mu.Unlock()
	for i, name := range names {
		ch <- prometheus.MustNewConstMetric(shedDesc, prometheus.GaugeValue, float64(levels[i]), name)
	}
}
