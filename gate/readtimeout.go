package gate

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

// Answers are bounded per read, as nginx's proxy_read_timeout bounds
// them: after its headers, each read of an upstream's answer (a body, an
// event stream, the upstream side of an upgraded connection) must bring
// something within Config.ReadTimeout, else the answer is cut off and its
// connection closed. Time the gate spends not reading (a client slow to
// take what was read) does not count. The gate's own client moves its
// connection's read deadline before each read that must wait for the
// socket (h1Body.Read); answers from net/http's Transport are watched by
// a timer (watchedBody), which closes the body when a read has waited
// that long.

// errUpstreamIdle is the error of a read that waited Config.ReadTimeout.
var errUpstreamIdle = errors.New("gate: the upstream sent nothing more of its answer")

// idleError says how long the upstream was silent.
func idleError(d time.Duration) error {
	return fmt.Errorf("%w for %v", errUpstreamIdle, d)
}

// upstreamIdle counts and logs an answer cut off by the read timeout.
func (g *Gate) upstreamIdle(req *http.Request) {
	g.metrics.cutIdle.Inc()
	g.warns.warn(g.log, "idle", "gate: upstream sent nothing for "+g.cfg.ReadTimeout.String()+"; its answer was cut off",
		"method", req.Method, "path", req.URL.Path)
}

// upstreamBroke counts and logs an answer the upstream broke off after
// its headers: the client sees it cut short.
func (g *Gate) upstreamBroke(req *http.Request, err error) {
	g.metrics.cutBroken.Inc()
	g.warns.warn(g.log, "broken", "gate: upstream broke off its answer", "method", req.Method, "path", req.URL.Path, "err", err)
}

// cutHooks are told of answers cut off after their headers.
type cutHooks struct {
	onIdle   func(*http.Request)        // nil: nothing to tell
	onBroken func(*http.Request, error) // nil: nothing to tell
}

// broken tells onBroken of err, a read error of req's answer, unless the
// request was cancelled (the client left: the upstream is not to blame).
func (h cutHooks) broken(req *http.Request, err error) {
	if h.onBroken != nil && req.Context().Err() == nil {
		h.onBroken(req, err)
	}
}

// watchedTransport is net/http's Transport with the read timeout on the
// bodies of its answers.
type watchedTransport struct {
	*http.Transport
	// upgrades, if not nil, takes the requests to upgrade the connection
	// (WebSocket): HTTP/2 has no Upgrade, so beside an h2c Transport
	// they go over HTTP/1.1.
	upgrades *http.Transport
	timeout  time.Duration // ≤ 0: none; read errors are still told
	cutHooks
}

// CloseIdleConnections closes both transports' idle connections.
func (t *watchedTransport) CloseIdleConnections() {
	t.Transport.CloseIdleConnections()
	if t.upgrades != nil {
		t.upgrades.CloseIdleConnections()
	}
}

func (t *watchedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	rt := t.Transport
	if t.upgrades != nil && req.Header.Get("Upgrade") != "" {
		rt = t.upgrades
	}
	resp, err := rt.RoundTrip(req)
	if err != nil || resp.Body == nil || resp.Body == http.NoBody {
		return resp, err
	}
	b := &watchedBody{ReadCloser: resp.Body, timeout: t.timeout, cutHooks: t.cutHooks, req: req}
	if t.timeout > 0 {
		b.timer = time.AfterFunc(t.timeout, b.check)
	}
	if w, ok := resp.Body.(io.Writer); ok && resp.StatusCode == http.StatusSwitchingProtocols {
		// ReverseProxy takes an upgraded connection's body as its
		// connection to the upstream.
		resp.Body = watchedConn{b, w}
	} else {
		resp.Body = b
	}
	return resp, nil
}

// watchedBody is a response body whose reads must each bring something
// within timeout: a timer checks the read in progress, and closes the
// body (which breaks the read off) once it has waited that long.
type watchedBody struct {
	io.ReadCloser
	timeout time.Duration
	timer   *time.Timer // nil without a timeout
	cutHooks
	req     *http.Request
	waiting atomic.Int64 // when the read in progress began (Unix ns); 0: none
	idle    atomic.Bool  // cut off by the timeout
	closed  atomic.Bool
}

func (b *watchedBody) Read(p []byte) (int, error) {
	b.waiting.Store(time.Now().UnixNano())
	n, err := b.ReadCloser.Read(p)
	b.waiting.Store(0)
	if err != nil && err != io.EOF {
		if b.idle.Load() {
			err = idleError(b.timeout)
		} else if !b.closed.Load() {
			b.broken(b.req, err)
		}
	}
	return n, err
}

// check runs on the timer: it cuts the body off when the read in
// progress has waited timeout, else sets the timer for when it would.
func (b *watchedBody) check() {
	if b.closed.Load() {
		return
	}
	wait := b.timeout
	if since := b.waiting.Load(); since != 0 {
		waited := time.Duration(time.Now().UnixNano() - since)
		if waited >= b.timeout {
			b.idle.Store(true)
			if b.onIdle != nil {
				b.onIdle(b.req)
			}
			b.Close()
			return
		}
		wait = b.timeout - waited
	}
	// A Close just now may be followed by this: the next check sees it.
	b.timer.Reset(wait)
}

func (b *watchedBody) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	if b.timer != nil {
		b.timer.Stop()
	}
	return b.ReadCloser.Close()
}

// watchedConn is the watched body of an upgraded connection, which
// ReverseProxy also writes to.
type watchedConn struct {
	*watchedBody
	w io.Writer
}

func (c watchedConn) Write(p []byte) (int, error) { return c.w.Write(p) }
