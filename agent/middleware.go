package agent

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/qtop-dev/qtop/enforce"
	"github.com/qtop-dev/qtop/meter"
	"github.com/qtop-dev/qtop/meter/otelmeter"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/tenant"
)

// Handler returns next behind the agent: for each request it finds the
// tenant (WithTenant), puts its tags in the context, then runs the
// admission chain
//
//	tier shedder → CoDel queue → RU bucket → next
//
// and, after next, charges the request's real cost (op, bytes, latency)
// to the tenant's bucket once and records it once: one record per
// request with its RU, bytes, latency, status and tier. A refused
// request gets 503 (shed, dropped by CoDel) or 429 (bucket in debt,
// policy throttle) with Retry-After, and is recorded too. A request
// without a valid tenant gets 400 (401 for a bad credential).
//
// The record's route is the ServeMux pattern that served the request.
// Wrapping each route (mux.Handle(pattern, a.Handler(h))) rather than the
// whole mux also puts the route in the context, and so in SQL comments.
//
// With WithFreshness, the freshness shedder runs before all of this.
func (a *Agent) Handler(next http.Handler) http.Handler {
	return a.wrapFreshness(&handler{a: a, next: next})
}

type handler struct {
	a    *Agent
	next http.Handler
}

// request is the per-request state, one allocation: the context that
// carries the tags, the response writer that counts, and what the pool
// tracer measures.
type request struct {
	tenant.Context
	w        respWriter
	agent    *Agent
	acquire  atomic.Int64 // unix ns of the pgx acquire in flight
	streamAt atomic.Int64 // unix ns when Streaming was called, 0 if not
	slot     atomic.Bool  // holds a queue slot not yet released
	poolWait atomic.Int64 // ns waited for connections
	// admitted is when the request left the queue (its start without
	// one): its work, which is what it is charged for, starts there.
	admitted time.Time
}

type requestKey struct{}

// Value answers the request's own key, then the tags', then the parent's.
func (q *request) Value(key any) any {
	if _, ok := key.(requestKey); ok {
		return q
	}
	return q.Context.Value(key)
}

func requestOf(ctx context.Context) *request {
	q, _ := ctx.Value(requestKey{}).(*request)
	return q
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a := h.a
	start := time.Now()
	tags, err := a.cfg.tenant.extract(r)
	if err == nil {
		err = tags.Validate()
	}
	if err != nil {
		a.refuseTenant(w, r, start, err)
		return
	}
	if tags.Route == "" {
		// Known when the agent wraps one route of a ServeMux: the SQL
		// comments then carry it too.
		tags.Route = r.Pattern
	}
	q := &request{agent: a, admitted: start}
	q.Context.Context, q.Tags = r.Context(), tags
	q.w.ResponseWriter, q.w.status = w, http.StatusOK
	var ctx context.Context = q
	if a.cfg.baggage {
		if c, err := tenant.WithBaggage(ctx, tags); err == nil {
			ctx = c
		}
	}
	var span trace.Span
	if a.tracer != nil {
		ctx, span = a.tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(start))
	}
	r = r.WithContext(ctx)

	e := a.enf
	d := e.ShedAt(start, tags)
	if !d.Admitted() {
		h.refuse(q, r, start, d, span)
		return
	}
	if a.queue != nil {
		if err := a.queue.WaitAt(ctx, start, d.Tier); err != nil {
			if errors.Is(err, enforce.ErrQueueDelay) || errors.Is(err, enforce.ErrClosed) {
				h.refuse(q, r, start, enforce.Decision{Verdict: enforce.Drop, Tier: d.Tier, RetryAfter: time.Second}, span)
			}
			// Otherwise the client left: nothing to answer.
			if span != nil {
				span.End()
			}
			return
		}
		q.slot.Store(true)
		defer q.releaseSlot(a)
		// Judged as of now: a bucket read at its (stale) arrival looks in
		// debt, charged meanwhile by the requests admitted before it.
		q.admitted = time.Now()
	}
	if d = e.AllowAt(q.admitted, tags); !d.Admitted() {
		h.refuse(q, r, start, d, span)
		return
	}
	returned := false
	defer func() {
		if !returned {
			// next panicked (or called runtime.Goexit): the client gets
			// no answer, or a cut one, whatever next had written.
			q.w.status = http.StatusInternalServerError
		}
		a.finish(q, r, start, d.Tier, span, true)
	}()
	q.w.req = q
	h.next.ServeHTTP(&q.w, r)
	returned = true
}

// refuseTenant answers a request whose tenant could not be read: 401 for
// a credential refused (with WWW-Authenticate, RFC 6750), 400 otherwise.
func (a *Agent) refuseTenant(w http.ResponseWriter, r *http.Request, start time.Time, err error) {
	code := http.StatusBadRequest
	if errors.Is(err, ErrUnauthorized) {
		code = http.StatusUnauthorized
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
	}
	msg := err.Error()
	if !errors.Is(err, ErrNoTenant) && !errors.Is(err, ErrUnauthorized) && !errors.Is(err, ErrAmbiguousTenant) {
		msg = "agent: bad tenant: " + msg
	}
	if errors.Is(err, ErrNoTenant) && a.cfg.tenant.hint != "" {
		msg += ": " + a.cfg.tenant.hint
	}
	http.Error(w, msg, code)
	a.rec.Record(meter.Record{Time: start, Tags: tenant.Tags{Route: r.Pattern}, Kind: report.KindRequest, Err: false})
}

// Streaming tells the agent that the request of ctx (a context Handler
// made, or one derived from it) goes on as a long-lived stream from now
// on — an event stream, an upgraded connection such as a WebSocket —
// whose duration is not work: the request's latency, as charged and
// recorded, ends now (its bytes are still counted to the end), and it
// gives back its admission slot at once, so that open streams do not
// fill the CoDel queue. Calls after the first, and outside Handler, do
// nothing.
func Streaming(ctx context.Context) {
	q := requestOf(ctx)
	if q == nil || !q.streamAt.CompareAndSwap(0, time.Now().UnixNano()) {
		return
	}
	if a := q.agent; a != nil {
		q.releaseSlot(a)
	}
}

// releaseSlot gives the request's queue slot back, once.
func (q *request) releaseSlot(a *Agent) {
	if q.slot.CompareAndSwap(true, false) {
		a.queue.Release()
	}
}

// finish charges and records a request that ran (charge) or was refused.
func (a *Agent) finish(q *request, r *http.Request, start time.Time, tier tenant.Tier, span trace.Span, charge bool) {
	end := time.Now()
	if at := q.streamAt.Load(); at > 0 {
		end = time.Unix(0, at)
	}
	d := end.Sub(start)
	tags := q.Tags
	tags.Tier = tier
	if tags.Route == "" {
		tags.Route = r.Pattern
	}
	bytes := q.w.n
	if r.ContentLength > 0 {
		bytes += r.ContentLength
	}
	ru := 0.0
	if charge {
		// Charged for its work, not for its wait in the queue (which its
		// latency, as recorded and observed, includes).
		work := d
		if q.admitted.After(start) {
			work = max(0, end.Sub(q.admitted))
		}
		ru = a.enf.CostAt(end, tags, a.cfg.op(r), bytes, work)
		a.enf.ObserveAt(end, d)
	}
	if a.metrics != nil {
		a.metrics.ObserveAt(end, tags.Tenant, ru, !charge)
	}
	failed := q.w.status >= 500
	a.rec.Record(meter.Record{Time: end, Tags: tags, Kind: report.KindRequest, Duration: d, Bytes: bytes, Err: failed, RU: ru, Refused: !charge})
	if span != nil {
		if tags.Route != "" {
			span.SetName(r.Method + " " + tags.Route)
			span.SetAttributes(attribute.String("http.route", tags.Route))
		}
		span.SetAttributes(attribute.Int("http.response.status_code", q.w.status), attribute.Float64(string(otelmeter.AttrRU), ru))
		if w := q.poolWait.Load(); w > 0 {
			// This request's wait for pgxpool connections.
			span.SetAttributes(attribute.Float64("qtop.pool_wait_seconds", time.Duration(w).Seconds()))
		}
		if failed {
			span.SetStatus(codes.Error, "")
		}
		span.End(trace.WithTimestamp(end))
	}
}

// refuse answers a refused request and records it, under the route a
// ServeMux would have given it.
func (h *handler) refuse(q *request, r *http.Request, start time.Time, d enforce.Decision, span trace.Span) {
	if mux, ok := h.next.(*http.ServeMux); ok && q.Tags.Route == "" {
		_, r.Pattern = mux.Handler(r)
	}
	code := http.StatusServiceUnavailable
	if d.Verdict == enforce.Throttle {
		code = http.StatusTooManyRequests
	}
	if d.RetryAfter > 0 {
		secs := int64((d.RetryAfter + time.Second - 1) / time.Second)
		q.w.Header().Set("Retry-After", strconv.FormatInt(max(secs, 1), 10))
	}
	http.Error(&q.w, d.Err().Error(), code)
	h.a.finish(q, r, start, d.Tier, span, false)
}

// respWriter counts response bytes and keeps the status. It forwards
// Flush and Hijack and exposes the underlying writer to
// http.ResponseController through Unwrap.
type respWriter struct {
	http.ResponseWriter
	n      int64
	status int
	wrote  bool
	req    *request // set once admitted: a hijack ends its work
}

var (
	_ http.Flusher  = (*respWriter)(nil)
	_ http.Hijacker = (*respWriter)(nil)
)

// Hijack hands the connection to the handler (a WebSocket upgrade, a
// proxy tunnel), for code that asserts http.Hijacker rather than use
// http.ResponseController. What follows is the handler's own traffic, not
// work: as with Streaming, the request's latency ends here and its
// admission slot is given back. Over HTTP/2, which cannot hijack, it
// returns an error wrapping http.ErrNotSupported.
func (w *respWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil && w.req != nil {
		Streaming(w.req)
	}
	return c, rw, err
}

func (w *respWriter) WriteHeader(code int) {
	if !w.wrote && code >= 200 {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *respWriter) Write(b []byte) (int, error) {
	w.wrote = true
	n, err := w.ResponseWriter.Write(b)
	w.n += int64(n)
	return n, err
}

func (w *respWriter) Flush() {
	w.wrote = true
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap returns the wrapped writer, for http.ResponseController.
func (w *respWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
