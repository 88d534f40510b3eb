package gate

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/qtop-dev/qtop/internal/connlimit"
)

// The gate's own HTTP/1.1 server.
//
// net/http's server was the largest share of the gate's CPU left (about
// 38%): per request it parses the head into fresh maps, starts a
// background read that watches for the client going away, and moves the
// connection's deadlines several times. server answers the common
// request itself — HTTP/1.1 in origin form, without a body or with one of
// known length up to 64 KiB, a head that fits its 4 KiB buffer, no
// upgrade and no Expect — with one goroutine per connection that reads
// the head, runs the gate's handler and writes the response. Everything
// else is handed, with the bytes already read, to a net/http server that
// keeps the connection from then on: h2c, WebSocket and other upgrades,
// Expect: 100-continue, chunked or large uploads, HTTP/1.0, heads it does
// not parse strictly (net/http answers those 400 or takes them as it
// would). The head parser is held to net/http's by a fuzz test.
//
// The client going away is noticed when a write to it fails and, for a
// request still waiting after clientWatchDelay, by a read of the
// connection (what net/http does from the first moment); either cancels
// the request's context.

// Limits of the server.
const (
	// connBufSize is each connection's read and write buffer; a head
	// larger than it goes to net/http (whose limit is 1 MiB).
	connBufSize = 4 << 10
	// pendSize is how much of a response of unknown length is held
	// back to send it with a Content-Length; larger ones are chunked.
	pendSize = 2 << 10
)

// readHeaderTimeout bounds the wait for a request's head once its first
// byte came (a var for tests).
var readHeaderTimeout = DefaultReadHeaderTimeout

// clientWatchDelay is how long a request waits before a read of its
// connection watches for the client going away (a var for tests).
var clientWatchDelay = time.Second

// server serves one listener: the common requests itself, the rest
// through std.
type server struct {
	g             *Gate
	ln            net.Listener
	std           *http.Server
	stdLn         *handoffListener
	stdErr        chan error
	base          context.Context // of every request: it carries http.ServerContextKey
	idleTimeout   time.Duration
	limit         *connlimit.Listener // told when a connection waits for a request, or not
	headerTimeout time.Duration
	log           *slog.Logger

	shutting atomic.Bool
	mu       sync.Mutex
	conns    map[*conn]struct{}
}

func newServer(g *Gate, ln net.Listener, std *http.Server) *server {
	s := &server{g: g, ln: ln, std: std, stdLn: newHandoffListener(ln.Addr()), stdErr: make(chan error, 1),
		base:        context.WithValue(context.Background(), http.ServerContextKey, std),
		idleTimeout: std.IdleTimeout, headerTimeout: std.ReadHeaderTimeout,
		log: g.log, conns: make(map[*conn]struct{})}
	go func() { s.stdErr <- std.Serve(s.stdLn) }()
	return s
}

// serve accepts connections until ln is closed; http.ErrServerClosed
// after shutdown.
func (s *server) serve() error {
	var delay time.Duration
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if s.shutting.Load() {
				return http.ErrServerClosed
			}
			// Out of file descriptors and the like: wait and try again,
			// as net/http does.
			if te, ok := err.(interface{ Temporary() bool }); ok && te.Temporary() {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				s.log.Warn("gate: accept", "err", err, "retry_in", delay)
				time.Sleep(delay)
				continue
			}
			s.stdLn.Close()
			return err
		}
		delay = 0
		c := newConn(s, nc)
		s.mu.Lock()
		if s.shutting.Load() {
			s.mu.Unlock()
			nc.Close()
			return http.ErrServerClosed
		}
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		go c.serve()
	}
}

// shutdown stops accepting, closes idle connections as they become idle
// and waits for the others to finish their request, as
// http.Server.Shutdown does; the connections handed to net/http drain
// through its Shutdown.
func (s *server) shutdown(ctx context.Context) error {
	s.shutting.Store(true)
	s.ln.Close()
	stdDone := make(chan error, 1)
	go func() { stdDone <- s.std.Shutdown(ctx) }()
	wait := time.Millisecond
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		if s.closeIdle() {
			break
		}
		select {
		case <-ctx.Done():
			<-stdDone
			return ctx.Err()
		case <-t.C:
			wait = min(2*wait, 100*time.Millisecond)
			t.Reset(wait)
		}
	}
	err := <-stdDone
	<-s.stdErr
	return err
}

// closeIdle wakes the connections waiting for a request, which then
// close; true when no connection is left.
func (s *server) closeIdle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if c.idle.Load() {
			c.rwc.SetReadDeadline(aLongTimeAgo)
		}
	}
	return len(s.conns) == 0
}

var (
	readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, connBufSize) }}
	writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, connBufSize) }}
)

// conn is one client connection while server serves it.
type conn struct {
	s      *server
	rwc    net.Conn
	br     *bufio.Reader
	bw     *bufio.Writer
	remote string
	idle   atomic.Bool // waiting for the next request
	broken atomic.Bool // a write failed or the client left: close after this request

	sw        sendWriter
	mu        sync.Mutex
	cancel    context.CancelFunc // the request's, under mu
	body      body
	rw        response
	watch     *time.Timer
	armed     bool // watch is set for the request in flight
	watchDone chan struct{}
	aborting  atomic.Bool
}

func newConn(s *server, nc net.Conn) *conn {
	c := &conn{s: s, rwc: nc, remote: nc.RemoteAddr().String(), watchDone: make(chan struct{}, 1)}
	c.sw = sendWriter{Conn: nc, timeout: s.g.cfg.SendTimeout}
	c.body.rwc, c.body.timeout = nc, s.g.cfg.BodyTimeout
	c.br = readers.Get().(*bufio.Reader)
	c.br.Reset(nc)
	c.bw = writers.Get().(*bufio.Writer)
	c.bw.Reset(&c.sw)
	c.idle.Store(true)
	return c
}

// serve reads and answers requests until the connection closes or is
// handed to net/http.
func (c *conn) serve() {
	handedOff := false
	defer func() {
		p := recover()
		if p != nil && p != http.ErrAbortHandler {
			buf := make([]byte, 64<<10)
			buf = buf[:runtime.Stack(buf, false)]
			c.s.log.Error("gate: panic serving a request", "remote", c.remote, "panic", p, "stack", string(buf))
		}
		if p == http.ErrAbortHandler && !handedOff {
			// A response that broke off (its upstream's body did): what
			// was written of it goes out before the close, as net/http's
			// server sends it, so that the client sees the answer cut
			// short rather than no answer.
			c.bw.Flush()
		}
		if c.armed {
			c.stopWatch()
		}
		c.cancelReq()
		c.s.mu.Lock()
		delete(c.s.conns, c)
		c.s.mu.Unlock()
		if !handedOff {
			c.bw.Reset(nil)
			c.rwc.Close()
		}
		c.br.Reset(nil)
		readers.Put(c.br)
		writers.Put(c.bw)
	}()
	for {
		c.idle.Store(true)
		if c.s.limit != nil {
			c.s.limit.Idle(c.rwc)
		}
		if c.s.shutting.Load() {
			return
		}
		if c.s.idleTimeout > 0 {
			c.rwc.SetReadDeadline(time.Now().Add(c.s.idleTimeout))
		}
		if _, err := c.br.Peek(1); err != nil {
			return
		}
		// Until its head is in, a connection is as cheap to close to make
		// room as an idle one: a byte sent and nothing more does not
		// keep it (it would take a slot of MaxConns for the header
		// timeout).
		n, err := c.readHead()
		if err != nil {
			return
		}
		c.idle.Store(false)
		if c.s.limit != nil {
			c.s.limit.Busy(c.rwc)
		}
		var req *http.Request
		if n > 0 {
			req = c.parse(n)
		}
		if req == nil {
			if c.refused(n) {
				return
			}
			handedOff = true
			c.handoff()
			return
		}
		if !c.serveOne(req) {
			return
		}
	}
}

// readHead waits until the request's head is in the buffer and returns
// its length; 0 when it does not fit (net/http takes it).
func (c *conn) readHead() (int, error) {
	deadline := false
	for {
		buf, _ := c.br.Peek(c.br.Buffered())
		if i := headEnd(buf); i > 0 {
			return i, nil
		}
		if len(buf) >= connBufSize {
			return 0, nil
		}
		if !deadline && c.s.headerTimeout > 0 {
			// The first bytes came; the rest must come soon.
			c.rwc.SetReadDeadline(time.Now().Add(c.s.headerTimeout))
			deadline = true
		}
		if _, err := c.br.Peek(len(buf) + 1); err != nil {
			return 0, err
		}
	}
}

// headEnd is the length of the head at the start of b (through the empty
// line ending it, CRLF or a bare LF), 0 if b holds no end yet.
func headEnd(b []byte) int {
	for i := 0; ; {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			return 0
		}
		i += j + 1
		if i < len(b) && b[i] == '\n' {
			return i + 1
		}
		if i+1 < len(b) && b[i] == '\r' && b[i+1] == '\n' {
			return i + 2
		}
	}
}

// ambiguousLength reports a head with both a Content-Length and a
// Transfer-Encoding field. net/http's server takes the Transfer-Encoding
// and keeps the connection open, so the bytes the Content-Length did not
// count are read as the next request: one a hop in front of the gate
// that went by the Content-Length never saw (request smuggling). RFC 9112
// (6.3) lets a server refuse such a request and requires closing the
// connection after it; nginx answers 400.
func ambiguousLength(head []byte) bool {
	var cl, te bool
	for len(head) > 0 {
		i := bytes.IndexByte(head, '\n')
		if i < 0 {
			break
		}
		head = head[i+1:]
		cl = cl || hasFieldName(head, "content-length:")
		te = te || hasFieldName(head, "transfer-encoding:")
	}
	return cl && te
}

// hasFieldName reports whether line starts with name (lower case, with
// its colon), in any case.
func hasFieldName(line []byte, name string) bool {
	return len(line) >= len(name) && strings.EqualFold(string(line[:len(name)]), name)
}

// refused answers 400 to a head of n bytes (0: too long to say) that it
// will not hand to net/http either, and says whether it did.
func (c *conn) refused(n int) bool {
	b, _ := c.br.Peek(n)
	switch {
	case n > 0 && ambiguousLength(b):
		c.refuseHead("gate: a request with both Content-Length and Transfer-Encoding is refused\n")
	case n > 0 && !requestLine(b):
		// net/http, with h2c on, would wait for as many bytes as HTTP/2's
		// preface before answering: for the header timeout when fewer came.
		c.refuseHead("gate: malformed request line (want METHOD TARGET HTTP/1.1)\n")
	default:
		return false
	}
	return true
}

// refuseHead answers a head it will not serve 400 with msg and leaves the
// connection to be closed.
func (c *conn) refuseHead(msg string) {
	c.s.g.metrics.count(outBadRequest)
	c.bw.WriteString("HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: " +
		strconv.Itoa(len(msg)) + "\r\n\r\n" + msg)
	c.bw.Flush()
}

// requestLine reports whether head's first line has the shape of a
// request line: a method token, a target, an HTTP version (HTTP/2's
// preface, "PRI * HTTP/2.0", among them).
func requestLine(head []byte) bool {
	line, _, _ := bytes.Cut(head, []byte("\n")) // a bare line feed ends a line too (net/http)
	line = bytes.TrimSuffix(line, []byte("\r"))
	method, rest, ok1 := bytes.Cut(line, []byte(" "))
	target, proto, ok2 := bytes.Cut(rest, []byte(" "))
	if !ok1 || !ok2 || len(method) == 0 || len(target) == 0 || len(proto) != len("HTTP/1.1") ||
		!bytes.HasPrefix(proto, []byte("HTTP/")) || proto[5] < '0' || proto[5] > '9' || proto[6] != '.' || proto[7] < '0' || proto[7] > '9' {
		return false
	}
	for _, b := range method {
		if !httpguts.IsTokenRune(rune(b)) {
			return false
		}
	}
	return !bytes.ContainsFunc(target, func(r rune) bool { return r <= ' ' || r == 0x7f })
}

// handoff gives the connection, with the bytes read so far, to net/http.
func (c *conn) handoff() {
	pre, _ := c.br.Peek(c.br.Buffered())
	pc := &prefixConn{sendWriter: c.sw, pre: bytes.Clone(pre)}
	c.rwc.SetReadDeadline(time.Time{})
	c.s.g.metrics.handoffs.Inc()
	c.s.stdLn.push(pc)
}

// serveOne runs the handler on req and finishes its response; false
// when the connection is to close.
func (c *conn) serveOne(req *http.Request) (keep bool) {
	// With the server in its context, ReverseProxy aborts a response
	// whose body broke off (http.ErrAbortHandler, recovered in serve) as
	// under net/http's server, rather than logging that it suppressed
	// the panic.
	ctx, cancel := context.WithCancel(c.s.base)
	c.mu.Lock()
	c.cancel = cancel
	c.mu.Unlock()
	req = req.WithContext(ctx)
	c.armed = true
	if c.watch == nil {
		c.watch = time.AfterFunc(c.s.g.watchDelay, c.watchClient)
	} else {
		c.watch.Reset(c.s.g.watchDelay)
	}
	w := &c.rw
	*w = response{c: c, req: req, header: make(http.Header, 8), contentLength: -1}
	c.s.g.ServeHTTP(w, req)
	c.stopWatch()
	w.finish()
	keep = !w.closeAfter && !c.broken.Load() && !req.Close && !c.s.shutting.Load() && !c.s.g.noKeep.Load()
	if err := c.bw.Flush(); err != nil {
		keep = false
	}
	c.cancelReq()
	*w = response{}
	return keep && c.body.drain()
}

// watchClient runs clientWatchDelay into a request: once the request's
// body has been read, a read of the connection notices the client going
// away (EOF or a reset) and cancels the request.
func (c *conn) watchClient() {
	defer func() { c.watchDone <- struct{}{} }()
	if !c.body.done.Load() {
		return
	}
	c.rwc.SetReadDeadline(time.Time{})
	if c.aborting.Load() {
		return
	}
	if _, err := c.br.Peek(1); err != nil && !c.aborting.Load() {
		c.broken.Store(true)
		c.cancelReq()
	}
}

// stopWatch ends the client watch of the request that finished.
func (c *conn) stopWatch() {
	c.armed = false
	if c.watch.Stop() {
		return
	}
	c.aborting.Store(true)
	c.rwc.SetReadDeadline(aLongTimeAgo)
	<-c.watchDone
	c.aborting.Store(false)
}

// cancelReq cancels the request in flight (from the watch or a failed
// write) or the one that finished.
func (c *conn) cancelReq() {
	c.mu.Lock()
	if f := c.cancel; f != nil {
		f()
		c.cancel = nil
	}
	c.mu.Unlock()
}

// body is a request body of known length read from the connection's
// buffer. It is locked: net/http's Transport (Config.StdTransport) may
// still read it while the handler has returned.
type body struct {
	mu   sync.Mutex
	br   *bufio.Reader
	n    int64
	done atomic.Bool // read to its end: the watch may read the connection
	bodyState

	rwc     net.Conn
	timeout time.Duration // Config.BodyTimeout; ≤ 0: none
}

func (b *body) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.n {
		p = p[:b.n]
	}
	if b.timeout > 0 && b.br.Buffered() == 0 {
		// This read waits for the client. Whatever deadline follows the
		// body (the watch, the next request's) is set after it ended.
		b.rwc.SetReadDeadline(time.Now().Add(b.timeout))
	}
	n, err := b.br.Read(p)
	b.n -= int64(n)
	if b.n == 0 {
		b.done.Store(true)
		if err == nil {
			err = io.EOF
		}
	} else if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	if err != nil && err != io.EOF {
		b.note(err)
	}
	return n, err
}

// Close leaves what is unread for drain.
func (b *body) Close() error { return nil }

// drain reads what the handler left of the body, if it is already
// buffered; false when the connection must close instead.
func (b *body) drain() bool {
	if !b.mu.TryLock() {
		return false // still being read
	}
	defer b.mu.Unlock()
	if b.n <= 0 {
		return true
	}
	if int64(b.br.Buffered()) < b.n {
		return false
	}
	b.br.Discard(int(b.n))
	b.n = 0
	return true
}

// buffered reports whether what is left of b is in the buffer (drain
// can read it).
func (b *body) buffered() bool {
	if !b.mu.TryLock() {
		return false
	}
	defer b.mu.Unlock()
	return int64(b.br.Buffered()) >= b.n
}

// reset makes b the body of the next request, n bytes long.
func (b *body) reset(br *bufio.Reader, n int64) {
	b.mu.Lock()
	b.br, b.n = br, n
	b.mu.Unlock()
	b.done.Store(n <= 0)
	b.timedOut.Store(false)
	b.broken.Store(false)
}

// handoffListener is the listener of the net/http server: its
// connections are those server hands over.
type handoffListener struct {
	addr net.Addr
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newHandoffListener(addr net.Addr) *handoffListener {
	return &handoffListener{addr: addr, ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *handoffListener) push(c net.Conn) {
	select {
	case l.ch <- c:
	case <-l.done:
		c.Close()
	}
}

func (l *handoffListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *handoffListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *handoffListener) Addr() net.Addr { return l.addr }

// sendWriter is a client connection whose writes each must end within
// timeout (Config.SendTimeout), as nginx's send_timeout bounds them.
type sendWriter struct {
	net.Conn
	timeout time.Duration // ≤ 0: none
}

func (w *sendWriter) Write(p []byte) (int, error) {
	if w.timeout > 0 {
		w.Conn.SetWriteDeadline(time.Now().Add(w.timeout))
	}
	n, err := w.Conn.Write(p)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		// The client reads nothing: close with a reset, so that the
		// kernel drops what it still holds for it (megabytes, on a
		// window that stays shut) instead of trying to send it for
		// minutes, as nginx's reset_timedout_connection does.
		if tc := tcpConn(w.Conn); tc != nil {
			tc.SetLinger(0)
		}
	}
	return n, err
}

// tcpConn is the TCP connection under c (the connection bound's, or c),
// nil if there is none.
func tcpConn(c net.Conn) *net.TCPConn {
	for c != nil {
		if tc, ok := c.(*net.TCPConn); ok {
			return tc
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		c = u.NetConn()
	}
	return nil
}

// sendListener gives net/http's server (Config.StdServer) connections
// whose writes keep the send timeout.
type sendListener struct {
	net.Listener
	timeout time.Duration
}

func (l sendListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &prefixConn{sendWriter: sendWriter{Conn: c, timeout: l.timeout}}, nil
}

// prefixConn is a connection handed to net/http: its first bytes were
// already read, and its writes keep the send timeout.
type prefixConn struct {
	sendWriter
	pre []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.pre) > 0 {
		n := copy(p, c.pre)
		c.pre = c.pre[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// NetConn returns the connection underneath (connlimit finds its own
// through it).
func (c *prefixConn) NetConn() net.Conn { return c.Conn }

// CloseWrite half-closes, as net/http does before closing after an error.
func (c *prefixConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// parse makes the request of the head of n bytes at the start of the
// buffer, and consumes it; nil (and nothing consumed) when the request
// is not one server answers itself.
func (c *conn) parse(n int) *http.Request {
	b, _ := c.br.Peek(n)
	h, ok := parseHead(b)
	if !ok {
		return nil
	}
	c.br.Discard(n)
	req := &http.Request{Method: h.method, URL: h.url, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h.header, Host: h.host, RemoteAddr: c.remote, RequestURI: h.target,
		ContentLength: h.contentLength, Close: h.close, Body: http.NoBody}
	c.body.reset(c.br, h.contentLength)
	if h.contentLength > 0 {
		req.Body = &c.body
	}
	return req
}

// head is a parsed request head.
type head struct {
	method, target, host string
	url                  *url.URL
	header               http.Header
	contentLength        int64
	close                bool
}

// parseHead parses an HTTP/1.1 request head strictly: the request line,
// then header fields, each line ending in CRLF, then an empty line. It
// refuses (false) anything net/http would refuse or that server leaves to
// net/http: another version, a target not in origin form, a field
// folded over lines, a name or value with a byte net/http refuses, a
// missing or repeated Host, a Transfer-Encoding, Upgrade, Expect,
// HTTP2-Settings or Trailer field, "Connection: upgrade", a
// Content-Length repeated, malformed or over 64 KiB.
func parseHead(b []byte) (head, bool) {
	var h head
	s := string(b) // one allocation; every field is a slice of it
	line, rest, ok := cutLine(s)
	if !ok || !h.requestLine(line) {
		return h, false
	}
	// Count the fields for one backing array of values.
	fields := 0
	for i := 0; i < len(rest); i++ {
		if rest[i] == '\n' {
			fields++
		}
	}
	vals := make([]string, fields)
	h.header = make(http.Header, fields)
	h.contentLength = 0
	hosts, lengths := 0, 0
	for {
		line, rest, ok = cutLine(rest)
		if !ok {
			return h, false
		}
		if line == "" {
			break
		}
		colon := strings.IndexByte(line, ':')
		if colon <= 0 || !httpguts.ValidHeaderFieldName(line[:colon]) {
			return h, false
		}
		v := textproto.TrimString(line[colon+1:])
		if !validValue(v) {
			return h, false
		}
		k := canonicalKey(line[:colon])
		switch k {
		case "Host":
			hosts++
			h.host = v
			if !httpguts.ValidHostHeader(v) {
				return h, false
			}
			continue // net/http keeps Host out of the header map
		case "Content-Length":
			lengths++
			n, err := strconv.ParseUint(v, 10, 63)
			if err != nil || n > maxDirectBody {
				return h, false
			}
			h.contentLength = int64(n)
		case "Transfer-Encoding", "Upgrade", "Expect", "Http2-Settings", "Trailer":
			return h, false
		case "Connection":
			vv := []string{v}
			if httpguts.HeaderValuesContainsToken(vv, "upgrade") {
				return h, false
			}
			h.close = h.close || httpguts.HeaderValuesContainsToken(vv, "close")
		}
		if vv := h.header[k]; vv != nil {
			h.header[k] = append(vv, v)
		} else {
			vals[0] = v
			h.header[k] = vals[:1:1]
			vals = vals[1:]
		}
	}
	if hosts != 1 || lengths > 1 {
		return h, false
	}
	return h, true
}

// requestLine parses "METHOD /target HTTP/1.1" into h.
func (h *head) requestLine(line string) bool {
	sp1 := strings.IndexByte(line, ' ')
	if sp1 <= 0 || !httpguts.ValidHeaderFieldName(line[:sp1]) { // a token, as a field name is
		return false
	}
	h.method = line[:sp1]
	if h.method == "CONNECT" {
		return false
	}
	line = line[sp1+1:]
	sp2 := strings.IndexByte(line, ' ')
	if sp2 <= 0 || line[sp2+1:] != "HTTP/1.1" {
		return false
	}
	h.target = line[:sp2]
	if h.target[0] != '/' || !validTarget(h.target) {
		return false
	}
	var err error
	h.url, err = url.ParseRequestURI(h.target)
	return err == nil
}

// cutLine cuts s at its first CRLF; false when there is none or the line
// holds another CR or LF (net/http takes bare line ends; server leaves
// them to it).
func cutLine(s string) (line, rest string, ok bool) {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\r':
			if i+1 < len(s) && s[i+1] == '\n' {
				return s[:i], s[i+2:], true
			}
			return "", "", false
		case '\n':
			return "", "", false
		}
	}
	return "", "", false
}

// validTarget: no control bytes, no spaces, nothing over 0x7e (net/http
// takes some of these; server leaves them to it).
func validTarget(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f {
			return false
		}
	}
	return true
}

// validValue: a field value net/http takes (no control byte but tab),
// with no byte over 0x7e (obs-text is left to net/http).
func validValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < ' ' && c != '\t') || c >= 0x7f {
			return false
		}
	}
	return true
}

// commonKeys maps the usual spellings of common field names to their
// canonical form without allocating.
var commonKeys = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{"Accept", "Accept-Encoding", "Accept-Language", "Authorization",
		"Baggage", "Cache-Control", "Connection", "Content-Length", "Content-Type", "Cookie",
		"Host", "If-Modified-Since", "If-None-Match", "Keep-Alive", "Origin", "Pragma", "Referer",
		"Traceparent", "Tracestate", "User-Agent", "X-Forwarded-For", "X-Forwarded-Host",
		"X-Forwarded-Proto", "X-Real-Ip", "X-Request-Id", "X-Tenant", "X-Tier", "Idempotency-Key",
		"Transfer-Encoding", "Upgrade", "Expect", "Http2-Settings", "Trailer", "Te"} {
		m[k] = k
		m[strings.ToLower(k)] = k
	}
	return m
}()

// canonicalKey is k's canonical form, without allocating for the common
// fields in their usual spellings.
func canonicalKey(k string) string {
	if c, ok := commonKeys[k]; ok {
		return c
	}
	return textproto.CanonicalMIMEHeaderKey(k)
}

// response is server's http.ResponseWriter.
type response struct {
	c             *conn
	req           *http.Request
	header        http.Header
	status        int
	wroteHead     bool // the final head is in the writer
	chunked       bool
	noBody        bool // HEAD, 1xx, 204 or 304: writes are eaten
	contentLength int64
	written       int64
	closeAfter    bool
	pend          []byte // held back to send with a Content-Length
	trailers      []string
}

var _ http.Flusher = (*response)(nil)

var pends = sync.Pool{New: func() any { b := make([]byte, 0, pendSize); return &b }}

func (w *response) Header() http.Header { return w.header }

func (w *response) WriteHeader(code int) {
	if w.status != 0 {
		return // superfluous, as net/http logs and ignores
	}
	if code < 100 || code > 999 {
		panic("gate: invalid WriteHeader code " + strconv.Itoa(code))
	}
	if code >= 100 && code <= 199 && code != http.StatusSwitchingProtocols {
		// An informational answer (103 Early Hints) goes out at once.
		bw := w.c.bw
		w.writeStatusLine(code)
		w.writeFields(false)
		bw.WriteString("\r\n")
		if err := bw.Flush(); err != nil {
			w.failed(0, err)
		}
		return
	}
	w.status = code
}

func (w *response) Write(b []byte) (int, error) {
	if w.c.broken.Load() {
		return 0, net.ErrClosed
	}
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if !w.wroteHead {
		if w.req.Method == http.MethodHead || !bodyAllowed(w.status) {
			w.head(false)
		} else if _, ok := w.header["Content-Length"]; !ok && len(w.pend)+len(b) <= pendSize {
			if w.pend == nil {
				w.pend = (*pends.Get().(*[]byte))[:0]
			}
			w.pend = append(w.pend, b...)
			return len(b), nil
		} else {
			w.head(false)
		}
	}
	if w.noBody {
		if !bodyAllowed(w.status) {
			return 0, http.ErrBodyNotAllowed
		}
		return len(b), nil // HEAD: eaten, as net/http does
	}
	if w.contentLength >= 0 && w.written+int64(len(b)) > w.contentLength {
		return 0, http.ErrContentLength
	}
	w.written += int64(len(b))
	bw := w.c.bw
	if w.chunked && len(b) > 0 {
		var hex [16]byte
		bw.Write(strconv.AppendInt(hex[:0], int64(len(b)), 16))
		bw.WriteString("\r\n")
		bw.Write(b)
		_, err := bw.WriteString("\r\n")
		return w.failed(len(b), err)
	}
	n, err := bw.Write(b)
	return w.failed(n, err)
}

// failed notes a failed write: the client is gone.
func (w *response) failed(n int, err error) (int, error) {
	if err != nil {
		w.c.broken.Store(true)
		w.c.cancelReq()
	}
	return n, err
}

// Flush sends what is written so far; a body of unknown length is
// chunked from here on.
func (w *response) Flush() { _ = w.FlushError() }

// FlushError is Flush with its error, for http.ResponseController.
func (w *response) FlushError() error {
	if w.c.broken.Load() {
		return net.ErrClosed
	}
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if !w.wroteHead {
		w.head(false)
	}
	_, err := w.failed(0, w.c.bw.Flush())
	return err
}

// finish ends the response after the handler returned.
func (w *response) finish() {
	if w.c.broken.Load() {
		w.putPend()
		return
	}
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if !w.wroteHead {
		w.head(true)
	}
	bw := w.c.bw
	switch {
	case w.chunked:
		bw.WriteString("0\r\n")
		w.writeTrailers()
		bw.WriteString("\r\n")
	case !w.noBody && w.contentLength >= 0 && w.written < w.contentLength:
		// Shorter than it said: the client must see the connection end.
		w.closeAfter = true
	}
	w.putPend()
}

func (w *response) putPend() {
	if w.pend != nil {
		p := w.pend[:0]
		pends.Put(&p)
		w.pend = nil
	}
}

func bodyAllowed(status int) bool {
	return !(status >= 100 && status <= 199 || status == http.StatusNoContent || status == http.StatusNotModified)
}

// head writes the final head and the held-back body; done when the
// handler has returned (what was held back is all of the body).
func (w *response) head(done bool) {
	w.wroteHead = true
	h := w.header
	w.noBody = w.req.Method == http.MethodHead || !bodyAllowed(w.status)
	if cl, ok := h["Content-Length"]; ok {
		var n uint64
		err := errors.New("not one value")
		if len(cl) == 1 {
			n, err = strconv.ParseUint(cl[0], 10, 63)
		}
		if err == nil && bodyAllowed(w.status) {
			w.contentLength = int64(n)
		} else {
			delete(h, "Content-Length")
		}
	}
	delete(h, "Transfer-Encoding")
	if v := h["Connection"]; v != nil {
		w.closeAfter = w.closeAfter || httpguts.HeaderValuesContainsToken(v, "close")
		delete(h, "Connection")
	}
	switch {
	case w.noBody || w.contentLength >= 0:
	case done:
		w.contentLength = int64(len(w.pend))
		h["Content-Length"] = []string{strconv.Itoa(len(w.pend))}
	default:
		w.chunked = true
		for _, v := range h["Trailer"] {
			for _, k := range strings.Split(v, ",") {
				if k = textproto.TrimString(k); k != "" {
					w.trailers = append(w.trailers, k)
				}
			}
		}
	}
	if w.req.Close || w.c.s.shutting.Load() || w.c.s.g.noKeep.Load() || !w.c.body.done.Load() && !w.c.body.buffered() {
		w.closeAfter = true
	}
	bw := w.c.bw
	w.writeStatusLine(w.status)
	w.writeFields(true)
	if w.chunked {
		bw.WriteString("Transfer-Encoding: chunked\r\n")
	}
	if w.closeAfter {
		bw.WriteString("Connection: close\r\n")
	}
	bw.WriteString("\r\n")
	if len(w.pend) > 0 {
		p := w.pend
		w.pend = w.pend[:0]
		w.Write(p)
	}
}

func (w *response) writeStatusLine(code int) {
	bw := w.c.bw
	bw.WriteString("HTTP/1.1 ")
	var num [8]byte
	bw.Write(strconv.AppendInt(num[:0], int64(code), 10))
	bw.WriteByte(' ')
	if t := http.StatusText(code); t != "" {
		bw.WriteString(t)
	} else {
		bw.WriteString("status code ")
		bw.Write(strconv.AppendInt(num[:0], int64(code), 10))
	}
	bw.WriteString("\r\n")
}

// writeFields writes the header fields (and Date on a final head); fields
// with an invalid name are left out and line breaks in values become
// spaces, as net/http does.
func (w *response) writeFields(final bool) {
	bw := w.c.bw
	for k, vv := range w.header {
		if !httpguts.ValidHeaderFieldName(k) || strings.HasPrefix(k, http.TrailerPrefix) {
			continue
		}
		for _, v := range vv {
			writeField(bw, k, v)
		}
	}
	if _, ok := w.header["Date"]; final && !ok {
		bw.WriteString("Date: ")
		bw.WriteString(httpDate())
		bw.WriteString("\r\n")
	}
}

func writeField(bw *bufio.Writer, k, v string) {
	bw.WriteString(k)
	bw.WriteString(": ")
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		bw.WriteByte(c)
	}
	bw.WriteString("\r\n")
}

// writeTrailers writes the trailers the handler announced or set with
// http.TrailerPrefix.
func (w *response) writeTrailers() {
	bw := w.c.bw
	for _, k := range w.trailers {
		k = canonicalKey(k)
		for _, v := range w.header[k] {
			if httpguts.ValidHeaderFieldName(k) {
				writeField(bw, k, v)
			}
		}
	}
	for k, vv := range w.header {
		if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok {
			if !httpguts.ValidHeaderFieldName(name) {
				continue
			}
			for _, v := range vv {
				writeField(bw, name, v)
			}
		}
	}
}

// httpDate is the Date field's value, made once a second.
func httpDate() string {
	now := time.Now()
	sec := now.Unix()
	if d := dateCache.Load(); d != nil && d.sec == sec {
		return d.s
	}
	d := &cachedDate{sec: sec, s: now.UTC().Format(http.TimeFormat)}
	dateCache.Store(d)
	return d.s
}

type cachedDate struct {
	sec int64
	s   string
}

var dateCache atomic.Pointer[cachedDate]
