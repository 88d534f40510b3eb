package collector

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/internal/otlpin"
	"github.com/qtop-dev/qtop/store"
)

func otlpAttr(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

// otlpRequest makes an export request of n spans of service svc at start:
// per trace a SERVER span of tenant (tenant-i%tenants) and two PostgreSQL
// CLIENT spans without a tenant, each attribute set as an SDK sets it.
func otlpRequest(svc string, n, tenants int, start time.Time, traceBase uint64) *coltracepb.ExportTraceServiceRequest {
	spans := make([]*tracepb.Span, 0, n)
	for i := 0; len(spans) < n; i++ {
		tid := make([]byte, 16)
		tid[0] = 1
		for b, v := 0, traceBase+uint64(i); b < 8; b, v = b+1, v>>8 {
			tid[15-b] = byte(v)
		}
		root := []byte{1, 2, 3, 4, 5, 6, 7, byte(i)}
		ts := uint64(start.UnixNano())
		spans = append(spans, &tracepb.Span{
			TraceId: tid, SpanId: root, Name: "GET /items/:id", Kind: tracepb.Span_SPAN_KIND_SERVER,
			StartTimeUnixNano: ts, EndTimeUnixNano: ts + uint64(20*time.Millisecond),
			Attributes: []*commonpb.KeyValue{
				otlpAttr("tenant.id", fmt.Sprintf("tenant-%d", i%tenants)), otlpAttr("tenant.tier", "T2"),
				otlpAttr("http.route", "/items/:id"), otlpAttr("http.request.method", "GET"),
				otlpAttr("url.scheme", "http"), otlpAttr("server.address", "127.0.0.1"),
				otlpAttr("user_agent.original", "load/1.0"), otlpAttr("network.protocol.version", "1.1"),
				{Key: "http.response.status_code", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: 200}}},
			},
		})
		for j := 0; j < 2 && len(spans) < n; j++ {
			spans = append(spans, &tracepb.Span{
				TraceId: tid, SpanId: []byte{9, 9, 9, 9, 9, 9, byte(j), byte(i)}, ParentSpanId: root,
				Name: "pg.query:SELECT shop", Kind: tracepb.Span_SPAN_KIND_CLIENT,
				StartTimeUnixNano: ts + uint64(time.Duration(1+6*j)*time.Millisecond), EndTimeUnixNano: ts + uint64(time.Duration(6+6*j)*time.Millisecond), // one after the other
				Attributes: []*commonpb.KeyValue{
					otlpAttr("db.system", "postgresql"), otlpAttr("db.name", "shop"), otlpAttr("db.user", "app"),
					otlpAttr("db.statement", "SELECT id, name, price FROM items WHERE id = $1"),
					otlpAttr("net.peer.name", "127.0.0.1"), otlpAttr("db.connection_string", "postgresql://127.0.0.1:5432/shop"),
				},
			})
		}
	}
	return &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{
			otlpAttr("service.name", svc), otlpAttr("service.instance.id", "inst-1"), otlpAttr("host.name", "pod-1"),
			otlpAttr("telemetry.sdk.language", "nodejs"), otlpAttr("telemetry.sdk.version", "1.30.0")}},
		ScopeSpans: []*tracepb.ScopeSpans{{Scope: &commonpb.InstrumentationScope{Name: "@opentelemetry/instrumentation-http"}, Spans: spans}},
	}}}
}

func postTraces(t testing.TB, h http.Handler, body []byte, token string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, otlpin.PathTraces, bytes.NewReader(body))
	req.Header.Set("Content-Type", otlpin.ContentTypeProtobuf)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

// OTLP spans reach the live view, the store and the collector's own
// metrics through the same merge as reports, behind the same credential.
func TestOTLPThroughIngest(t *testing.T) {
	clk := &clock{t: t0}
	ms := newMemStore()
	reg := prometheus.NewRegistry()
	s, err := New(Config{Store: "duckdb://unused.duckdb", OpenStore: func(string) (store.Store, error) { return ms, nil },
		DataDir: t.TempDir(), Writer: "w", Token: "tok", Registerer: reg, Now: clk.Now, Listen: "127.0.0.1:0",
		OTLPConfig: OTLPConfig{OTLPGRPC: "127.0.0.1:0"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	h := s.Handler()
	body, _ := proto.Marshal(otlpRequest("shop", 30, 2, t0, 1)) // 10 traces
	if w := postTraces(t, h, body, ""); w.Code != http.StatusUnauthorized {
		t.Fatalf("no token: %d", w.Code)
	}
	if w := postTraces(t, h, body, "wrong"); w.Code != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", w.Code)
	}
	if w := postTraces(t, h, body, "tok"); w.Code != http.StatusOK {
		t.Fatalf("status %d: %s", w.Code, w.Body.String())
	}
	// gRPC on --otlp-grpc, with the same token.
	cc, err := grpc.NewClient(s.OTLPGRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	client := coltracepb.NewTraceServiceClient(cc)
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer tok")
	if _, err := client.Export(ctx, otlpRequest("shop-grpc", 3, 1, t0, 100)); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Export(t.Context(), otlpRequest("shop-grpc", 3, 1, t0, 200)); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("grpc without token: %v", err)
	}
	s.otlp.recv.Flush(clk.Now())

	snap := s.Snapshot(clk.Add(time.Second), api.MeasureDB, 10)
	got := map[string]float64{}
	for _, r := range snap.Tenants {
		got[r.Tenant] = r.ReqPerSec * snap.Window.Seconds()
	}
	if got["tenant-0"] != 6 || got["tenant-1"] != 5 {
		t.Fatalf("live requests %v", got)
	}
	if v := counterValue(s.met.accepted); v != 2 {
		t.Fatalf("reports accepted %v, want 2 (one per OTLP source)", v)
	}
	// Shutdown merges and writes everything.
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	us, err := ms.Usage(context.Background(), t0.Add(-time.Hour), t0.Add(time.Hour), false)
	if err != nil {
		t.Fatal(err)
	}
	db := map[string]float64{}
	reqs := map[string]uint64{}
	for _, u := range us {
		db[u.Tenant] += u.DBSeconds
		reqs[u.Tenant] += u.Requests
	}
	if reqs["tenant-0"] != 6 || reqs["tenant-1"] != 5 || !closeTo(db["tenant-0"], 0.060) || !closeTo(db["tenant-1"], 0.050) {
		t.Fatalf("store: requests %v, db %v", reqs, db)
	}
}

func closeTo(a, b float64) bool { return a > b-1e-9 && a < b+1e-9 }

// OTLP exports are refused before they are read while the data
// directory's free space is below the reserve, over HTTP (503 with
// Retry-After) and gRPC (UNAVAILABLE), as reports are: an export answered
// 200 must reach the write-ahead log. Once space is back they are taken.
func TestOTLPRefusedBelowDiskReserve(t *testing.T) {
	clk := &clock{t: t0}
	ms := newMemStore()
	s, err := New(Config{Store: "duckdb://unused.duckdb", OpenStore: func(string) (store.Store, error) { return ms, nil },
		DataDir: t.TempDir(), Writer: "w", Token: "tok", Registerer: prometheus.NewRegistry(), Now: clk.Now,
		Listen: "127.0.0.1:0", IntakeConfig: IntakeConfig{DiskReserve: 1 << 30}, OTLPConfig: OTLPConfig{OTLPGRPC: "127.0.0.1:0"}})
	if err != nil {
		t.Fatal(err)
	}
	var free atomic.Int64
	free.Store(100 << 20) // below the 1 GiB reserve
	s.disk.free = func(string) (int64, error) { return free.Load(), nil }
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	h := s.Handler()
	body, _ := proto.Marshal(otlpRequest("shop", 30, 2, t0, 1))
	w := postTraces(t, h, body, "tok")
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" || !strings.Contains(w.Body.String(), "reserve") {
		t.Fatalf("below the reserve: %d %q (Retry-After %q), want 503 naming the reserve", w.Code, w.Body.String(), w.Header().Get("Retry-After"))
	}
	cc, err := grpc.NewClient(s.OTLPGRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	client := coltracepb.NewTraceServiceClient(cc)
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer tok")
	if _, err := client.Export(ctx, otlpRequest("shop-grpc", 3, 1, t0, 100)); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "reserve") {
		t.Fatalf("gRPC below the reserve: %v, want UNAVAILABLE naming the reserve", err)
	}
	free.Store(4 << 30)
	s.disk.look()
	if w := postTraces(t, h, body, "tok"); w.Code != http.StatusOK {
		t.Fatalf("space back: %d %s", w.Code, w.Body.String())
	}
	if _, err := client.Export(ctx, otlpRequest("shop-grpc", 3, 1, t0, 100)); err != nil {
		t.Fatalf("gRPC with space back: %v", err)
	}
}
