package gate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/qtop-dev/qtop/agent"
	"github.com/qtop-dev/qtop/internal/connlimit"
)

// Errors of New; test with errors.Is.
var (
	// ErrConfig: the configuration is not usable; the message says why.
	ErrConfig = errors.New("gate: bad configuration")
)

// Defaults of Config.
const (
	DefaultTimeout             = 30 * time.Second
	DefaultDialTimeout         = 5 * time.Second
	DefaultMaxIdleConnsPerHost = 256
	DefaultIdleTimeout         = 120 * time.Second
	DefaultReadHeaderTimeout   = 10 * time.Second
	DefaultSendTimeout         = 60 * time.Second
	DefaultBodyTimeout         = 60 * time.Second
	DefaultReadTimeout         = 60 * time.Second
	// DefaultMaxHeaderBytes bounds a request's head (request line and
	// headers): 64 KiB, eight times nginx's 8 KiB line and twice its
	// 32 KiB in all, against net/http's 1 MiB, which lets each of
	// MaxConns connections hold a megabyte.
	DefaultMaxHeaderBytes = 64 << 10
)

// Config configures a Gate. Only Upstream is required.
type Config struct {
	// Upstream is the service behind the gate: http://host:port (or
	// https), optionally with a path prefix.
	Upstream *url.URL
	// Timeout bounds the wait for the upstream's response headers
	// (default DefaultTimeout), and for it to take more of a request body
	// it stopped reading (nginx's proxy_send_timeout); past it the client
	// gets 504. What comes after the headers is bounded by ReadTimeout.
	Timeout time.Duration
	// ReadTimeout bounds each read of the upstream's answer after its
	// headers (default DefaultReadTimeout, nginx's proxy_read_timeout;
	// negative: none): a body, an event stream or the upstream side of
	// a WebSocket from which nothing arrives for that long is cut off,
	// its connection closed, and counted in
	// qtop_gate_upstream_answers_cut_total{reason="read_timeout"}. Without it, an upstream
	// that hangs mid-answer holds its client and connection for good.
	// Streams that may stay silent longer need heartbeats (an event
	// stream's comment line, a WebSocket ping) or a larger value. Time
	// the gate waits for a slow client does not count.
	ReadTimeout time.Duration
	// DialTimeout bounds connecting to the upstream (default
	// DefaultDialTimeout); past it the client gets 502.
	DialTimeout time.Duration
	// SendTimeout bounds each write to a client (default
	// DefaultSendTimeout, nginx's send_timeout; negative: none): a client
	// that reads nothing of its response for that long is cut off, its
	// request counted client_gone, and its admission slot given back.
	// Without it, clients that stop reading would hold the gate's slots
	// for good. A stream or WebSocket that only idles is not affected.
	SendTimeout time.Duration
	// BodyTimeout bounds each read of a request body (default
	// DefaultBodyTimeout, nginx's client_body_timeout; negative: none): a
	// client that sends nothing more of its body for that long gets 408,
	// counted body_timeout, and its admission slot goes to the next
	// request. Without it, clients that trickle their uploads would hold
	// the gate's slots for good. Time the upstream takes to read the
	// body does not count.
	BodyTimeout time.Duration
	// MaxIdleConnsPerHost is how many keep-alive connections to the
	// upstream stay open between requests (default
	// DefaultMaxIdleConnsPerHost).
	MaxIdleConnsPerHost int
	// FlushInterval is how often a response body is flushed to the
	// client while it is copied. 0 (the default) flushes event streams
	// and responses of unknown length at once and buffers the rest; a
	// negative value flushes after every write.
	FlushInterval time.Duration
	// H2CUpstream speaks HTTP/2 without TLS (h2c) to the upstream.
	H2CUpstream bool
	// PreserveHost sends the client's Host header upstream rather than
	// the upstream's host (X-Forwarded-Host carries it either way).
	PreserveHost bool
	// TrustForwarded keeps the X-Forwarded-For chain of incoming
	// requests (the gate appends the client's address) and their
	// X-Forwarded-Proto and X-Forwarded-Host: only behind a load
	// balancer you trust. Without it the chain starts at the gate, and
	// the scheme and host are the gate's.
	TrustForwarded bool
	// StdTransport sends every request through net/http's Transport.
	// Without it, requests with no body or a small one (up to 64 KiB, of
	// known length) go through the gate's own HTTP/1.1 client, which
	// writes and reads on the request's goroutine: less CPU per request.
	// Upgrades, Expect: 100-continue, larger or streamed uploads, https
	// and h2c upstreams use net/http's Transport either way.
	StdTransport bool
	// StdServer answers every request with net/http's server. Without
	// it the gate's own HTTP/1.1 server answers the common request (no
	// body or one of known length up to 64 KiB, no upgrade, a head of
	// up to 4 KiB) on the connection's goroutine and hands every other
	// connection, as it is, to net/http's: less CPU per request.
	StdServer bool
	// MaxConns bounds the client connections open at once (default
	// connlimit.DefaultBound: half the open-file limit, at most 10,000):
	// at the bound the one idle the longest is closed to make room for a
	// new one, so connections that send nothing cannot take every file
	// descriptor.
	MaxConns int
	// MaxHeaderBytes bounds a request's head, its request line and
	// headers (default DefaultMaxHeaderBytes, at least 4 KiB: the gate's
	// own server reads heads of up to 4 KiB whole); a longer one is
	// answered 431 and never forwarded. net/http, which reads the longer
	// heads, allows 4 KiB over it.
	MaxHeaderBytes int
	// NoBaggage leaves the tenant out of the upstream request's W3C
	// baggage.
	NoBaggage bool
	// TenantHeader and TierHeader, when set, are set on the upstream
	// request to the tenant and tier the gate read (the tier header
	// dropped without a tier), replacing what the client sent: an
	// upstream reading them sees the tenant qtop charged, whether it came
	// from a JWT, the path or the header itself, never a client's claim.
	TenantHeader, TierHeader string
	// Registerer receives the gate's metrics (qtop_gate_*); nil: none.
	Registerer prometheus.Registerer
	// Logger receives upstream errors at warn level; nil: nowhere.
	Logger *slog.Logger
}

// Validate reports whether c can make a Gate.
func (c Config) Validate() error {
	u := c.Upstream
	if u == nil {
		return fmt.Errorf("%w: no upstream (want http://host:port)", ErrConfig)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: upstream %q (want http(s)://host:port)", ErrConfig, u.String())
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%w: upstream %q has a query or fragment", ErrConfig, u.String())
	}
	if c.H2CUpstream && u.Scheme != "http" {
		return fmt.Errorf("%w: h2c needs an http:// upstream, not %q", ErrConfig, u.Scheme)
	}
	if c.Timeout < 0 || c.DialTimeout < 0 || c.MaxIdleConnsPerHost < 0 {
		return fmt.Errorf("%w: negative timeout or connection count", ErrConfig)
	}
	if c.MaxHeaderBytes != 0 && c.MaxHeaderBytes < connBufSize {
		return fmt.Errorf("%w: max header bytes %d is under %d", ErrConfig, c.MaxHeaderBytes, connBufSize)
	}
	return nil
}

// Gate is the reverse proxy behind an agent. Make it with New; it is an
// http.Handler, and Serve and Shutdown run it as a server that drains.
// Safe for concurrent use.
type Gate struct {
	cfg     Config
	agent   *agent.Agent
	handler http.Handler
	proxy   *httputil.ReverseProxy
	tr      interface {
		http.RoundTripper
		CloseIdleConnections()
	}
	metrics *metrics
	log     *slog.Logger
	warns   warnings // per-request warnings, at most one a second of a kind
	bags    bags

	// Of the servers, from the package's variables when made.
	headerTimeout, watchDelay time.Duration

	// noKeep: answers say Connection: close (EndKeepAlives).
	noKeep atomic.Bool

	mu   sync.Mutex
	srvs []*http.Server
	owns []*server
	shut bool
}

// EndKeepAlives has the gate close each HTTP/1.1 connection after its
// next answer, which says "Connection: close", while it goes on serving:
// for the drain delay before Shutdown, so that clients reusing a
// connection open their next one elsewhere instead of racing its close.
func (g *Gate) EndKeepAlives() {
	g.noKeep.Store(true)
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, srv := range g.srvs {
		srv.SetKeepAlivesEnabled(false)
	}
}

var _ http.Handler = (*Gate)(nil)

// New returns a gate that forwards to cfg.Upstream every request a
// admits. a is the gate's agent: its tenant functions, plans, slots,
// freshness and collector are those of the gate; Shutdown shuts it down.
func New(a *agent.Agent, cfg Config) (*Gate, error) {
	if a == nil {
		return nil, fmt.Errorf("%w: no agent", ErrConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.SendTimeout == 0 {
		cfg.SendTimeout = DefaultSendTimeout
	}
	if cfg.BodyTimeout == 0 {
		cfg.BodyTimeout = DefaultBodyTimeout
	}
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = DefaultReadTimeout
	}
	if cfg.MaxIdleConnsPerHost == 0 {
		cfg.MaxIdleConnsPerHost = DefaultMaxIdleConnsPerHost
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = connlimit.DefaultBound()
	}
	if cfg.MaxHeaderBytes == 0 {
		cfg.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	g := &Gate{cfg: cfg, agent: a, log: cfg.Logger, headerTimeout: readHeaderTimeout, watchDelay: clientWatchDelay}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	var err error
	if g.metrics, err = newMetrics(cfg.Registerer); err != nil {
		return nil, err
	}
	hooks := cutHooks{onIdle: g.upstreamIdle, onBroken: g.upstreamBroke}
	wt := &watchedTransport{Transport: newTransport(cfg), timeout: cfg.ReadTimeout, cutHooks: hooks}
	if cfg.H2CUpstream {
		h1 := cfg
		h1.H2CUpstream = false
		wt.upgrades = newTransport(h1)
	}
	g.tr = wt
	if !cfg.StdTransport && !cfg.H2CUpstream && cfg.Upstream.Scheme == "http" {
		c := newH1Client(cfg, g.tr)
		c.cutHooks = hooks
		g.tr = c
	}
	g.proxy = &httputil.ReverseProxy{
		Rewrite:       g.rewrite,
		Transport:     &timedTransport{base: g.tr, m: g.metrics},
		FlushInterval: cfg.FlushInterval,
		ErrorHandler:  g.upstreamError,
		ErrorLog:      g.proxyLog(),
		BufferPool:    bufferPool{},
	}
	g.handler = a.Handler(http.HandlerFunc(g.forward))
	return g, nil
}

// newTransport is the upstream transport: keep-alive with many idle
// connections to the one host, no proxy from the environment.
func newTransport(cfg Config) *http.Transport {
	d := &net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second}
	t := &http.Transport{
		DialContext:           d.DialContext,
		MaxIdleConnsPerHost:   cfg.MaxIdleConnsPerHost,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: cfg.Timeout,
		ExpectContinueTimeout: time.Second,
		TLSHandshakeTimeout:   cfg.DialTimeout,
		// A proxy passes bodies as they are: without this the transport
		// would ask for gzip when the client did not and unzip it.
		DisableCompression: true,
	}
	if cfg.H2CUpstream {
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		t.Protocols = &p
	}
	return t
}

// ServeHTTP runs the request through the agent and, if admitted, the
// proxy.
func (g *Gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	gw := writerPool.Get().(*gateWriter)
	gw.ResponseWriter = w
	gw.http10 = r.ProtoMajor == 1 && r.ProtoMinor == 0
	g.metrics.inFlight.Inc()
	// Deferred: the proxy panics with http.ErrAbortHandler when a body
	// breaks off after its head was sent.
	defer g.done(gw)
	if r.Method == http.MethodConnect {
		// A tunnel, not a request for the service (nginx answers 400).
		gw.failed = outBadRequest
		http.Error(gw, "gate: CONNECT is not proxied", http.StatusMethodNotAllowed)
		return
	}
	if r.ProtoMajor == 1 && len(r.TransferEncoding) > 0 {
		// A chunked request, on net/http's server (the gate's own takes
		// none and refuses both lengths): it may have come with a
		// Content-Length too, which net/http drops while it keeps the
		// connection, so the bytes that length did not count would be
		// served as a request of their own (request smuggling). RFC 9112
		// (6.1): the connection is closed after the answer.
		w.Header().Set("Connection", "close")
	}
	if r.RequestURI == "*" {
		// The server itself answers OPTIONS *; any other method on * would
		// reach the upstream as the path /%2A (nginx answers 400 too).
		gw.failed = outBadRequest
		http.Error(gw, "gate: the request target * is only for OPTIONS", http.StatusBadRequest)
		return
	}
	g.handler.ServeHTTP(gw, r)
}

// InFlight is the number of requests inside the gate now (admitted or
// waiting for admission; open event streams and WebSockets included), as
// qtop_gate_in_flight_requests.
func (g *Gate) InFlight() int {
	var m dto.Metric
	if err := g.metrics.inFlight.Write(&m); err != nil {
		return -1
	}
	return int(m.GetGauge().GetValue())
}

// done counts the request of gw, finished or aborted.
func (g *Gate) done(gw *gateWriter) {
	g.metrics.inFlight.Dec()
	g.metrics.count(gw.outcome())
	*gw = gateWriter{}
	writerPool.Put(gw)
}

// forward is the agent's next handler: the request was admitted.
func (g *Gate) forward(w http.ResponseWriter, r *http.Request) {
	gw := gateWriterOf(w)
	if gw != nil {
		gw.reached = true
		client := r.Context()
		defer func() { // also when the proxy aborts (panics) on a broken copy
			if client.Err() != nil && gw.failed == outUpstream {
				// The client left mid-answer: the copy ended on its
				// cancelled request, not on the upstream.
				gw.failed = outClientGone
			}
		}()
		if b := g.boundBody(gw, r); b != nil {
			defer b.finished.Store(true)
			ctx, cancel := context.WithCancel(r.Context())
			defer cancel()
			b.watchSend(g.cfg.Timeout, cancel)
			defer b.sent()
			r = r.WithContext(ctx)
		}
	}
	g.proxy.ServeHTTP(w, r)
}

// Serve answers HTTP/1.1 and h2c on ln until Shutdown; it returns
// http.ErrServerClosed after Shutdown, like http.Server.Serve.
func (g *Gate) Serve(ln net.Listener) error {
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	limit := connlimit.New(ln, g.cfg.MaxConns, connlimit.Hooks{
		Opened: func(d int) { g.metrics.conns.Add(float64(d)) },
		Closed: func(reason string, _ net.Addr) { g.metrics.connsClosed.WithLabelValues(reason).Inc() },
	})
	ln = limit
	srv := &http.Server{Handler: g, Protocols: &p,
		ReadHeaderTimeout: g.headerTimeout, IdleTimeout: DefaultIdleTimeout, MaxHeaderBytes: g.cfg.MaxHeaderBytes,
		ErrorLog:  slog.NewLogLogger(g.log.Handler(), slog.LevelDebug),
		ConnState: limit.ConnState}
	g.mu.Lock()
	if g.shut {
		g.mu.Unlock()
		ln.Close()
		return http.ErrServerClosed
	}
	if g.cfg.StdServer {
		g.srvs = append(g.srvs, srv)
		g.mu.Unlock()
		return srv.Serve(sendListener{ln, g.cfg.SendTimeout})
	}
	s := newServer(g, ln, srv)
	s.limit = limit
	g.owns = append(g.owns, s)
	g.mu.Unlock()
	return s.serve()
}

// Shutdown stops accepting connections, waits for the requests in
// flight to finish (until ctx is done), closes idle upstream
// connections and shuts the agent down, which sends its last report: for
// up to 5 s more when ctx's deadline passed, not at all when ctx was
// cancelled (stop now: a second signal). Upgraded connections
// (WebSockets) are not waited for. Later calls return nil.
func (g *Gate) Shutdown(ctx context.Context) error {
	g.mu.Lock()
	if g.shut {
		g.mu.Unlock()
		return nil
	}
	g.shut = true
	srvs, owns := g.srvs, g.owns
	g.mu.Unlock()
	var errs []error
	for _, s := range srvs {
		if err := s.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("gate: drain: %w", err))
		}
	}
	for _, s := range owns {
		if err := s.shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("gate: drain: %w", err))
		}
	}
	g.tr.CloseIdleConnections()
	g.warns.flush(g.log)
	// The last report gets its own moment even when draining used ctx up,
	// but not when ctx is cancelled, now or while it is sent: that says
	// stop now.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		if errors.Is(ctx.Err(), context.Canceled) {
			cancel()
		}
	})
	defer stop()
	if err := g.agent.Shutdown(actx); err != nil {
		errs = append(errs, fmt.Errorf("gate: the last report (the requests since the one before) was not sent to the collector: %w", err))
	}
	return errors.Join(errs...)
}

// Agent returns the gate's agent.
func (g *Gate) Agent() *agent.Agent { return g.agent }
