package gate

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"os"
	"sync"
	"time"
)

// Limits of the upstream client.
const (
	// maxDirectBody is the largest request body (with a Content-Length)
	// that h1Client writes itself; longer or chunked bodies go through
	// net/http's Transport, which writes them beside reading the answer.
	maxDirectBody = 64 << 10
	// maxHeaderBytes bounds an upstream's response headers.
	maxHeaderBytes = 1 << 20
	// max1xx is how many informational answers (103 Early Hints) a
	// request may get before its final one, as in net/http.
	max1xx = 5
)

// h1Client is the gate's upstream client for plain HTTP/1.1 over keep-
// alive connections: it writes the request and reads the response on the
// calling goroutine, with no hand-off to a writer and a reader goroutine
// per connection as net/http's Transport does. It takes requests without
// a body or with a small one of known length; upgrades (WebSocket),
// Expect: 100-continue, streamed or large uploads and requests with
// trailers go to fallback.
//
// A connection goes back to the pool once its response body was read to
// the end and neither side asked to close it; one whose body is closed
// early is closed. A request that can be replayed (no body, and GET,
// HEAD, OPTIONS, TRACE or an Idempotency-Key) and whose kept-alive
// connection broke before any byte of the answer arrived is sent once
// more on a new connection. Before every request a kept-alive
// connection is checked for having been closed by the upstream or
// having received bytes after its last answer (conn).
type h1Client struct {
	addr        string // host:port
	dial        func(ctx context.Context, network, addr string) (net.Conn, error)
	timeout     time.Duration // to the response headers
	readTimeout time.Duration // each read of a body after them; 0: none
	cutHooks
	fallback http.RoundTripper
	pool     connPool
}

var _ http.RoundTripper = (*h1Client)(nil)

func newH1Client(cfg Config, fallback http.RoundTripper) *h1Client {
	d := &net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second}
	return &h1Client{addr: hostPort(cfg.Upstream), dial: d.DialContext, timeout: cfg.Timeout,
		readTimeout: max(cfg.ReadTimeout, 0), fallback: fallback, pool: connPool{max: cfg.MaxIdleConnsPerHost, idleTimeout: idleConnTimeout}}
}

// hostPort is u's host with the port made explicit.
func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	return net.JoinHostPort(u.Hostname(), "80")
}

// direct reports whether c writes req itself.
func (c *h1Client) direct(req *http.Request) bool {
	if req.URL.Scheme != "http" || req.URL.Host != c.addr && hostPort(req.URL) != c.addr {
		return false
	}
	if req.Body != nil && req.Body != http.NoBody && (req.ContentLength <= 0 || req.ContentLength > maxDirectBody) {
		return false
	}
	h := req.Header
	return len(req.TransferEncoding) == 0 && len(req.Trailer) == 0 && h["Upgrade"] == nil && h["Expect"] == nil
}

// RoundTrip sends req upstream and returns the response headers; the body
// streams from the connection as it is read.
func (c *h1Client) RoundTrip(req *http.Request) (*http.Response, error) {
	if !c.direct(req) {
		return c.fallback.RoundTrip(req)
	}
	replay := replayable(req)
	for fresh := false; ; fresh = true {
		pc, err := c.conn(req.Context(), fresh)
		if err != nil {
			return nil, err
		}
		resp, err := c.exchange(req, pc)
		if err == nil {
			return resp, nil
		}
		if fresh || !pc.reused || !replay || !errors.Is(err, errNoAnswer) {
			return nil, err
		}
		// A kept-alive connection the upstream had closed: those idle
		// longer are likely closed too.
		c.pool.dropIdleSince(pc.idleAt)
	}
}

// replayable reports whether req may be sent again after a connection
// broke before any answer, as net/http decides.
func replayable(req *http.Request) bool {
	if req.Body != nil && req.Body != http.NoBody {
		return false
	}
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return req.Header["Idempotency-Key"] != nil || req.Header["X-Idempotency-Key"] != nil
}

// conn is a kept-alive connection from the pool (unless fresh) or a new
// one. A kept-alive connection is first checked for having been closed
// by the upstream or having received bytes nobody asked for (a body sent
// after a 204, 304 or HEAD answer, a second answer): those would be read
// as the answer to the next request, another client's, so the connection
// is closed instead. One non-blocking peek (open) per reuse.
func (c *h1Client) conn(ctx context.Context, fresh bool) (*h1Conn, error) {
	for !fresh {
		pc := c.pool.get()
		if pc == nil {
			break
		}
		if pc.open() {
			return pc, nil
		}
		pc.Close()
	}
	nc, err := c.dial(ctx, "tcp", c.addr)
	if err != nil {
		// Not wrapped: a dial timeout is "could not be reached" (502),
		// not "did not answer in time" (504).
		return nil, fmt.Errorf("gate: dial upstream %s: %v", c.addr, err)
	}
	return newH1Conn(nc), nil
}

// errNoAnswer marks a connection that broke before any byte of the
// response arrived.
var errNoAnswer = errors.New("gate: upstream connection closed before an answer")

// noAnswer wraps an error met before the first byte of the response:
// one of the connection (not a timeout) is errNoAnswer.
func noAnswer(op string, err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("gate: upstream %s: %w", op, err)
	}
	return fmt.Errorf("%w: %s: %w", errNoAnswer, op, err)
}

// aLongTimeAgo is a deadline that has passed: it wakes a blocked read.
var aLongTimeAgo = time.Unix(1, 0)

// exchange writes req on pc and reads the response headers. The
// response's body owns pc from then on; on error pc is closed.
func (c *h1Client) exchange(req *http.Request, pc *h1Conn) (*http.Response, error) {
	ctx := req.Context()
	stop := context.AfterFunc(ctx, func() { pc.SetDeadline(aLongTimeAgo) })
	fail := func(err error) (*http.Response, error) {
		stop()
		pc.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	err := writeRequest(pc.bw, req)
	if err == nil {
		err = pc.bw.Flush()
	}
	if be := (bodyReadError{}); errors.As(err, &be) {
		// The client's body failed, not the upstream: there is no answer
		// to wait for, as net/http's Transport decides.
		return fail(err)
	}
	if err != nil {
		if resp, rerr := c.earlyAnswer(req, pc); rerr == nil {
			// The answer is read whole into memory: the connection is
			// broken, so nothing may stream from it later.
			stop()
			return resp, nil
		}
		return fail(noAnswer("write", err))
	}
	// The timeout counts from the end of the request, as net/http's
	// ResponseHeaderTimeout does. Each deadline set may undo the passed
	// one of a cancellation just before: the context is checked after.
	pc.SetReadDeadline(time.Now().Add(c.timeout))
	if ctx.Err() != nil {
		return fail(ctx.Err())
	}
	resp, err := c.readResponse(req, pc)
	if err != nil {
		return fail(err)
	}
	pc.SetReadDeadline(time.Time{})
	if ctx.Err() != nil {
		return fail(ctx.Err())
	}
	body := &h1Body{c: c, pc: pc, req: req, stop: stop, keep: !resp.Close && !req.Close, left: resp.ContentLength}
	if resp.Body == http.NoBody {
		// HEAD, 204, 304, Content-Length: 0: the answer is complete.
		body.done(true)
		return resp, nil
	}
	body.body, resp.Body = resp.Body, body
	return resp, nil
}

// earlyAnswer is the response an upstream sent before it stopped reading
// req's body (a 413 from the headers, then a close): what net/http's
// Transport, reading while it writes, would pass on. The body is read
// whole within a short deadline, up to maxEarlyBody, and pc is closed.
func (c *h1Client) earlyAnswer(req *http.Request, pc *h1Conn) (*http.Response, error) {
	defer pc.Close()
	if req.ContentLength <= 0 {
		return nil, errNoAnswer
	}
	pc.SetReadDeadline(time.Now().Add(min(c.timeout, earlyAnswerWait)))
	resp, err := c.readResponse(req, pc)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxEarlyBody+1))
	resp.Body.Close()
	if err != nil || len(b) > maxEarlyBody {
		return nil, errNoAnswer
	}
	resp.Body, resp.Close, resp.ContentLength = io.NopCloser(bytes.NewReader(b)), true, int64(len(b))
	resp.Header.Del("Transfer-Encoding")
	resp.TransferEncoding = nil
	return resp, nil
}

// earlyAnswerWait and maxEarlyBody bound earlyAnswer.
const (
	earlyAnswerWait = time.Second
	maxEarlyBody    = 64 << 10
)

// readResponse reads the final response to req from pc, passing 1xx
// answers to the request's httptrace.ClientTrace (ReverseProxy's forwards
// them to the client).
func (c *h1Client) readResponse(req *http.Request, pc *h1Conn) (*http.Response, error) {
	pc.lr.N = maxHeaderBytes
	defer func() { pc.lr.N = 1<<63 - 1 }()
	if _, err := pc.br.Peek(1); err != nil {
		return nil, noAnswer("read", err)
	}
	for n := 0; ; n++ {
		resp, err := http.ReadResponse(pc.br, req)
		if err != nil {
			if pc.lr.N == 0 {
				err = fmt.Errorf("response headers over %d bytes", maxHeaderBytes)
			}
			return nil, fmt.Errorf("gate: read upstream response: %w", err)
		}
		code := resp.StatusCode
		if code == http.StatusSwitchingProtocols {
			return nil, errors.New("gate: upstream switched protocols unasked")
		}
		if code >= 200 {
			return resp, nil
		}
		if n == max1xx {
			return nil, fmt.Errorf("gate: upstream sent more than %d informational answers", max1xx)
		}
		if tr := httptrace.ContextClientTrace(req.Context()); tr != nil && tr.Got1xxResponse != nil {
			if err := tr.Got1xxResponse(code, textproto.MIMEHeader(resp.Header)); err != nil {
				return nil, err
			}
		}
		pc.lr.N = maxHeaderBytes
	}
}

// h1Body is a response body on a pooled connection: read to its end on a
// connection both sides keep alive, it puts the connection back. Each
// read that must wait for the upstream has c.readTimeout to bring
// something.
type h1Body struct {
	c        *h1Client
	pc       *h1Conn // nil once given back or closed
	req      *http.Request
	body     io.ReadCloser
	stop     func() bool // the request context's AfterFunc
	left     int64       // bytes of a body of known length not yet read; -1: unknown
	keep     bool
	closed   bool
	deadline bool // a read deadline was set on pc
}

func (b *h1Body) Read(p []byte) (int, error) {
	if b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	if b.pc != nil && b.c.readTimeout > 0 && (b.left < 0 || b.left > int64(b.pc.br.Buffered())) {
		// This read may wait for the socket. A deadline set may undo the
		// passed one of a cancellation just before: the context is
		// checked after.
		b.pc.SetReadDeadline(time.Now().Add(b.c.readTimeout))
		b.deadline = true
		if err := b.req.Context().Err(); err != nil {
			b.done(false)
			return 0, err
		}
	}
	n, err := b.body.Read(p)
	if b.left >= 0 {
		b.left -= int64(n)
	}
	if err != nil && b.pc != nil {
		switch {
		case err == io.EOF:
		case b.deadline && errors.Is(err, os.ErrDeadlineExceeded) && b.req.Context().Err() == nil:
			err = idleError(b.c.readTimeout)
			if b.c.onIdle != nil {
				b.c.onIdle(b.req)
			}
		default:
			b.c.broken(b.req, err)
		}
		b.done(err == io.EOF)
	}
	return n, err
}

// Close ends the body; one not read to its end closes the connection.
func (b *h1Body) Close() error {
	b.closed = true
	if b.pc != nil {
		b.done(false)
	}
	return nil
}

// done releases the connection: back to the pool when the body ended,
// nothing was left unread and the request's context was not cancelled
// meanwhile (its AfterFunc would have broken the deadline); else closed.
func (b *h1Body) done(eof bool) {
	pc := b.pc
	b.pc = nil
	if b.stop() && eof && b.keep && pc.br.Buffered() == 0 {
		if b.deadline {
			pc.SetReadDeadline(time.Time{})
		}
		b.c.pool.put(pc)
		return
	}
	pc.Close()
}

// CloseIdleConnections closes the kept-alive connections, and those that
// come back later; net/http's ones too.
func (c *h1Client) CloseIdleConnections() {
	c.pool.close()
	if f, ok := c.fallback.(interface{ CloseIdleConnections() }); ok {
		f.CloseIdleConnections()
	}
}

// h1Conn is an upstream connection with its buffers.
type h1Conn struct {
	net.Conn
	lr     io.LimitedReader // bounds the response headers
	br     *bufio.Reader
	bw     *bufio.Writer
	reused bool      // it has answered a request before
	idleAt time.Time // when it went back to the pool
	peek   rawPeek   // open's (alive_unix.go)
}

func newH1Conn(nc net.Conn) *h1Conn {
	pc := &h1Conn{Conn: nc}
	pc.lr = io.LimitedReader{R: nc, N: 1<<63 - 1}
	pc.br = bufio.NewReaderSize(&pc.lr, 4<<10)
	pc.bw = bufio.NewWriterSize(nc, 4<<10)
	return pc
}

// headWriter hides the *bufio.Writer from Request.Write, which would
// otherwise flush the headers on their own before a body: headers and a
// small body leave in one write.
type headWriter struct{ *bufio.Writer }

// connPool holds the kept-alive connections to the upstream, oldest
// first; the newest is taken first, so that connections the upstream may
// have timed out stay at the bottom, where the sweep closes them after
// idleTimeout.
type connPool struct {
	max         int
	idleTimeout time.Duration

	mu     sync.Mutex
	idle   []*h1Conn
	sweep  *time.Timer // armed while idle is not empty
	closed bool
}

// idleConnTimeout is how long a connection may wait in the pool.
const idleConnTimeout = 90 * time.Second

func (p *connPool) get() *h1Conn {
	p.mu.Lock()
	n := len(p.idle)
	if n == 0 {
		p.mu.Unlock()
		return nil
	}
	pc := p.idle[n-1]
	p.idle[n-1] = nil
	p.idle = p.idle[:n-1]
	p.mu.Unlock()
	return pc
}

func (p *connPool) put(pc *h1Conn) {
	pc.reused = true
	pc.idleAt = time.Now()
	p.mu.Lock()
	if p.closed || len(p.idle) >= p.max {
		p.mu.Unlock()
		pc.Close()
		return
	}
	p.idle = append(p.idle, pc)
	if p.sweep == nil {
		p.sweep = time.AfterFunc(p.idleTimeout, p.sweepIdle)
	}
	p.mu.Unlock()
}

// sweepIdle closes the connections idle for idleTimeout and arms itself
// for the next oldest.
func (p *connPool) sweepIdle() {
	now := time.Now()
	p.mu.Lock()
	n := 0
	for n < len(p.idle) && now.Sub(p.idle[n].idleAt) >= p.idleTimeout {
		n++
	}
	p.sweep = nil
	if n < len(p.idle) && !p.closed {
		p.sweep = time.AfterFunc(p.idleTimeout-now.Sub(p.idle[n].idleAt), p.sweepIdle)
	}
	p.mu.Unlock()
	p.dropIdleSince(now.Add(-p.idleTimeout))
}

// dropIdleSince closes the connections that went idle at t or before.
func (p *connPool) dropIdleSince(t time.Time) {
	p.mu.Lock()
	n := 0
	for n < len(p.idle) && !p.idle[n].idleAt.After(t) {
		n++
	}
	old := make([]*h1Conn, n)
	copy(old, p.idle)
	p.idle = p.idle[:copy(p.idle, p.idle[n:])]
	clear(p.idle[len(p.idle):cap(p.idle)])
	p.mu.Unlock()
	for _, pc := range old {
		pc.Close()
	}
}

// close closes the idle connections and those put back later.
func (p *connPool) close() {
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = nil
	if p.sweep != nil {
		p.sweep.Stop()
		p.sweep = nil
	}
	p.mu.Unlock()
	for _, pc := range idle {
		pc.Close()
	}
}
