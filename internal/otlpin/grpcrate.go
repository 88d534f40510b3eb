package otlpin

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/credentials"
)

// GRPCListener wraps the listener a gRPC server made with
// GRPCServerOptions serves on, so the receiver counts the bytes each
// connection delivers. An admitted stream's memory then follows what its
// connection sent (connMeter), not the message limit: a stream that sends
// its headers and nothing else holds grpcStep, not twice the limit. And
// its message must arrive at WithMinRate after its grace, as an HTTP body
// must, or the stream is cut and its memory given back. Without it each
// admitted stream reserves twice the message limit before one byte of its
// message, and only WithGRPCReadTimeout bounds how long one that sends
// nothing holds it (a few such streams would hold the whole budget, and
// every exporter would be answered busy, for that long).
func (r *Receiver) GRPCListener(ln net.Listener) net.Listener {
	return &meteredListener{Listener: ln, r: r}
}

// meteredListener registers a connMeter for each connection it accepts,
// under the connection's remote address (the peer address gRPC gives the
// tap).
type meteredListener struct {
	net.Listener
	r *Receiver
}

func (l *meteredListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return c, err
	}
	m := newConnMeter(l.r, c.RemoteAddr().String())
	l.r.meters.Store(m.key, m)
	return &meteredConn{Conn: c, m: m, meters: &l.r.meters}, nil
}

type meteredConn struct {
	net.Conn
	m      *connMeter
	meters *sync.Map
	once   sync.Once
	scan   h2Scan
	// sealed: the bytes are TLS records, counted above the handshake
	// instead (GRPCCredentials).
	sealed atomic.Bool
}

// Read counts the message bytes the connection delivered (DATA payload:
// h2Scan) and grows its pool for them before gRPC has them.
func (c *meteredConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if !c.sealed.Load() {
		c.m.delivered(c.scan.feed(p[:n]))
		if c.scan.flooded() {
			return 0, c.m.flood()
		}
	}
	return n, err
}

func (c *meteredConn) Close() error {
	c.once.Do(func() { c.meters.CompareAndDelete(c.m.key, c.m) })
	return c.Conn.Close()
}

// GRPCCredentials wraps the TLS credentials of a gRPC server served on
// GRPCListener, so that its connections' bytes are counted as the
// handshake gives them, in the clear: only DATA payload is a message's
// progress (h2Scan), as on a connection without TLS. Below the handshake
// every byte of a TLS connection counts, its other frames too.
func GRPCCredentials(c credentials.TransportCredentials) credentials.TransportCredentials {
	return liftCreds{c, func(raw net.Conn) func(net.Conn) net.Conn {
		mc, ok := raw.(*meteredConn)
		if !ok {
			return nil
		}
		mc.sealed.Store(true)
		return func(conn net.Conn) net.Conn { return &clearConn{Conn: conn, m: mc.m} }
	}}
}

// liftCreds wraps TLS credentials so that what follows a connection's
// bytes below the handshake follows them above it instead: lift seals the
// raw connection (it stops following) and returns how to wrap the
// handshaken one, or nil when raw is not one it follows.
type liftCreds struct {
	credentials.TransportCredentials
	lift func(raw net.Conn) func(net.Conn) net.Conn
}

func (c liftCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	wrap := c.lift(raw)
	conn, info, err := c.TransportCredentials.ServerHandshake(raw)
	if err != nil || wrap == nil {
		return conn, info, err
	}
	return wrap(conn), info, nil
}

func (c liftCreds) Clone() credentials.TransportCredentials {
	return liftCreds{c.TransportCredentials.Clone(), c.lift}
}

// clearConn counts what a TLS connection delivered, as meteredConn does
// without TLS.
type clearConn struct {
	net.Conn
	m    *connMeter
	scan h2Scan
}

func (c *clearConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.m.delivered(c.scan.feed(p[:n]))
	if c.scan.flooded() {
		return 0, c.m.flood()
	}
	return n, err
}

// rateWatch cuts an admitted stream whose message does not arrive at
// minRate bytes a second after a grace, as rateReader cuts an HTTP body:
// by start + grace + n/minRate its connection must have delivered n bytes
// for it. gRPC hands nothing of a unary message over before the whole of
// it is read, so the watch counts the bytes of the stream's connection,
// shared among the connection's streams that wait for their message (one
// stream trickling does not keep its idle siblings alive).
type rateWatch struct {
	mu      sync.Mutex
	m       *connMeter
	start   time.Time
	grace   time.Duration
	minRate int64
	last    int64   // m.read when last looked
	got     float64 // this stream's share of what was delivered since start
	timer   *time.Timer
	done    bool
	cut     func()
}

// watchRate watches a stream of the connection m meters from now, at c's
// minimum rate; cut is called once, from the watch's timer, when the
// stream falls behind. The function returned ends the watch (when the
// message is in, or the stream ended); it may be called more than once.
func watchRate(m *connMeter, c *config, cut func()) (stop func()) {
	m.waiting.Add(1)
	w := &rateWatch{m: m, start: time.Now(), grace: c.rateGrace, minRate: c.minRate, last: m.read.Load(), cut: cut}
	w.mu.Lock()
	w.timer = time.AfterFunc(w.untilDue(), w.check)
	w.mu.Unlock()
	return w.stop
}

// untilDue is how long from now until the next chunk of the message is
// late (w.mu held).
func (w *rateWatch) untilDue() time.Duration {
	due := w.grace + time.Duration((w.got+rateChunk)/float64(w.minRate)*float64(time.Second))
	return time.Until(w.start.Add(due))
}

func (w *rateWatch) check() {
	w.mu.Lock()
	if w.done {
		w.mu.Unlock()
		return
	}
	n := w.m.read.Load()
	share := float64(n-w.last) / float64(max(1, w.m.waiting.Load()))
	w.last = n
	if share >= rateChunk {
		w.got += share
		w.timer.Reset(w.untilDue())
		w.mu.Unlock()
		return
	}
	w.done = true
	w.m.waiting.Add(-1)
	w.mu.Unlock()
	w.cut()
}

func (w *rateWatch) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return
	}
	w.done = true
	w.timer.Stop()
	w.m.waiting.Add(-1)
}
