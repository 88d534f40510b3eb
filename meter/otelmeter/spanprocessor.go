// Package otelmeter records the spans of an OpenTelemetry SDK
// TracerProvider into a meter.Recorder (NewSpanProcessor), and tags every
// span with its tenant.
package otelmeter

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/qtop-dev/qtop/meter"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/tenant"
)

// Span attribute keys the processor writes (OnStart) and reads (OnEnd).
// tenant.id and tenant.tier are also the W3C baggage member names.
const (
	AttrTenant = attribute.Key(tenant.BaggageTenant) // "tenant.id"
	AttrTier   = attribute.Key(tenant.BaggageTier)   // "tenant.tier"
	AttrRoute  = attribute.Key("tenant.route")
	// AttrRU is read (never written) in OnEnd: the request units the
	// application charged for the span's work (enforce's cost model), a
	// float64 that becomes Record.RU, so that an application whose
	// requests are recorded from its server spans can report RU without
	// recording each request a second time.
	AttrRU = attribute.Key("qtop.ru")
)

// Semantic-convention attributes read in OnEnd (current names and the
// older ones still emitted by many instrumentations).
const (
	attrHTTPRoute      = attribute.Key("http.route")
	attrDBSystem       = attribute.Key("db.system")
	attrDBSystemName   = attribute.Key("db.system.name")
	attrDBRows         = attribute.Key("db.response.returned_rows")
	attrRespBodySize   = attribute.Key("http.response.body.size")
	attrRespContentLen = attribute.Key("http.response_content_length")
)

// SpanProcessor is an OpenTelemetry span processor that tags spans with
// their tenant and turns finished spans into records:
//
//   - OnStart copies the tenant of the parent context (tenant.From, else
//     the W3C baggage members tenant.id and tenant.tier) onto the span as
//     the attributes tenant.id and tenant.tier, and onto client and
//     consumer spans the route as tenant.route;
//   - OnEnd records server spans as report.KindRequest, database client spans
//     (those with db.system or db.system.name) as report.KindDB and consumer
//     spans as report.KindJob; the route is http.route, else tenant.route, else
//     the span name.
//
// With SQLObserver recording the same statements, pass WithDBSpans(false).
//
// It only adds to the Recorder, which never blocks, so it can sit beside
// the SDK's batch span processor (register both on the TracerProvider).
type SpanProcessor struct {
	rec     *meter.Recorder
	skipDB  bool
	skipReq bool
	done    atomic.Bool
}

var _ sdktrace.SpanProcessor = (*SpanProcessor)(nil)

// NewSpanProcessor returns a span processor that feeds rec, or ErrInvalid
// for a nil Recorder.
func NewSpanProcessor(rec *meter.Recorder, opts ...Option) (*SpanProcessor, error) {
	if rec == nil {
		return nil, fmt.Errorf("%w: nil Recorder", meter.ErrInvalid)
	}
	var c config
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return &SpanProcessor{rec: rec, skipDB: c.skipDB, skipReq: c.skipReq}, nil
}

// Option configures NewSpanProcessor.
type Option func(*config)

type config struct{ skipDB, skipReq bool }

// WithDBSpans says whether the SpanProcessor records database client
// spans (default true). Pass false when sqlmeter.SQLObserver already
// records the same statements, so that they do not count twice.
func WithDBSpans(record bool) Option { return func(c *config) { c.skipDB = !record } }

// WithRequestSpans says whether the SpanProcessor records server spans as
// requests (default true). Pass false when a middleware (the agent's)
// already records each request, so that they do not count twice; the
// processor still tags every span with its tenant.
func WithRequestSpans(record bool) Option { return func(c *config) { c.skipReq = !record } }

// OnStart implements sdktrace.SpanProcessor.
func (p *SpanProcessor) OnStart(parent context.Context, s sdktrace.ReadWriteSpan) {
	if p.done.Load() {
		return
	}
	t, ok := tenant.Lookup(parent) // tenant.From, else the baggage
	if !ok {
		return
	}
	// The attributes go through a pooled array: SetAttributes copies
	// them, and a fresh variadic slice would escape through the interface.
	// Every attribute costs the SDK a share of a slice growth, so the
	// route goes only where OnEnd needs it: on client and consumer spans
	// (a server span has its http.route or its name).
	a := attrPool.Get().(*[3]attribute.KeyValue)
	kv := append(a[:0], AttrTenant.String(t.Tenant))
	if t.Tier.Valid() {
		kv = append(kv, tierAttrs[t.Tier])
	}
	if t.Route != "" {
		if k := s.SpanKind(); k == trace.SpanKindClient || k == trace.SpanKindConsumer {
			kv = append(kv, AttrRoute.String(t.Route))
		}
	}
	s.SetAttributes(kv...)
	*a = [3]attribute.KeyValue{}
	attrPool.Put(a)
}

var attrPool = sync.Pool{New: func() any { return new([3]attribute.KeyValue) }}

// tierAttrs are the tenant.tier attributes, built once, by tier.
var tierAttrs = [...]attribute.KeyValue{
	tenant.T0: AttrTier.String(tenant.T0.String()),
	tenant.T1: AttrTier.String(tenant.T1.String()),
	tenant.T2: AttrTier.String(tenant.T2.String()),
	tenant.T3: AttrTier.String(tenant.T3.String()),
}

// parseTier reads a tenant.tier value: the four values OnStart writes
// without a call, anything else through tenant.ParseTier (which trims
// space and ignores case), an invalid one as TierUnset.
func parseTier(v attribute.Value) tenant.Tier {
	str := v.AsString()
	if len(str) == 2 && str[0] == 'T' && str[1] >= '0' && str[1] <= '3' {
		return tenant.T0 + tenant.Tier(str[1]-'0')
	}
	t, _ := tenant.ParseTier(str)
	return t
}

// OnEnd implements sdktrace.SpanProcessor.
func (p *SpanProcessor) OnEnd(s sdktrace.ReadOnlySpan) {
	if p.done.Load() {
		return
	}
	var kind report.Kind
	switch s.SpanKind() {
	case trace.SpanKindServer:
		if p.skipReq {
			return
		}
		kind = report.KindRequest
	case trace.SpanKindConsumer:
		kind = report.KindJob
	case trace.SpanKindClient:
		if p.skipDB {
			return
		}
		kind = report.KindDB // if it turns out to be a database span, below
	default:
		return
	}
	var r meter.Record
	var httpRoute, route string
	isDB := false
	for _, kv := range s.Attributes() {
		switch kv.Key {
		case AttrTenant:
			r.Tags.Tenant = kv.Value.AsString()
		case AttrTier:
			r.Tags.Tier = parseTier(kv.Value)
		case AttrRoute:
			route = kv.Value.AsString()
		case attrHTTPRoute:
			httpRoute = kv.Value.AsString()
		case attrDBSystem, attrDBSystemName:
			isDB = true
		case attrDBRows:
			r.Rows = kv.Value.AsInt64()
		case attrRespBodySize, attrRespContentLen:
			r.Bytes = kv.Value.AsInt64()
		case AttrRU:
			r.RU = kv.Value.AsFloat64()
		}
	}
	if kind == report.KindDB && !isDB {
		return
	}
	switch {
	case httpRoute != "" && kind == report.KindRequest:
		r.Tags.Route = httpRoute
	case route != "":
		r.Tags.Route = route
	default:
		r.Tags.Route = s.Name()
	}
	r.Kind = kind
	r.Time = s.EndTime()
	r.Duration = r.Time.Sub(s.StartTime())
	r.Err = s.Status().Code == codes.Error
	p.rec.Record(r)
}

// Shutdown stops the processor: later spans are ignored. It returns the
// context's error if ctx is already done.
func (p *SpanProcessor) Shutdown(ctx context.Context) error {
	p.done.Store(true)
	return ctx.Err()
}

// ForceFlush has nothing to flush (records reach the Recorder as spans
// end); it returns the context's error if ctx is already done. Flush the
// Reporter to send them.
func (p *SpanProcessor) ForceFlush(ctx context.Context) error {
	return ctx.Err()
}
