package enforce

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/qtop-dev/qtop/ru"
	"github.com/qtop-dev/qtop/tenant"
)

// Middleware protects an HTTP handler with the chain
//
//	tier shedder → CoDel queue → RU bucket → handler
//
// each stage a decorator with a Next. A refused request gets 503 (shed,
// or failed early by CoDel) or 429 (bucket in debt, policy throttle) with
// a Retry-After computed from the bucket's debt. After the handler, the
// request's real cost (cost model over op, bytes and latency) is charged
// to the tenant's bucket, its latency feeds the ratio signal, and the
// metrics count it. Stages in shadow mode decide, count and log, and let
// the request through. Make one with NewMiddleware.
type Middleware struct {
	e       *Enforcer
	queue   *Queue
	metrics *Metrics
	tags    func(*http.Request) (tenant.Tags, error)
	op      func(*http.Request) ru.Op
	now     func() time.Time
}

type middlewareConfig struct {
	queue   *Queue
	metrics *Metrics
	tags    func(*http.Request) (tenant.Tags, error)
	op      func(*http.Request) ru.Op
	now     func() time.Time
}

// MiddlewareOption configures NewMiddleware.
type MiddlewareOption func(*middlewareConfig)

// WithTenantFunc sets how a request's tags are found (default: the tags
// already in its context, tenant.Lookup, which also reads OTel baggage).
// An error answers 400 with its text; it must come from validated,
// authenticated data.
func WithTenantFunc(f func(*http.Request) (tenant.Tags, error)) MiddlewareOption {
	return func(c *middlewareConfig) { c.tags = f }
}

// WithHeaderTenant reads the tenant from a request header and the tier
// from another (empty name: no tier header). Only for traffic from a
// trusted edge that sets those headers from authenticated data.
func WithHeaderTenant(tenantHeader, tierHeader string) MiddlewareOption {
	return WithTenantFunc(func(r *http.Request) (tenant.Tags, error) {
		t := tenant.Tags{Tenant: r.Header.Get(tenantHeader), Route: r.Pattern}
		if tierHeader != "" {
			tier, err := tenant.ParseTier(r.Header.Get(tierHeader))
			if err != nil {
				return t, err
			}
			t.Tier = tier
		}
		return t, nil
	})
}

// WithQueue puts a CoDel queue (made with Enforcer.NewQueue) between the
// shedder and the bucket.
func WithQueue(q *Queue) MiddlewareOption { return func(c *middlewareConfig) { c.queue = q } }

// WithMetrics counts every request, per tenant through topn.
func WithMetrics(m *Metrics) MiddlewareOption { return func(c *middlewareConfig) { c.metrics = m } }

// WithOpFunc sets how a request's op is found (default: GET, HEAD and
// OPTIONS read, DELETE deletes, anything else writes).
func WithOpFunc(f func(*http.Request) ru.Op) MiddlewareOption {
	return func(c *middlewareConfig) { c.op = f }
}

// WithClock sets the middleware's clock (default time.Now).
func WithClock(now func() time.Time) MiddlewareOption {
	return func(c *middlewareConfig) { c.now = now }
}

// NewMiddleware returns the middleware of e.
func NewMiddleware(e *Enforcer, opts ...MiddlewareOption) (*Middleware, error) {
	if e == nil {
		return nil, fmt.Errorf("%w: nil enforcer", ErrConfig)
	}
	c := middlewareConfig{now: time.Now, op: defaultOp, tags: func(r *http.Request) (tenant.Tags, error) {
		t, ok := tenant.Lookup(r.Context())
		if !ok {
			return t, ErrNoTenant
		}
		return t, nil
	}}
	for _, o := range opts {
		o(&c)
	}
	return &Middleware{e: e, queue: c.queue, metrics: c.metrics, tags: c.tags, op: c.op, now: c.now}, nil
}

func defaultOp(r *http.Request) ru.Op {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return ru.OpRead
	case http.MethodDelete:
		return ru.OpDelete
	}
	return ru.OpWrite
}

// NewQueue returns a CoDel queue whose drops count in e's stats and that
// follows e's shadow mode for RuleQueue.
func (e *Enforcer) NewQueue(slots int, opts ...QueueOption) (*Queue, error) {
	opts = append(opts, withQueueShadow(e.cfg.shadow[RuleQueue]), withDropHook(e.countDrop))
	return newQueue(slots, opts...)
}

// Wrap returns next behind the chain.
func (m *Middleware) Wrap(next http.Handler) http.Handler {
	var h http.Handler = &chargeStage{m: m, Next: next}
	h = &bucketStage{m: m, Next: h}
	if m.queue != nil {
		h = &queueStage{m: m, Next: h}
	}
	return &shedStage{m: m, Next: h}
}

// refuse writes a refusal and counts it for the tenant.
func (m *Middleware) refuse(w http.ResponseWriter, now time.Time, tags tenant.Tags, d Decision) {
	code := http.StatusServiceUnavailable
	if d.Verdict == Throttle {
		code = http.StatusTooManyRequests
	}
	if d.RetryAfter > 0 {
		secs := int64((d.RetryAfter + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.FormatInt(max(secs, 1), 10))
	}
	http.Error(w, d.Err().Error(), code)
	if m.metrics != nil {
		m.metrics.ObserveAt(now, tags.Tenant, 0, true)
	}
}

// shedStage finds the tenant, puts it in the context and sheds the
// tiers the price controller is shedding.
type shedStage struct {
	m    *Middleware
	Next http.Handler
}

func (s *shedStage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tags, err := s.m.tags(r)
	if err == nil {
		err = tenant.ValidateTenant(tags.Tenant)
	}
	if err != nil {
		if !errors.Is(err, ErrNoTenant) {
			err = fmt.Errorf("enforce: bad tenant: %w", err)
		}
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if cur, ok := tenant.From(r.Context()); !ok || cur != tags {
		r = r.WithContext(tenant.With(r.Context(), tags))
	}
	now := s.m.now()
	if d := s.m.e.ShedAt(now, tags); !d.Admitted() {
		s.m.refuse(w, now, tags, d)
		return
	}
	s.Next.ServeHTTP(w, r)
}

// queueStage waits for a CoDel slot.
type queueStage struct {
	m    *Middleware
	Next http.Handler
}

func (s *queueStage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tags, _ := tenant.From(r.Context())
	tier := s.m.e.tierOf(tags.Tier)
	release, err := s.m.queue.Acquire(r.Context(), tier)
	if err != nil {
		if errors.Is(err, ErrQueueDelay) || errors.Is(err, ErrClosed) {
			s.m.refuse(w, s.m.now(), tags, Decision{Verdict: Drop, Tier: tier, RetryAfter: time.Second})
		}
		// The client left (its context ended): nothing to answer.
		return
	}
	defer release()
	s.Next.ServeHTTP(w, r)
}

// bucketStage refuses tenants whose bucket is in debt.
type bucketStage struct {
	m    *Middleware
	Next http.Handler
}

func (s *bucketStage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tags, _ := tenant.From(r.Context())
	now := s.m.now()
	if d := s.m.e.AllowAt(now, tags); !d.Admitted() {
		s.m.refuse(w, now, tags, d)
		return
	}
	s.Next.ServeHTTP(w, r)
}

// chargeStage runs the handler and charges its real cost.
type chargeStage struct {
	m    *Middleware
	Next http.Handler
}

func (s *chargeStage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tags, _ := tenant.From(r.Context())
	start := s.m.now()
	cw := &countingWriter{ResponseWriter: w}
	defer func() {
		end := s.m.now()
		d := end.Sub(start)
		bytes := cw.n
		if r.ContentLength > 0 {
			bytes += r.ContentLength
		}
		ru := s.m.e.CostAt(end, tags, s.m.op(r), bytes, d)
		s.m.e.ObserveAt(end, d)
		if s.m.metrics != nil {
			s.m.metrics.ObserveAt(end, tags.Tenant, ru, false)
		}
	}()
	s.Next.ServeHTTP(cw, r)
}

// countingWriter counts response bytes. It forwards Flush and exposes the
// underlying writer to http.ResponseController through Unwrap.
type countingWriter struct {
	http.ResponseWriter
	n int64
}

var _ http.Flusher = (*countingWriter)(nil)

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.ResponseWriter.Write(b)
	c.n += int64(n)
	return n, err
}

func (c *countingWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap returns the wrapped writer, for http.ResponseController.
func (c *countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }
