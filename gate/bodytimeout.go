package gate

import (
	"errors"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"time"
)

// Request bodies are bounded per read, as nginx's client_body_timeout
// bounds them: each read that must wait for the client has
// Config.BodyTimeout to bring something. The own server's bodies (up to
// 64 KiB, known length) set the connection's deadline themselves
// (body.Read); the bodies net/http's server reads (chunked and large
// uploads, h2c, every body with Config.StdServer) are wrapped in a
// boundedBody, which moves the deadline through http.ResponseController.
// Either way a body that timed out says so, and upstreamError answers
// 408 instead of blaming the upstream.

// bodyState is what the gate learns of a request body as it is read: a
// read that waited Config.BodyTimeout for nothing (408), or one that
// failed otherwise — malformed chunked framing, the client closing its
// side before the body's end — (400): either is the client's doing, not
// the upstream's.
type bodyState struct {
	timedOut atomic.Bool
	broken   atomic.Bool
	stalled  atomic.Bool // the upstream stopped taking the body (504, not the client's doing)
}

// note records what the body's read error err says.
func (s *bodyState) note(err error) {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		s.timedOut.Store(true)
	} else {
		s.broken.Store(true)
	}
}

// boundedBody is a request body read by net/http's server, each read of
// which must end within timeout (none when ≤ 0).
type boundedBody struct {
	io.ReadCloser
	rc       *http.ResponseController
	timeout  time.Duration
	eof      bool        // net/http cleared the deadline when the body ended
	finished atomic.Bool // the handler returned: the connection is no longer the request's
	bodyState
	// send is armed while the upstream transport sends what the last
	// read gave it, until it comes back for more (or the answer's head
	// arrives): an upstream that stops reading a large upload stalls that
	// send, and net/http's transport starts its response-header timeout
	// only once the body is sent, so without it the request waited for
	// good (nginx: proxy_send_timeout).
	send        *time.Timer
	sendTimeout time.Duration
	headed      atomic.Bool // the answer's head came: no more watch (its body must not be cut)
}

// watchSend arms the upstream's send watch: an upstream that takes none
// of what was read for d is given up on (cancel; stalled: 504).
func (b *boundedBody) watchSend(d time.Duration, cancel func()) {
	b.sendTimeout = d
	b.send = time.AfterFunc(d, func() {
		b.stalled.Store(true)
		cancel()
	})
	b.send.Stop()
}

// sent says the upstream took everything read so far: the watch stops
// until the next read gives it more.
func (b *boundedBody) sent() {
	if b.send != nil {
		b.send.Stop()
	}
}

// answered says the answer's head came: the watch ends for good (an
// upstream may answer before it reads the whole body, and the transport
// go on sending it; cancelling then would cut the answer).
func (b *boundedBody) answered() {
	b.headed.Store(true)
	b.sent()
}

// boundBody wraps r's body when net/http's server reads it; nil when the
// own server's body watches itself, or there is no body. gw learns where
// to look for what became of the body.
func (g *Gate) boundBody(gw *gateWriter, r *http.Request) *boundedBody {
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	if b, own := r.Body.(*body); own {
		gw.body = &b.bodyState
		return nil
	}
	b := &boundedBody{ReadCloser: r.Body, rc: http.NewResponseController(gw.ResponseWriter), timeout: g.cfg.BodyTimeout}
	r.Body = b
	gw.body = &b.bodyState
	return b
}

func (b *boundedBody) Read(p []byte) (int, error) {
	b.sent() // what the last read gave was sent
	n, err := b.read(p)
	if n > 0 && b.send != nil && !b.finished.Load() && !b.headed.Load() {
		b.send.Reset(b.sendTimeout)
		if b.headed.Load() { // answered meanwhile
			b.send.Stop()
		}
	}
	return n, err
}

func (b *boundedBody) read(p []byte) (int, error) {
	// After the handler returned, net/http may be reading the
	// connection's next request under deadlines of its own: leave them.
	if b.timeout > 0 && !b.eof && !b.finished.Load() {
		_ = b.rc.SetReadDeadline(time.Now().Add(b.timeout))
	}
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == io.EOF:
		// net/http's server cleared the read deadline as the body ended
		// (to watch the connection for the client going away).
		b.eof = true
	case err != nil && !b.finished.Load():
		b.note(err)
	}
	return n, err
}
