package otlpin

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	otelattr "go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// The Go SDK's exporter retries what the receiver says to retry (503 +
// Retry-After while every decode slot is taken) and gives up at once on
// what it must not retry (401): each step counts the requests the
// receiver saw, not time.
func TestExporterRetriesOnlyWhatItShould(t *testing.T) {
	clk := &fakeClock{now: t0}
	s := &sink{}
	r := newTestReceiver(t, s, clk, WithAuth(func(a string) bool { return a == "Bearer k" }))
	var seen atomic.Int64
	var freed atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if seen.Add(1) == 1 {
			// The first attempt finds every slot taken; free them for the retry.
			for range cap(r.sem) {
				r.sem <- struct{}{}
			}
			r.ServeHTTP(w, req)
			for range cap(r.sem) {
				<-r.sem
			}
			freed.Store(true)
			return
		}
		r.ServeHTTP(w, req)
	}))
	defer srv.Close()

	export := func(token string) error {
		exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(srv.URL+PathTraces),
			otlptracehttp.WithHeaders(map[string]string{"Authorization": "Bearer " + token}),
			otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: true, InitialInterval: 10 * time.Millisecond,
				MaxInterval: 2 * time.Second, MaxElapsedTime: 30 * time.Second}))
		if err != nil {
			t.Fatal(err)
		}
		spans := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans),
			sdktrace.WithResource(resource.NewSchemaless(otelattr.String("service.name", "go-sdk"))))
		_, span := tp.Tracer("t").Start(context.Background(), "GET /x", trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(otelattr.String("tenant.id", "acme"), otelattr.String("http.route", "/x")))
		span.End()
		defer exp.Shutdown(context.Background())
		return exp.ExportSpans(context.Background(), spans.Ended())
	}
	if err := export("k"); err != nil {
		t.Fatalf("export after a 503: %v", err)
	}
	if n := seen.Load(); n != 2 || !freed.Load() {
		t.Fatalf("requests %d, want 2 (503, then the retry)", n)
	}
	r.Flush(clk.now)
	if v := s.rows()[rowKey{"go-sdk", "acme", "/x", "request"}]; v.count != 1 {
		t.Fatalf("rows %v", keysOf(s.rows()))
	}
	seen.Store(10) // past the first-request branch
	if err := export("wrong"); err == nil {
		t.Fatal("export with a wrong token succeeded")
	}
	if n := seen.Load() - 10; n != 1 {
		t.Fatalf("401 retried: %d requests", n)
	}
}
