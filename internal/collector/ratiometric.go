package collector

import (
	"math"
	"slices"
	"time"

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
	levels := c.s.view.serviceLevels(now)
	c.s.mu.Unlock()
	for _, l := range levels {
		base := c.s.feat.base.serviceBaseline(l.name)
		// Names are cleaned at ingest; should one still not be a valid
		// label value, the series is left out: a scrape never fails
		// because of data.
		for i, v := range [3]float64{l.ratio, l.p95, base} {
			if i > 0 && !(v > 0 && !math.IsInf(v, 0)) {
				continue // unknown: no series
			}
			if m, err := prometheus.NewConstMetric([3]*prometheus.Desc{ratioDesc, p95Desc, baselineDesc}[i], prometheus.GaugeValue, v, l.name); err == nil {
				ch <- m
			}
		}
	}
}

// serviceLevel is one service's latency ratio and p95 at an instant, as
// this collector's own processes report them.
type serviceLevel struct {
	name  string
	ratio float64 // 0: unknown (too few samples)
	p95   float64 // 0 while the ratio is unknown
}

// serviceLevels returns, sorted by name, the latency ratio and p95 over
// the last 10 s of at most maxRatioSeries services: what the metrics
// export and the services' baselines are learnt from. s.mu is held.
func (v *liveView) serviceLevels(now time.Time) []serviceLevel {
	names := make([]string, 0, len(v.services))
	for name := range v.services {
		names = append(names, name)
	}
	slices.Sort(names)
	names = names[:min(len(names), maxRatioSeries)]
	out := make([]serviceLevel, len(names))
	for i, name := range names {
		sv := v.services[name]
		out[i].name = name
		if r, ok := sv.sig.ValueAt(now); ok && !math.IsNaN(r) && !math.IsInf(r, 0) {
			out[i].ratio, out[i].p95 = r, sv.w.rates(now.Unix()).p95
		}
	}
	return out
}
