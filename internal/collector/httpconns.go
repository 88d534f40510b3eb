package collector

import (
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/internal/connlimit"
)

// The HTTP port serves a bounded number of connections at once
// (IntakeConfig.MaxConns; internal/connlimit). Without a bound,
// connections that each sent one request (or none) and then stayed open
// took every file descriptor of the process: the port stopped accepting
// (reports, the live view, /healthz) and the collector's own files failed
// to open, for as long as the connections stayed (2 minutes of keep-alive
// each). At the bound the connection idle the longest is closed for the
// new one; both that and a new one closed (none idle) are counted, and
// logged at most once a minute.

// DefaultMaxConnsCeiling bounds IntakeConfig.MaxConns' default, half the
// process's open-file limit.
const DefaultMaxConnsCeiling = connlimit.DefaultCeiling

// httpConnMetrics are the HTTP port's connection counts.
type httpConnMetrics struct {
	open   prometheus.Gauge
	closed *prometheus.CounterVec
}

func newHTTPConnMetrics(reg prometheus.Registerer) (*httpConnMetrics, error) {
	m := &httpConnMetrics{
		open: prometheus.NewGauge(prometheus.GaugeOpts{Name: "qtop_collector_http_connections",
			Help: "Connections open on the collector's HTTP port."}),
		closed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "qtop_collector_http_connections_closed_total",
			Help: "Connections the HTTP port closed to stay within --max-conns, by reason: idle (the one idle the longest, to make room for a new one), refused (a new one, every other in a request)."},
			[]string{"reason"}),
	}
	for _, c := range []prometheus.Collector{m.open, m.closed} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// limitHTTPConns wraps ln (before TLS, so a handshake counts as idle):
// at most max connections, counted in m and logged at most once a minute.
func limitHTTPConns(ln net.Listener, max int, m *httpConnMetrics, log *slog.Logger, now func() time.Time) *connlimit.Listener {
	warn := &onceAMinute{now: now}
	return connlimit.New(ln, max, connlimit.Hooks{
		Opened: func(d int) { m.open.Add(float64(d)) },
		Closed: func(reason string, from net.Addr) {
			m.closed.WithLabelValues(reason).Inc()
			n := warn.due()
			if n == 0 {
				return
			}
			what := "closed the connection idle the longest to make room"
			if reason == "refused" {
				what = "closed a new connection: every other is in a request"
			}
			log.Warn("http: connections at their bound: "+what, "max", max, "times", n, "from", from.String(),
				"fix", "raise --max-conns (and the open-file limit) if the fleet needs more; qtop_collector_http_connections_closed_total counts them")
		},
	})
}
