package otelmeter

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/qtop-dev/qtop/meter"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/tenant"
)

func newTracer(t testing.TB, rec *meter.Recorder) (trace.Tracer, *tracetest.InMemoryExporter, *sdktrace.TracerProvider) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSpanProcessor(mustSpanProcessor(rec)),
		sdktrace.WithBatcher(exp),
	)
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp.Tracer("test"), exp, tp
}

func attrsOf(s tracetest.SpanStub) map[attribute.Key]string {
	m := map[attribute.Key]string{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value.Emit()
	}
	return m
}

func TestSpanProcessor(t *testing.T) {
	rec := mustRecorder(fixedClock(t0))
	tr, exp, tp := newTracer(t, rec)

	ctx := tenant.With(context.Background(), tenant.Tags{Tenant: "acme", Route: "GET /reports", Tier: tenant.T2})
	at := func(ms int) trace.SpanStartEventOption {
		return trace.WithTimestamp(t0.Add(time.Duration(ms) * time.Millisecond))
	}
	end := func(ms int) trace.SpanEndOption {
		return trace.WithTimestamp(t0.Add(time.Duration(ms) * time.Millisecond))
	}

	sctx, server := tr.Start(ctx, "GET /reports/{id}", trace.WithSpanKind(trace.SpanKindServer), at(0),
		trace.WithAttributes(attribute.String("http.route", "GET /reports/{id}"), attribute.Int64("http.response.body.size", 2048)))
	_, db := tr.Start(sctx, "SELECT reports", trace.WithSpanKind(trace.SpanKindClient), at(5),
		trace.WithAttributes(attribute.String("db.system.name", "postgresql"), attribute.Int64("db.response.returned_rows", 12)))
	db.End(end(35))
	_, httpc := tr.Start(sctx, "GET", trace.WithSpanKind(trace.SpanKindClient), at(36)) // not a database: ignored
	httpc.End(end(40))
	_, internal := tr.Start(sctx, "render", at(40)) // internal: ignored
	internal.End(end(45))
	server.SetStatus(codes.Error, "boom")
	server.End(end(50))

	// Tenant from baggage only (a downstream service).
	m1, _ := baggage.NewMemberRaw("tenant.id", "globex")
	m2, _ := baggage.NewMemberRaw("tenant.tier", "T0")
	bg, _ := baggage.New(m1, m2)
	_, job := tr.Start(baggage.ContextWithBaggage(context.Background(), bg), "reindex", trace.WithSpanKind(trace.SpanKindConsumer), at(0))
	job.End(end(1000))

	// No tenant at all.
	_, anon := tr.Start(context.Background(), "GET /health", trace.WithSpanKind(trace.SpanKindServer), at(0))
	anon.End(end(1))

	if err := tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	if len(spans) != 6 {
		t.Fatalf("%d spans exported, want 6", len(spans))
	}
	for _, s := range spans {
		a := attrsOf(s)
		switch s.Name {
		case "SELECT reports", "GET":
			if a["tenant.id"] != "acme" || a["tenant.tier"] != "T2" || a["tenant.route"] != "GET /reports" {
				t.Errorf("span %s: attributes %v", s.Name, a)
			}
		case "GET /reports/{id}", "render":
			if _, ok := a["tenant.route"]; ok || a["tenant.id"] != "acme" || a["tenant.tier"] != "T2" {
				t.Errorf("span %s: attributes %v", s.Name, a)
			}
		case "reindex":
			if a["tenant.id"] != "globex" || a["tenant.tier"] != "T0" || a["tenant.route"] != "" {
				t.Errorf("span %s: attributes %v", s.Name, a)
			}
		case "GET /health":
			if _, ok := a["tenant.id"]; ok {
				t.Errorf("span %s: attributes %v", s.Name, a)
			}
		}
	}

	got := rowsByKey(rec.Cut(t0.Add(time.Second)))
	want := map[string]struct {
		count, errs uint64
		dur         time.Duration
		rows, bytes uint64
		tier        tenant.Tier
	}{
		"acme|GET /reports/{id}|request": {1, 1, 50 * time.Millisecond, 0, 2048, tenant.T2},
		"acme|GET /reports|db":           {1, 0, 30 * time.Millisecond, 12, 0, tenant.T2},
		"globex|reindex|job":             {1, 0, time.Second, 0, 0, tenant.T0},
		"(untagged)|GET /health|request": {1, 0, time.Millisecond, 0, 0, tenant.TierUnset},
	}
	if len(got) != len(want) {
		t.Fatalf("rows %v", got)
	}
	for k, w := range want {
		g := got[k]
		if g.Count != w.count || g.Errors != w.errs || g.Duration != w.dur || g.Rows != w.rows || g.Bytes != w.bytes || g.Tier != w.tier {
			t.Errorf("row %s: %+v, want %+v", k, g, w)
		}
	}
}

func TestSpanProcessorWithoutDBSpans(t *testing.T) {
	rec := mustRecorder(fixedClock(t0))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(mustSpanProcessor(rec, WithDBSpans(false))))
	defer tp.Shutdown(context.Background())
	tr := tp.Tracer("t")
	ctx := tenant.With(context.Background(), tenant.Tags{Tenant: "acme"})
	ctx, s := tr.Start(ctx, "GET /a", trace.WithSpanKind(trace.SpanKindServer))
	_, d := tr.Start(ctx, "SELECT", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attribute.String("db.system", "postgresql")))
	d.End()
	s.End()
	rows := rec.Cut(t0.Add(time.Second)).Rows
	if len(rows) != 1 || rows[0].Kind != report.KindRequest {
		t.Errorf("rows %+v, want the request only", rows)
	}
}

// The RU an application charged reaches the record through qtop.ru.
func TestSpanProcessorRU(t *testing.T) {
	rec := mustRecorder(fixedClock(t0))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(mustSpanProcessor(rec)))
	defer tp.Shutdown(context.Background())
	tr := tp.Tracer("t")
	ctx := tenant.With(context.Background(), tenant.Tags{Tenant: "acme"})
	for _, ru := range []float64{2.5, 4} {
		_, s := tr.Start(ctx, "GET /a", trace.WithSpanKind(trace.SpanKindServer))
		s.SetAttributes(AttrRU.Float64(ru))
		s.End()
	}
	rows := rec.Cut(t0.Add(time.Second)).Rows
	if len(rows) != 1 || rows[0].Count != 2 || rows[0].RU != 6.5 {
		t.Errorf("rows %+v, want one request row of 2 records and 6.5 RU", rows)
	}
}

func TestSpanProcessorShutdown(t *testing.T) {
	rec := mustRecorder(fixedClock(t0))
	p := mustSpanProcessor(rec)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(p))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.ForceFlush(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("ForceFlush with a done context: %v", err)
	}
	if err := p.ForceFlush(context.Background()); err != nil {
		t.Errorf("ForceFlush: %v", err)
	}
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := p.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Shutdown with a done context: %v", err)
	}
	// Spans of a provider that shares the processor after its shutdown are ignored.
	tp2 := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(p))
	_, s := tp2.Tracer("t").Start(context.Background(), "x", trace.WithSpanKind(trace.SpanKindServer))
	s.End()
	if rows := rec.Cut(t0.Add(time.Second)).Rows; len(rows) != 0 {
		t.Errorf("recorded after shutdown: %v", rows)
	}
}

// parseTier reads the four tiers OnStart writes without tenant.ParseTier
// and anything else through it.
func TestParseTier(t *testing.T) {
	for _, c := range []struct {
		v    attribute.Value
		want tenant.Tier
	}{
		{attribute.StringValue("T0"), tenant.T0},
		{attribute.StringValue("T3"), tenant.T3},
		{attribute.StringValue("t1"), tenant.T1},   // ParseTier ignores case
		{attribute.StringValue(" T2 "), tenant.T2}, // and space
		{attribute.StringValue("2"), tenant.T2},
		{attribute.StringValue("T4"), tenant.TierUnset},
		{attribute.StringValue("T"), tenant.TierUnset},
		{attribute.StringValue(""), tenant.TierUnset},
		{attribute.Int64Value(2), tenant.TierUnset},
	} {
		if got := parseTier(c.v); got != c.want {
			t.Errorf("parseTier(%s) = %v, want %v", c.v.Emit(), got, c.want)
		}
	}
	for tier := tenant.T0; tier <= tenant.T3; tier++ {
		if kv := tierAttrs[tier]; kv.Key != AttrTier || kv.Value.AsString() != tier.String() {
			t.Errorf("tierAttrs[%v] = %v", tier, kv)
		}
	}
}

// A tier the application set itself (the context has none) reaches the
// record, in any spelling tenant.ParseTier accepts.
func TestSpanProcessorAppTier(t *testing.T) {
	rec := mustRecorder(fixedClock(t0))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(mustSpanProcessor(rec)))
	defer tp.Shutdown(context.Background())
	tr := tp.Tracer("t")
	for route, tier := range map[string]string{"GET /a": "T1", "GET /b": " t3", "GET /c": "T7"} {
		ctx := tenant.With(context.Background(), tenant.Tags{Tenant: "acme"})
		_, s := tr.Start(ctx, route, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(AttrTier.String(tier)))
		s.End()
	}
	want := map[string]tenant.Tier{"GET /a": tenant.T1, "GET /b": tenant.T3, "GET /c": tenant.TierUnset}
	rows := rec.Cut(t0.Add(time.Second)).Rows
	if len(rows) != len(want) {
		t.Fatalf("rows %+v", rows)
	}
	for _, r := range rows {
		if r.Tier != want[r.Route] {
			t.Errorf("route %s: tier %v, want %v", r.Route, r.Tier, want[r.Route])
		}
	}
}

// BenchmarkSpan measures a server span with a database child, each with
// the attributes their instrumentations usually set, through the SDK with
// and without the processor; the difference is its overhead for two
// spans.
func BenchmarkSpan(b *testing.B) {
	ctx := tenant.With(context.Background(), tenant.Tags{Tenant: "acme", Route: "GET /reports", Tier: tenant.T2})
	run := func(b *testing.B, tp *sdktrace.TracerProvider) {
		tr := tp.Tracer("bench")
		b.ReportAllocs()
		for b.Loop() {
			sctx, s := tr.Start(ctx, "GET /reports/{id}", trace.WithSpanKind(trace.SpanKindServer),
				trace.WithAttributes(attribute.String("http.request.method", "GET"), attribute.String("http.route", "/reports/{id}")))
			_, d := tr.Start(sctx, "SELECT reports", trace.WithSpanKind(trace.SpanKindClient),
				trace.WithAttributes(attribute.String("db.system.name", "postgresql"), attribute.String("db.query.text", "SELECT * FROM reports WHERE id = $1")))
			s.SetAttributes(attribute.Int("http.response.status_code", 200))
			d.End()
			s.End()
		}
	}
	b.Run("sdk", func(b *testing.B) {
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(noopProcessor{}))
		run(b, tp)
	})
	b.Run("sdk+ingest", func(b *testing.B) {
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(noopProcessor{}),
			sdktrace.WithSpanProcessor(mustSpanProcessor(mustRecorder())))
		run(b, tp)
	})
}

type noopProcessor struct{}

func (noopProcessor) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (noopProcessor) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (noopProcessor) Shutdown(context.Context) error                  { return nil }
func (noopProcessor) ForceFlush(context.Context) error                { return nil }

// BenchmarkSpanOverhead interleaves chunks of BenchmarkSpan's workload
// with and without the processor, so that both see the same machine
// load, and reports the processor's cost per span (OnStart + OnEnd,
// including the SDK's work on the attributes it adds) as overhead-ns/span.
// A third provider, interleaved too, has a processor that only sets the
// same constant attributes: attrs-ns/span is what the SDK's storing of
// them costs, the part of the overhead no change to the processor's code
// can remove while the spans carry their tenant.
func BenchmarkSpanOverhead(b *testing.B) {
	ctx := tenant.With(context.Background(), tenant.Tags{Tenant: "acme", Route: "GET /reports", Tier: tenant.T2})
	base := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(noopProcessor{})).Tracer("bench")
	with := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(noopProcessor{}),
		sdktrace.WithSpanProcessor(mustSpanProcessor(mustRecorder()))).Tracer("bench")
	attrs := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(noopProcessor{}),
		sdktrace.WithSpanProcessor(attrsProcessor{})).Tracer("bench")
	chunk := func(tr trace.Tracer) time.Duration {
		start := time.Now()
		for range 64 {
			sctx, s := tr.Start(ctx, "GET /reports/{id}", trace.WithSpanKind(trace.SpanKindServer),
				trace.WithAttributes(attribute.String("http.request.method", "GET"), attribute.String("http.route", "/reports/{id}")))
			_, d := tr.Start(sctx, "SELECT reports", trace.WithSpanKind(trace.SpanKindClient),
				trace.WithAttributes(attribute.String("db.system.name", "postgresql"), attribute.String("db.query.text", "SELECT * FROM reports WHERE id = $1")))
			s.SetAttributes(attribute.Int("http.response.status_code", 200))
			d.End()
			s.End()
		}
		return time.Since(start)
	}
	var tb, tw, ta time.Duration
	n := 0
	for b.Loop() {
		tb += chunk(base)
		tw += chunk(with)
		ta += chunk(attrs)
		n += 64
	}
	b.ReportMetric(float64(tw-tb)/float64(2*n), "overhead-ns/span")
	b.ReportMetric(float64(ta-tb)/float64(2*n), "attrs-ns/span")
	b.ReportMetric(float64(tb)/float64(2*n), "sdk-ns/span")
}

// attrsProcessor sets the attributes SpanProcessor sets on the benchmark's
// spans, as constants, and does nothing else.
type attrsProcessor struct{ noopProcessor }

var benchAttrs = []attribute.KeyValue{AttrTenant.String("acme"), AttrTier.String("T2"), AttrRoute.String("GET /reports")}

func (attrsProcessor) OnStart(_ context.Context, s sdktrace.ReadWriteSpan) {
	if s.SpanKind() == trace.SpanKindClient {
		s.SetAttributes(benchAttrs...)
	} else {
		s.SetAttributes(benchAttrs[:2]...)
	}
}

// BenchmarkSpanOnEnd measures OnEnd alone on the two finished spans of
// BenchmarkSpan (a server span and its database child): reading their
// attributes and recording them.
func BenchmarkSpanOnEnd(b *testing.B) {
	ctx := tenant.With(context.Background(), tenant.Tags{Tenant: "acme", Route: "GET /reports", Tier: tenant.T2})
	var ended endedSpans
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(mustSpanProcessor(mustRecorder())), sdktrace.WithSpanProcessor(&ended))
	tr := tp.Tracer("bench")
	sctx, s := tr.Start(ctx, "GET /reports/{id}", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.request.method", "GET"), attribute.String("http.route", "/reports/{id}")))
	_, d := tr.Start(sctx, "SELECT reports", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("db.system.name", "postgresql"), attribute.String("db.query.text", "SELECT * FROM reports WHERE id = $1")))
	s.SetAttributes(attribute.Int("http.response.status_code", 200))
	d.End()
	s.End()
	p := mustSpanProcessor(mustRecorder())
	b.ReportAllocs()
	for b.Loop() {
		p.OnEnd(ended[0])
		p.OnEnd(ended[1])
	}
}

type endedSpans []sdktrace.ReadOnlySpan

func (e *endedSpans) OnEnd(s sdktrace.ReadOnlySpan)                 { *e = append(*e, s) }
func (*endedSpans) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (*endedSpans) Shutdown(context.Context) error                  { return nil }
func (*endedSpans) ForceFlush(context.Context) error                { return nil }

func TestNewSpanProcessorNilRecorder(t *testing.T) {
	if p, err := NewSpanProcessor(nil, WithDBSpans(false)); !errors.Is(err, meter.ErrInvalid) || p != nil {
		t.Errorf("NewSpanProcessor(nil) = %v, %v; want meter.ErrInvalid", p, err)
	}
}

func TestSpanProcessorWithoutRequestSpans(t *testing.T) {
	rec := mustRecorder(fixedClock(t0))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(mustSpanProcessor(rec, WithRequestSpans(false))))
	defer tp.Shutdown(context.Background())
	ctx := tenant.With(context.Background(), tenant.Tags{Tenant: "acme"})
	_, s := tp.Tracer("t").Start(ctx, "GET /x", trace.WithSpanKind(trace.SpanKindServer))
	s.End()
	_, c := tp.Tracer("t").Start(ctx, "job", trace.WithSpanKind(trace.SpanKindConsumer))
	c.End()
	got := rowsByKey(rec.Cut(t0.Add(time.Second)))
	if len(got) != 1 || got["acme|job|job"].Count != 1 {
		t.Errorf("rows %v, want only the consumer span", got)
	}
}
