package otlpin_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/qtop-dev/qtop/internal/otlpin"
	"github.com/qtop-dev/qtop/report"
)

func attr(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

// A receiver behind POST /v1/traces merges what an SDK sends as reports;
// here the sink prints them. The database span carries no tenant: it gets
// its trace's, from the server span.
func Example() {
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	sink := report.ConsumerFunc(func(_ context.Context, rep *report.Report, _ []byte) (report.Reply, error) {
		for _, r := range rep.Rows {
			fmt.Printf("%s %s %s %q %d %v\n", rep.Source.Service, r.Kind, r.Tenant, r.Route, r.Count, r.Duration)
		}
		return report.Reply{Accepted: true}, nil
	})
	recv, err := otlpin.New(sink, otlpin.WithClock(func() time.Time { return now }))
	if err != nil {
		panic(err)
	}
	defer recv.Shutdown(context.Background())

	trace := []byte("0123456789abcdef")
	start := uint64(now.UnixNano())
	req := &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{attr("service.name", "billing")}},
		ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{
			{TraceId: trace, SpanId: []byte("span0001"), Name: "GET", Kind: tracepb.Span_SPAN_KIND_SERVER,
				StartTimeUnixNano: start, EndTimeUnixNano: start + 30e6,
				Attributes: []*commonpb.KeyValue{attr("tenant.id", "acme"), attr("http.route", "/invoices/{id}")}},
			{TraceId: trace, SpanId: []byte("span0002"), ParentSpanId: []byte("span0001"), Name: "SELECT", Kind: tracepb.Span_SPAN_KIND_CLIENT,
				StartTimeUnixNano: start + 1e6, EndTimeUnixNano: start + 21e6,
				Attributes: []*commonpb.KeyValue{attr("db.system.name", "postgresql"), attr("db.query.text", "SELECT * FROM invoices WHERE id = $1")}},
		}}},
	}}}
	body, _ := proto.Marshal(req)
	hr := httptest.NewRequest(http.MethodPost, otlpin.PathTraces, bytes.NewReader(body))
	hr.Header.Set("Content-Type", otlpin.ContentTypeProtobuf)
	w := httptest.NewRecorder()
	recv.ServeHTTP(w, hr)
	fmt.Println(w.Code)
	recv.Flush(now.Add(time.Second))
	// Unordered output:
	// 200
	// billing request acme "/invoices/{id}" 1 30ms
	// billing db acme "SELECT invoices" 1 20ms
}
