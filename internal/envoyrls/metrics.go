package envoyrls

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	ok, over, invalid, unauthenticated prometheus.Counter
	refused, busy, slow                prometheus.Counter
	shadow, badDescriptors             prometheus.Counter
	latency                            prometheus.Observer
}

// newMetrics makes the metrics, registered on reg when not nil.
func newMetrics(reg prometheus.Registerer, bs, sbs *buckets) (*metrics, error) {
	req := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "qtop_rls_requests_total",
		Help: "ShouldRateLimit calls answered, by code: ok, over_limit, invalid (InvalidArgument), unauthenticated, refused (refused for now by the admission check: the collector replaying its write-ahead log), busy (Unavailable: too many calls open), slow (its message did not come within the read timeout)."}, []string{"code"})
	lat := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "qtop_rls_answer_seconds",
		Help:    "Time to answer a ShouldRateLimit call, from its decoded message to its answer.",
		Buckets: prometheus.ExponentialBuckets(10e-6, 2, 14)})
	n := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "qtop_rls_buckets",
		Help: "Throttle buckets tracked (one per throttled tenant seen, and one per tenant under a shadow throttle)."},
		func() float64 { return float64(bs.n.Load() + sbs.n.Load()) })
	ev := prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "qtop_rls_buckets_evicted_total",
		Help: "Throttle buckets evicted to stay within the bound of buckets tracked."},
		func() float64 { return float64(bs.evicted.Load() + sbs.evicted.Load()) })
	sh := prometheus.NewCounter(prometheus.CounterOpts{Name: "qtop_rls_shadow_over_limit_total",
		Help: "Descriptors a shadow rule (a throttle or a fleet quota) would have answered OVER_LIMIT; the answer was not changed."})
	bad := prometheus.NewCounter(prometheus.CounterOpts{Name: "qtop_rls_descriptors_invalid_total",
		Help: "Descriptors answered OVER_LIMIT because they could not be read (a tier that is not one, an invalid tenant name, too many entries): the call's other descriptors are answered as usual."})
	m := &metrics{ok: req.WithLabelValues("ok"), over: req.WithLabelValues("over_limit"), badDescriptors: bad,
		invalid: req.WithLabelValues("invalid"), unauthenticated: req.WithLabelValues("unauthenticated"),
		refused: req.WithLabelValues("refused"), busy: req.WithLabelValues("busy"), slow: req.WithLabelValues("slow"), latency: lat, shadow: sh}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{req, lat, n, ev, sh, bad} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("envoyrls: metrics: %w", err)
		}
	}
	return m, nil
}
