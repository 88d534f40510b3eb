package gate

import (
	"github.com/prometheus/client_golang/prometheus"
)

// outcome is how a request through the gate ended; the label values of
// qtop_gate_requests_total.
type outcome uint8

const (
	outUpstream      outcome = iota // forwarded; the upstream answered (any status)
	outThrottled                    // 429 from qtop: bucket in debt or a policy throttle
	outShed                         // 503 from qtop: shed by tier or dropped by CoDel
	outNotModified                  // 304 from the freshness shedder
	outNoTenant                     // 400/401: no valid tenant
	outUpstreamError                // 502: the upstream could not be reached or broke off
	outTimeout                      // 504: the upstream did not answer in time
	outClientGone                   // the client left before the upstream answered
	outBodyTimeout                  // 408: the client stopped sending its request body
	outBadRequest                   // 400/405: a malformed or cut-off request body, both Content-Length and Transfer-Encoding, CONNECT
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"upstream", "throttled", "shed", "not_modified", "no_tenant",
	"upstream_error", "upstream_timeout", "client_gone", "body_timeout", "bad_request"}

// metrics are the gate's own series. Without a registerer they are
// still counted (cheaply), just not exported.
type metrics struct {
	requests [numOutcomes]prometheus.Counter
	upstream prometheus.Histogram
	inFlight prometheus.Gauge
	handoffs prometheus.Counter
	// cutIdle and cutBroken count upstream answers cut off after their
	// headers: by Config.ReadTimeout, or by the upstream (its connection
	// closed or reset, malformed framing).
	cutIdle, cutBroken prometheus.Counter
	// conns and connsClosed: client connections open, and those closed to
	// stay within Config.MaxConns (reason idle, refused).
	conns       prometheus.Gauge
	connsClosed *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "qtop_gate_requests_total",
		Help: "Requests through the gate by outcome: upstream (forwarded and answered), throttled (429), shed (503), not_modified (304), no_tenant, upstream_error (502), upstream_timeout (504), client_gone, body_timeout (408: the request body stopped arriving), bad_request (400/405: a request body malformed or cut short, Content-Length with Transfer-Encoding, CONNECT).",
	}, []string{"outcome"})
	m := &metrics{
		upstream: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "qtop_gate_upstream_seconds",
			Help:    "Time from sending a request upstream to its response headers (or the error).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "qtop_gate_in_flight_requests",
			Help: "Requests inside the gate now, admitted or waiting for admission.",
		}),
		handoffs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "qtop_gate_handed_off_connections_total",
			Help: "Client connections the gate's own HTTP/1.1 server handed to net/http's, at a request it does not answer itself (h2c, an upgrade, Expect, a chunked or large upload, HTTP/1.0, a head over 4 KiB or one it does not parse strictly).",
		}),
	}
	for i, n := range outcomeNames {
		m.requests[i] = vec.WithLabelValues(n)
	}
	cut := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "qtop_gate_upstream_answers_cut_total",
		Help: "Upstream answers (bodies, event streams, WebSockets) cut off after their headers, by reason: read_timeout (nothing more arrived for the read timeout), broken (the upstream closed or reset the connection, or broke the framing, mid-answer). The client sees the answer cut short.",
	}, []string{"reason"})
	m.cutIdle, m.cutBroken = cut.WithLabelValues("read_timeout"), cut.WithLabelValues("broken")
	m.conns = prometheus.NewGauge(prometheus.GaugeOpts{Name: "qtop_gate_connections",
		Help: "Client connections open."})
	m.connsClosed = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "qtop_gate_connections_closed_total",
		Help: "Client connections closed to stay within --max-conns, by reason: idle (the one idle the longest, to make room for a new one), refused (a new one, every other in a request)."},
		[]string{"reason"})
	if reg != nil {
		for _, c := range []prometheus.Collector{vec, m.upstream, m.inFlight, m.handoffs, cut, m.conns, m.connsClosed} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

func (m *metrics) count(o outcome) { m.requests[o].Inc() }
