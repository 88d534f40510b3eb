package collector

import (
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The gRPC ports (OTLP/gRPC, the rate-limit service) serve a bounded
// number of connections at once. A client beyond the bound is not left
// waiting in the kernel's queue, where a gRPC exporter would time out on
// every export with nothing said on either side for as long as the other
// connections stay (an SDK's stay while its process runs): its
// connection is closed at once, so it sees UNAVAILABLE and retries with
// its backoff; the collector counts it and logs a warning that names the
// flag to raise, at most once a minute.

// DefaultOTLPGRPCMaxConns is the default of OTLPConfig.OTLPGRPCMaxConns:
// one connection per exporting process, so a fleet of this many
// processes. An idle connection costs 27–39 KiB (bench/README.md: 4,000 exporters took 105 MB); the
// memory of the messages being read is bounded apart, per stream.
const DefaultOTLPGRPCMaxConns = 4096

// connWarnEvery is how often the warning of refused connections is
// logged at most.
const connWarnEvery = time.Minute

// connMetrics are the gRPC ports' connection counts, by listener.
type connMetrics struct {
	open    *prometheus.GaugeVec
	refused *prometheus.CounterVec
	floods  *prometheus.CounterVec // connections closed for a flood of stream resets (otlpin.ResetGuard)
	tls     *prometheus.CounterVec // TLS handshakes that failed (tlsrefused.go)
}

func newConnMetrics(reg prometheus.Registerer) (*connMetrics, error) {
	m := &connMetrics{
		open: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "qtop_collector_grpc_connections",
			Help: "Connections open on a gRPC port of the collector (listener: otlp, rls)."}, []string{"listener"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "qtop_collector_grpc_connections_refused_total",
			Help: "Connections a gRPC port closed at once because it served its most already (--otlp-grpc-max-conns for otlp)."}, []string{"listener"}),
		floods: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "qtop_collector_grpc_reset_floods_total",
			Help: "Connections of the rate-limit service's port (listener rls) closed because the client reset more than 100 streams and more than half of those it opened (an HTTP/2 rapid-reset flood); OTLP/gRPC counts its own in qtop_otlp_grpc_reset_floods_total."}, []string{"listener"}),
		tls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "qtop_collector_tls_handshakes_failed_total",
			Help: "TLS handshakes a port of the collector refused or that failed (listener: http, otlp, rls): a plaintext client, a client without the CA, or, with --tls-client-ca, one without a valid client certificate."}, []string{"listener"}),
	}
	for _, c := range []prometheus.Collector{m.open, m.refused, m.floods, m.tls} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// capListener serves at most cap(slots) connections at once and closes
// those beyond at once (see above).
type capListener struct {
	net.Listener
	slots   chan struct{}
	open    prometheus.Gauge
	refused prometheus.Counter
	log     *slog.Logger
	name    string // the listener, in the warning
	raise   string // what to do, in the warning
	warn    onceAMinute
}

// limitConns wraps ln: at most max connections at once.
func limitConns(ln net.Listener, max int, label, name, raise string, m *connMetrics, log *slog.Logger, now func() time.Time) *capListener {
	return &capListener{Listener: ln, slots: make(chan struct{}, max), open: m.open.WithLabelValues(label),
		refused: m.refused.WithLabelValues(label), log: log, name: name, raise: raise, warn: onceAMinute{now: now}}
}

// Accept returns the next connection within the bound; one beyond it is
// closed, counted and, at most once a minute, logged.
func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			l.open.Inc()
			return &cappedConn{Conn: c, l: l}, nil
		default:
		}
		l.refused.Inc()
		if n := l.warn.due(); n > 0 {
			l.log.Warn(l.name+": connection refused: it serves its most at once", "max", cap(l.slots), "refused", n,
				"from", c.RemoteAddr().String(), "fix", l.raise)
		}
		c.Close()
	}
}

// onceAMinute tells when a warning of something that keeps happening is
// due: at most once every connWarnEvery.
type onceAMinute struct {
	now     func() time.Time
	warned  atomic.Int64 // when the warning was last due (unix ns)
	pending atomic.Int64 // times it happened since then
}

// due counts one more time; when a warning is due it returns the times
// since the last one (and starts counting again), else 0.
func (w *onceAMinute) due() int64 {
	n := w.pending.Add(1)
	now := w.now().UnixNano()
	if last := w.warned.Load(); (last == 0 || now-last >= int64(connWarnEvery)) && w.warned.CompareAndSwap(last, now) {
		w.pending.Add(-n)
		return n
	}
	return 0
}

// cappedConn gives its slot back when closed (once: gRPC may close twice).
type cappedConn struct {
	net.Conn
	l    *capListener
	once sync.Once
}

func (c *cappedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		<-c.l.slots
		c.l.open.Dec()
	})
	return err
}
