package collector

import (
	"container/list"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The HTTP port serves a bounded number of connections at once
// (IntakeConfig.MaxConns). Without a bound, connections that each sent one
// request (or none) and then stayed open took every file descriptor of
// the process: the port stopped accepting (reports, the live view,
// /healthz) and the collector's own files failed to open, for as long as
// the connections stayed (2 minutes of keep-alive each).
//
// When a connection comes at the bound, the one idle the longest — waiting
// for its first request or for its next one — is closed to make room, as
// nginx closes keep-alive connections when it runs out: a reporting
// process sends a report a second, so its connection is seldom the one
// idle the longest, and its client opens a new one if it was. With no
// connection idle (every one in a request), the new one is closed at
// once. Both are counted, and logged at most once a minute.

// DefaultMaxConnsCeiling bounds IntakeConfig.MaxConns' default: half the
// process's open-file limit, at most this many (an idle connection costs
// about 23 KB: 462 MB for 19,900 in one measurement), at least 64.
const DefaultMaxConnsCeiling = 10_000

// defaultMaxConns is IntakeConfig.MaxConns' default.
func defaultMaxConns() int {
	n := openFileLimit() / 2
	return max(64, min(n, DefaultMaxConnsCeiling))
}

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

// connLimit is a listener that keeps at most max connections open and
// knows which are idle (from the server's ConnState hook, state).
type connLimit struct {
	net.Listener
	max     int
	met     *httpConnMetrics
	evicted prometheus.Counter
	refused prometheus.Counter
	log     *slog.Logger
	now     func() time.Time
	warned  atomic.Int64 // when the warning was last logged (unix ns)
	pending atomic.Int64 // closings since then

	mu   sync.Mutex
	open int
	idle list.List // of *limitedConn, idle the longest first
}

// limitHTTPConns wraps ln (before TLS, so a handshake counts as idle).
func limitHTTPConns(ln net.Listener, max int, m *httpConnMetrics, log *slog.Logger, now func() time.Time) *connLimit {
	return &connLimit{Listener: ln, max: max, met: m, evicted: m.closed.WithLabelValues("idle"),
		refused: m.closed.WithLabelValues("refused"), log: log, now: now}
}

// limitedConn is a connection of a connLimit; idle is its place in the
// list while it is idle, gone that its place was given back (l.mu).
type limitedConn struct {
	net.Conn
	l    *connLimit
	idle *list.Element
	gone bool
}

// NetConn returns the connection underneath (shrinkSendBuffer reaches
// the TCP connection through it).
func (c *limitedConn) NetConn() net.Conn { return c.Conn }

// Accept returns the next connection, closing the one idle the longest
// when the bound is reached, or the new one when none is idle.
func (l *connLimit) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		var victim *limitedConn
		if l.open >= l.max {
			e := l.idle.Front()
			if e == nil {
				l.mu.Unlock()
				l.refused.Inc()
				l.warn("closed a new connection: every other is in a request", c.RemoteAddr())
				c.Close()
				continue
			}
			victim = e.Value.(*limitedConn)
			victim.giveBack() // its place goes to c; its Close later gives none back
		}
		l.open++
		lc := &limitedConn{Conn: c, l: l}
		lc.idle = l.idle.PushBack(lc) // idle until its first request
		l.mu.Unlock()
		if victim != nil {
			l.evicted.Inc()
			l.warn("closed the connection idle the longest to make room", victim.RemoteAddr())
			victim.Conn.Close()
		} else {
			l.met.open.Inc()
		}
		return lc, nil
	}
}

// warn logs, at most once a minute, that the bound was reached.
func (l *connLimit) warn(what string, from net.Addr) {
	n := l.pending.Add(1)
	now := l.now().UnixNano()
	if last := l.warned.Load(); (last == 0 || now-last >= int64(connWarnEvery)) && l.warned.CompareAndSwap(last, now) {
		l.pending.Add(-n)
		l.log.Warn("http: connections at their bound: "+what, "max", l.max, "times", n, "from", from.String(),
			"fix", "raise --max-conns (and the open-file limit) if the fleet needs more; qtop_collector_http_connections_closed_total counts them")
	}
}

// state is the server's ConnState hook: a connection between requests
// (or before its first) is idle, one in a request or taken over is not.
func (l *connLimit) state(c net.Conn, st http.ConnState) {
	lc := limitedOf(c)
	if lc == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch st {
	case http.StateIdle:
		if lc.idle == nil && !lc.gone {
			lc.idle = l.idle.PushBack(lc)
		}
	case http.StateActive, http.StateHijacked, http.StateClosed:
		if lc.idle != nil {
			l.idle.Remove(lc.idle)
			lc.idle = nil
		}
	}
}

// giveBack gives c's place back, once (l.mu held).
func (c *limitedConn) giveBack() bool {
	if c.gone {
		return false
	}
	c.gone = true
	c.l.open--
	if c.idle != nil {
		c.l.idle.Remove(c.idle)
		c.idle = nil
	}
	return true
}

// limitedOf finds the limitedConn under c (a TLS connection's, or c).
func limitedOf(c net.Conn) *limitedConn {
	for c != nil {
		if lc, ok := c.(*limitedConn); ok {
			return lc
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		c = u.NetConn()
	}
	return nil
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.l.mu.Lock()
	gave := c.giveBack()
	c.l.mu.Unlock()
	if gave {
		c.l.met.open.Dec()
	}
	return err
}
