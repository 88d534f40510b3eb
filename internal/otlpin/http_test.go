package otlpin

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	grpcgzip "google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

func post(t *testing.T, h http.Handler, ct, enc string, body []byte, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, PathTraces, bytes.NewReader(body))
	req.Header.Set("Content-Type", ct)
	if enc != "" {
		req.Header.Set("Content-Encoding", enc)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

func gz(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

func TestHTTPProtocol(t *testing.T) {
	clk := &fakeClock{now: t0}
	s := &sink{}
	r := newTestReceiver(t, s, clk, WithMaxBody(1<<20, 4<<20), WithAuth(func(a string) bool { return a == "Bearer k" }))
	auth := []string{"Authorization", "Bearer k"}
	good := marshal(t, request("api", server(1, "acme", "/a", time.Millisecond)))
	bad := server(2, "acme", "/a", time.Millisecond)
	bad.start = time.Time{}
	partial := marshal(t, request("api", server(3, "acme", "/a", time.Millisecond), bad))

	// protobuf, plain and gzip: 200 with an empty response.
	for _, enc := range []string{"", "gzip"} {
		body := good
		if enc == "gzip" {
			body = gz(good)
		}
		w := post(t, r, ContentTypeProtobuf, enc, body, auth...)
		var resp coltracepb.ExportTraceServiceResponse
		if w.Code != 200 || w.Header().Get("Content-Type") != ContentTypeProtobuf || proto.Unmarshal(w.Body.Bytes(), &resp) != nil || resp.PartialSuccess != nil {
			t.Fatalf("%q: %d %q %x", enc, w.Code, w.Header().Get("Content-Type"), w.Body.Bytes())
		}
	}
	// Partial success: 200, rejected_spans, not an error.
	w := post(t, r, ContentTypeProtobuf, "", partial, auth...)
	var resp coltracepb.ExportTraceServiceResponse
	if w.Code != 200 || proto.Unmarshal(w.Body.Bytes(), &resp) != nil || resp.GetPartialSuccess().GetRejectedSpans() != 1 || resp.GetPartialSuccess().GetErrorMessage() == "" {
		t.Fatalf("partial: %d %v", w.Code, &resp)
	}
	// JSON with hex ids, answered in JSON.
	js := `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"web"}}]},
	  "scopeSpans":[{"spans":[
	    {"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174","name":"GET","kind":2,
	     "startTimeUnixNano":"1772442000000000000","endTimeUnixNano":"1772442000040000000",
	     "attributes":[{"key":"tenant.id","value":{"stringValue":"json-co"}},{"key":"http.route","value":{"stringValue":"/j"}}]},
	    {"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b175","parentSpanId":"eee19b7ec3c1b174","name":"q","kind":"SPAN_KIND_CLIENT",
	     "startTimeUnixNano":"1772442000000000000","endTimeUnixNano":"1772442000010000000",
	     "attributes":[{"key":"db.system.name","value":{"stringValue":"postgresql"}},{"key":"db.query.text","value":{"stringValue":"SELECT 1 FROM t"}}]}]}]}]}`
	w = post(t, r, "application/json; charset=utf-8", "gzip", gz([]byte(js)), auth...)
	if w.Code != 200 || w.Header().Get("Content-Type") != ContentTypeJSON || strings.TrimSpace(w.Body.String()) != "{}" {
		t.Fatalf("json: %d %q %s", w.Code, w.Header().Get("Content-Type"), w.Body.String())
	}
	r.Flush(clk.now)
	if got := s.rows(); got[rowKey{"web", "json-co", "/j", "request"}].dur != 40*time.Millisecond || got[rowKey{"web", "json-co", "SELECT t", "db"}].count != 1 {
		t.Fatalf("json rows %v", keysOf(got))
	}
	if id, _ := toTraceID(mustHex("5b8efff798038103d269b633813fc60c")); r.traces.m[id].tenant != "json-co" {
		t.Fatal("json trace id not read as hex")
	}

	// Refusals: each with its status, a google.rpc.Status body in the
	// request's encoding, and Retry-After only where a retry helps.
	bomb := gz(bytes.Repeat([]byte{0}, 8<<20)) // 8 MiB of zeros in a few KiB
	cases := []struct {
		name, ct, enc string
		body          []byte
		hdr           []string
		code          int
		retry         bool
	}{
		{"no token", ContentTypeProtobuf, "", good, nil, 401, false},
		{"wrong token", ContentTypeProtobuf, "", good, []string{"Authorization", "Bearer x"}, 401, false},
		{"malformed", ContentTypeProtobuf, "", []byte{0x0a, 0xff}, auth, 400, false},
		{"malformed json", ContentTypeJSON, "", []byte(`{"resourceSpans":5}`), auth, 400, false},
		{"bad hex id", ContentTypeJSON, "", []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"zz"}]}]}]}`), auth, 400, false},
		{"bad gzip", ContentTypeProtobuf, "gzip", []byte("not gzip"), auth, 400, false},
		{"gzip bomb", ContentTypeProtobuf, "gzip", bomb, auth, 413, false},
		{"too large", ContentTypeProtobuf, "", make([]byte, 2<<20), auth, 413, false},
		{"json too large", ContentTypeJSON, "gzip", gz(bytes.Repeat([]byte(" "), 1<<20+1)), auth, 413, false},
		{"encoding", ContentTypeProtobuf, "br", good, auth, 415, false},
	}
	for _, c := range cases {
		w := post(t, r, c.ct, c.enc, c.body, c.hdr...)
		var st spb.Status
		var err error
		if c.ct == ContentTypeJSON {
			err = protojsonUnmarshal(w.Body.Bytes(), &st)
		} else {
			err = proto.Unmarshal(w.Body.Bytes(), &st)
		}
		if w.Code != c.code || err != nil || st.Message == "" || (w.Header().Get("Retry-After") != "") != c.retry {
			t.Errorf("%s: %d (want %d) %v %q retry %q", c.name, w.Code, c.code, err, st.Message, w.Header().Get("Retry-After"))
		}
	}
	// A body that is not gzip (with a small ISIZE, so it is read, not
	// refused for its size) says so once, in the words of the reader.
	w = post(t, r, ContentTypeProtobuf, "gzip", []byte("this body is not gzip at all\x00\x00\x00\x00"), auth...)
	var badZip spb.Status
	if err := proto.Unmarshal(w.Body.Bytes(), &badZip); err != nil || w.Code != 400 ||
		strings.Count(badZip.Message, "gzip:") != 1 || !strings.Contains(badZip.Message, "invalid header") {
		t.Errorf("bad gzip: %d %v %q, want 400 and one \"gzip: invalid header\"", w.Code, err, badZip.Message)
	}
	if w := post(t, r, "text/plain", "", good, auth...); w.Code != http.StatusUnsupportedMediaType {
		t.Errorf("text/plain: %d", w.Code)
	}
	req := httptest.NewRequest(http.MethodGet, PathTraces, nil)
	rw := httptest.NewRecorder()
	r.ServeHTTP(rw, req)
	if rw.Code != http.StatusMethodNotAllowed || rw.Header().Get("Allow") != "POST" {
		t.Errorf("GET: %d", rw.Code)
	}
	// Busy: all decode slots taken → 503 + Retry-After.
	for range cap(r.sem) {
		r.sem <- struct{}{}
	}
	w = post(t, r, ContentTypeProtobuf, "", good, auth...)
	if w.Code != 503 || w.Header().Get("Retry-After") != "1" {
		t.Errorf("busy: %d %q", w.Code, w.Header().Get("Retry-After"))
	}
	for range cap(r.sem) {
		<-r.sem
	}
}

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

func TestGRPC(t *testing.T) {
	clk := &fakeClock{now: t0}
	s := &sink{}
	r := newTestReceiver(t, s, clk, WithAuth(func(a string) bool { return a == "Bearer k" }))
	gs := grpc.NewServer(r.GRPCServerOptions()...)
	r.RegisterGRPC(gs)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(ln)
	defer gs.Stop()
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	client := coltracepb.NewTraceServiceClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	authed := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer k")

	bad := server(2, "acme", "/g", time.Millisecond)
	bad.start = time.Time{}
	resp, err := client.Export(authed, request("grpc-svc", server(1, "acme", "/g", 3*time.Millisecond), bad), grpc.UseCompressor(grpcgzip.Name))
	if err != nil || resp.GetPartialSuccess().GetRejectedSpans() != 1 {
		t.Fatalf("export: %v %v", resp, err)
	}
	if _, err := client.Export(ctx, request("grpc-svc")); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("no token: %v", err)
	}
	for range cap(r.sem) {
		r.sem <- struct{}{}
	}
	_, err = client.Export(authed, request("grpc-svc", server(3, "acme", "/g", time.Millisecond)))
	for range cap(r.sem) {
		<-r.sem
	}
	st := status.Convert(err)
	if st.Code() != codes.Unavailable || len(st.Details()) != 1 {
		t.Fatalf("busy: %v", err)
	}
	if ri, ok := st.Details()[0].(*errdetails.RetryInfo); !ok || ri.RetryDelay.AsDuration() != retrySlots {
		t.Fatalf("busy details %v", st.Details())
	}
	// A malformed message: INVALID_ARGUMENT (not retried), through a raw
	// call so the client's codec does not check it first.
	var out coltracepb.ExportTraceServiceResponse
	err = cc.Invoke(authed, coltracepb.TraceService_Export_FullMethodName, rawRequest{0x0a, 0xff}, &out, grpc.ForceCodec(rawCodec{}))
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("malformed: %v", err)
	}
	r.Flush(clk.now)
	if v := s.rows()[rowKey{"grpc-svc", "acme", "/g", "request"}]; v.count != 1 || v.dur != 3*time.Millisecond {
		t.Fatalf("rows %v", keysOf(s.rows()))
	}
}

func protojsonUnmarshal(b []byte, m proto.Message) error { return protojson.Unmarshal(b, m) }
