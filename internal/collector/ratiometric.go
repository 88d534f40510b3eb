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
			"absent while the 10 s hold fewer than 20 requests.",
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
	p95   float64 // 0: fewer than minP95Requests in the window
}

// minP95Requests is how many requests a service's 10 s window needs for
// its p95 to be exported and learnt as its baseline: 2 a second. The
// ratio needs 250 (ratio.DefaultMinSamples), which left a service under
// 25 requests a second with no p95 series, so no latency alert, though a
// small service is where a noisy tenant's victims often are. A p95 of 20
// is a noisy figure, but its baseline is the median of the same figure
// and the alerts hold for minutes, so noise alone does not page.
const minP95Requests = 20

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
			out[i].ratio = r
		}
		if r := sv.w.rates(now.Unix()); r.req*rateN >= minP95Requests {
			out[i].p95 = r.p95
		}
	}
	return out
}
