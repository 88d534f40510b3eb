package gate

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/baggage"

	"github.com/qtop-dev/qtop/agent"
	"github.com/qtop-dev/qtop/tenant"
)

// rewrite makes the upstream request: the upstream's URL, X-Forwarded-*,
// and the tenant as baggage. ReverseProxy has already removed hop-by-hop
// headers and the incoming X-Forwarded-* ones.
func (g *Gate) rewrite(pr *httputil.ProxyRequest) {
	pr.SetURL(g.cfg.Upstream)
	// httputil drops the query's parameters that hold a ';' (Go's servers
	// no longer split on it, so a backend that does could see parameters
	// a Go proxy did not). The gate decides nothing from the query: it
	// passes it as the client sent it, as nginx does (the upstream has
	// none of its own: Validate).
	pr.Out.URL.RawQuery = pr.In.URL.RawQuery
	if g.cfg.PreserveHost {
		pr.Out.Host = pr.In.Host
	}
	if g.cfg.TrustForwarded {
		if xff := pr.In.Header.Values("X-Forwarded-For"); len(xff) > 0 {
			pr.Out.Header["X-Forwarded-For"] = xff
		}
	}
	pr.SetXForwarded()
	if !g.cfg.TrustForwarded {
		// The client's own, as X-Forwarded-For is: nobody vouched for it.
		pr.Out.Header.Del("X-Real-Ip")
	}
	if g.cfg.TrustForwarded {
		// The balancer in front knows the client's scheme and host; the
		// gate sees only its own hop.
		for _, k := range []string{"X-Forwarded-Proto", "X-Forwarded-Host"} {
			if v := pr.In.Header[k]; len(v) > 0 {
				pr.Out.Header[k] = v
			}
		}
	}
	tags, ok := tenant.Lookup(pr.In.Context())
	if !ok {
		return
	}
	if h := g.cfg.TenantHeader; h != "" {
		pr.Out.Header.Set(h, tags.Tenant)
	}
	if h := g.cfg.TierHeader; h != "" {
		if tags.Tier.Valid() {
			pr.Out.Header.Set(h, tags.Tier.String())
		} else {
			pr.Out.Header.Del(h)
		}
	}
	if g.cfg.NoBaggage {
		return
	}
	h := pr.Out.Header["Baggage"]
	if len(h) == 0 {
		// The common case, a request without baggage: its header depends
		// on the tenant and tier alone.
		if b, ok := g.bags.of(tags); ok {
			pr.Out.Header["Baggage"] = []string{b}
		}
		return
	}
	in, _ := baggage.Parse(strings.Join(h, ","))
	if b, err := tenant.Baggage(in, tags); err == nil {
		pr.Out.Header.Set("Baggage", b.String())
	}
}

// maxBags bounds the baggage cache; past it the cache starts afresh.
const maxBags = 4096

// bags caches the baggage header of requests that bring none, by tenant
// and tier: building it (member checks, percent-encoding) was a tenth of
// the gate's own path.
type bags struct {
	m sync.Map // bagKey → string
	n atomic.Int32
}

type bagKey struct {
	tenant string
	tier   tenant.Tier
}

// of is the baggage header carrying t's tenant and tier; false when t's
// tenant cannot be sent as baggage.
func (c *bags) of(t tenant.Tags) (string, bool) {
	k := bagKey{t.Tenant, t.Tier}
	if v, ok := c.m.Load(k); ok {
		return v.(string), true
	}
	b, err := tenant.Baggage(baggage.Baggage{}, t)
	if err != nil {
		return "", false
	}
	s := b.String()
	if c.n.Add(1) > maxBags {
		c.m.Clear()
		c.n.Store(1)
	}
	c.m.Store(k, s)
	return s, true
}

// upstreamError answers a request the upstream did not: 408 when the
// client's body stopped arriving, 400 when it was malformed or cut short,
// 504 when the upstream timed out, 502 otherwise, nothing when the client
// left.
func (g *Gate) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	gw := gateWriterOf(w)
	if gw != nil && gw.body != nil && gw.body.timedOut.Load() {
		// Checked first: net/http's server cancels the request's
		// context when a read of its connection fails.
		gw.failed = outBodyTimeout
		g.log.Info("gate: request body timed out", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
		w.Header().Set("Connection", "close")
		http.Error(w, "gate: the client sent nothing more of its request body for "+g.cfg.BodyTimeout.String(), http.StatusRequestTimeout)
		return
	}
	if gw != nil && gw.body != nil && gw.body.broken.Load() {
		// The client's body failed (bad chunked framing, the client's
		// side closed before its end): the upstream is not to blame.
		gw.failed = outBadRequest
		g.log.Info("gate: request body malformed or cut short", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "err", err)
		w.Header().Set("Connection", "close")
		http.Error(w, "gate: the request body could not be read (malformed or cut short)", http.StatusBadRequest)
		return
	}
	if gw != nil && gw.body != nil && gw.body.stalled.Load() {
		// Checked before the client: the watch cancelled the request.
		gw.failed = outTimeout
		g.warns.warn(g.log, "body", "gate: upstream stopped reading the request body", "method", r.Method, "path", r.URL.Path, "timeout", g.cfg.Timeout)
		w.Header().Set("Connection", "close")
		http.Error(w, "gate: the upstream service took none of the request body for "+g.cfg.Timeout.String(), http.StatusGatewayTimeout)
		return
	}
	if r.Context().Err() != nil {
		// The client went away: nobody to answer. Abort rather than
		// return, or the server would send an empty 200 for the handler.
		if gw != nil {
			gw.failed = outClientGone
		}
		panic(http.ErrAbortHandler)
	}
	var ne net.Error
	var oe *net.OpError
	dial := errors.As(err, &oe) && oe.Op == "dial" // a dial timeout is "could not be reached"
	if !dial && (errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())) {
		if gw != nil {
			gw.failed = outTimeout
		}
		g.warns.warn(g.log, "timeout", "gate: upstream timed out", "method", r.Method, "path", r.URL.Path, "err", err)
		http.Error(w, "gate: the upstream service did not answer within "+g.cfg.Timeout.String(), http.StatusGatewayTimeout)
		return
	}
	if gw != nil {
		gw.failed = outUpstreamError
	}
	g.warns.warn(g.log, "failed", "gate: upstream failed", "method", r.Method, "path", r.URL.Path, "err", err)
	http.Error(w, "gate: the upstream service could not be reached or broke the connection", http.StatusBadGateway)
}

// timedTransport observes the upstream's time to response headers.
type timedTransport struct {
	base http.RoundTripper
	m    *metrics
}

func (t *timedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := t.base.RoundTrip(req)
	t.m.upstream.Observe(time.Since(start).Seconds())
	if b, ok := req.Body.(*boundedBody); ok {
		b.answered() // the answer's head came: the upstream took what it wanted
	}
	if err == nil && isStream(resp) {
		// What follows is an open stream, not work: charge the request
		// up to here and give its admission slot back.
		agent.Streaming(req.Context())
	}
	return resp, err
}

// isStream reports an upgraded connection (WebSocket) or an event stream.
func isStream(resp *http.Response) bool {
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return true
	}
	ct := resp.Header.Get("Content-Type")
	return strings.HasPrefix(ct, "text/event-stream")
}

// gateWriter is the outermost response writer: it keeps the status for
// the outcome metric and lets the proxy mark that the request reached
// the upstream. It forwards Flush and, through Unwrap, Hijack.
type gateWriter struct {
	http.ResponseWriter
	status  int
	reached bool
	failed  outcome
	// body is what became of the request's body as it was read.
	body *bodyState
	// http10 is set for an HTTP/1.0 request, which gets no 1xx answer.
	http10 bool
}

var writerPool = sync.Pool{New: func() any { return new(gateWriter) }}

var _ http.Flusher = (*gateWriter)(nil)

func (w *gateWriter) WriteHeader(code int) {
	if code < 200 && w.http10 {
		return // RFC 9110 (15.2): a server must not send 1xx to an HTTP/1.0 client
	}
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *gateWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	if err != nil && w.reached {
		// The client stopped reading (the send timeout) or left.
		w.failed = outClientGone
	}
	return n, err
}

func (w *gateWriter) Flush() {
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap returns the wrapped writer, for http.ResponseController.
func (w *gateWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// outcome classifies the finished request.
func (w *gateWriter) outcome() outcome {
	switch {
	case w.failed != outUpstream:
		return w.failed
	case w.reached:
		return outUpstream
	case w.status == http.StatusTooManyRequests:
		return outThrottled
	case w.status == http.StatusServiceUnavailable:
		return outShed
	case w.status == http.StatusNotModified:
		return outNotModified
	}
	return outNoTenant
}

// gateWriterOf finds the gate's writer below the agent's wrappers.
func gateWriterOf(w http.ResponseWriter) *gateWriter {
	for {
		switch x := w.(type) {
		case *gateWriter:
			return x
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return nil
		}
	}
}

// bufferPool lends the proxy its 32 KiB copy buffers.
type bufferPool struct{}

var buffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (bufferPool) Get() []byte  { return *buffers.Get().(*[]byte) }
func (bufferPool) Put(b []byte) { buffers.Put(&b) }
