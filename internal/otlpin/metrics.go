package otlpin

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the receiver's own counters. What it merges is counted by
// the collector's metrics like any report.
type metrics struct {
	spans        [numResults]prometheus.Counter
	rejects      [numRejects]prometheus.Counter
	skewed       [numSkews]prometheus.Counter
	bounded      prometheus.Counter
	resetFloods  prometheus.Counter // gRPC connections closed for a flood of stream resets
	folded       prometheus.Counter // spans of tenants beyond a window's WithMaxRows
	memory       prometheus.Gauge
	requests     *prometheus.CounterVec // transport, result
	reports      *prometheus.CounterVec // result
	invalid      prometheus.Counter
	unattributed prometheus.Counter
	waiting      prometheus.Gauge
	sources      prometheus.Gauge
}

// Request results, the label values of qtop_otlp_requests_total.
const (
	reqOK           = "ok"
	reqPartial      = "partial"
	reqMalformed    = "malformed"
	reqTooLarge     = "too_large"
	reqBusy         = "busy"
	reqRefused      = "refused"
	reqUnauthorized = "unauthorized"
	reqUnsupported  = "unsupported"
	reqSlow         = "slow"
)

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	spans := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "qtop_otlp_spans_total",
		Help: "OTLP spans received, by what became of them: request, job, db (recorded with a tenant of its own or its comment's), db_by_trace (a database span that takes its trace's tenant), pool_wait (a connection-pool span: pool wait, not DB time), request_gated (a server span of a service behind a gate, which counted the request), dropped (other kinds, non-PostgreSQL clients, PostgreSQL spans with neither a statement nor a pool name), rejected (refused alone: qtop_otlp_spans_rejected_total).",
	}, []string{"result"})
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "qtop_otlp_requests_total",
			Help: "OTLP export requests, by transport (http, grpc) and result (ok, partial, malformed, too_large, busy: no decode slot or memory in time, refused: refused for now by the collector, its disk below the reserve or its log replaying, unauthorized, unsupported, slow: a body sent below the minimum rate).",
		}, []string{"transport", "result"}),
		reports: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "qtop_otlp_reports_total",
			Help: "Windows of OTLP sources handed to the collector's merge, by result: merged, retried (refused for now, kept), dropped.",
		}, []string{"result"}),
		invalid: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "qtop_otlp_invalid_values_total",
			Help: "Tenant, route, tier or source values of OTLP spans that failed validation and were replaced: a tenant by its stand-in (tenant.Substitute, never merged with another tenant; an empty one by (untagged)), a route by its stand-in (tenant.SubstituteRoute, never the overflow route other), a tier by unset, a source field by its default.",
		}),
		unattributed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "qtop_otlp_db_spans_unattributed_total",
			Help: "Database spans recorded for tenant unknown: no tenant of their own, and their trace's root span did not arrive within the wait (or the wait list was full).",
		}),
		waiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "qtop_otlp_db_spans_waiting",
			Help: "Database spans waiting for the root span of their trace.",
		}),
		sources: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "qtop_otlp_sources",
			Help: "OTLP sources (service, instance, host) with a window of their own.",
		}),
	}
	for i := range m.spans {
		m.spans[i] = spans.WithLabelValues(resultNames[i])
	}
	rejects := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "qtop_otlp_spans_rejected_total",
		Help: "OTLP spans refused alone (partial success; the request's other spans kept), by reason: time (zero start, end before start), duration (above 24h), ru (qtop.ru not a number from 0 to 1e6), size (bytes or rows above 2^50).",
	}, []string{"reason"})
	for i := rejectNone + 1; i < numRejects; i++ {
		m.rejects[i] = rejects.WithLabelValues(rejectNames[i])
	}
	skewed := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "qtop_otlp_spans_skewed_total",
		Help: "OTLP spans whose end is further than the clock skew bound (WithClockSkew, 1h by default) from the collector's clock, by direction (past, future): a sender's clock is wrong, or a queue held its spans for long. They are recorded, like every span, in the window open when they arrive.",
	}, []string{"direction"})
	for i := range m.skewed {
		m.skewed[i] = skewed.WithLabelValues(skewNames[i])
	}
	m.bounded = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "qtop_otlp_rows_bounded_total",
		Help: "Rows of OTLP sources' windows whose sums of valid spans reached a report's bounds and were held there, so the window is merged rather than refused.",
	})
	m.folded = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "qtop_otlp_spans_folded_total",
		Help: "OTLP spans counted under tenant other because their source's window (one service, one second) already held its maximum of tenants (WithMaxRows; collector serve --otlp-max-rows): their load is kept, not by tenant.",
	})
	m.resetFloods = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "qtop_otlp_grpc_reset_floods_total",
		Help: "OTLP/gRPC connections closed because the client reset more than 100 streams and more than half of those it opened (an HTTP/2 rapid-reset flood).",
	})
	m.memory = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "qtop_otlp_memory_reserved_bytes",
		Help: "Bytes of the OTLP doors' memory budget (WithMemory) reserved by requests being received or decoded.",
	})
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{spans, rejects, skewed, m.bounded, m.folded, m.resetFloods, m.memory, m.requests, m.reports, m.invalid, m.unattributed, m.waiting, m.sources} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("otlpin: metrics: %w", err)
		}
	}
	return m, nil
}

func (m *metrics) addRejects(why *[numRejects]int) {
	for i := rejectNone + 1; i < numRejects; i++ {
		if why[i] > 0 {
			m.rejects[i].Add(float64(why[i]))
		}
	}
}

func (m *metrics) addSkewed(skewed *[numSkews]uint64) {
	for i, n := range skewed {
		if n > 0 {
			m.skewed[i].Add(float64(n))
		}
	}
}

func (m *metrics) add(counts *[numResults]uint64, invalid, unattributed uint64) {
	for i, n := range counts {
		if n > 0 {
			m.spans[i].Add(float64(n))
		}
	}
	if invalid > 0 {
		m.invalid.Add(float64(invalid))
	}
	if unattributed > 0 {
		m.unattributed.Add(float64(unattributed))
	}
}

// resultOf names the outcome of a request for qtop_otlp_requests_total.
func resultOf(res Result, err error) string {
	switch {
	case err == nil && res.Rejected > 0:
		return reqPartial
	case err == nil:
		return reqOK
	case errors.Is(err, ErrTooLarge):
		return reqTooLarge
	case errors.Is(err, errNotAdmitted):
		return reqRefused
	case errors.Is(err, ErrBusy), errors.Is(err, ErrShutdown):
		return reqBusy
	}
	return reqMalformed
}
