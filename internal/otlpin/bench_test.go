package otlpin

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
)

// benchBody is 1,000 spans as an SDK sends them: per trace a SERVER span
// with nine attributes and two PostgreSQL CLIENT spans with six, without a
// tenant (taken from the trace).
func benchBody(b *testing.B) []byte { return benchSpans(b, 1000) }

// benchSpans is n spans as benchBody makes them.
func benchSpans(b testing.TB, n int) []byte {
	var spans []spanSpec
	for i := uint64(1); len(spans) < n; i++ {
		srv := server(i, fmt.Sprintf("tenant-%d", i%50), "/items/:id", 20*time.Millisecond)
		srv.attrs = append(srv.attrs, str("tenant.tier", "T2"), str("http.request.method", "GET"), str("url.scheme", "http"),
			str("server.address", "127.0.0.1"), str("user_agent.original", "load/1.0"), str("network.protocol.version", "1.1"))
		spans = append(spans, srv)
		for j := uint64(2); j <= 3 && len(spans) < n; j++ {
			db := pgSpan(i, j, "SELECT id, name, price FROM items WHERE id = $1", 5*time.Millisecond,
				str("db.name", "shop"), str("db.user", "app"), str("net.peer.name", "127.0.0.1"),
				&commonpb.KeyValue{Key: "net.peer.port", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: 5432}}})
			db.start = db.start.Add(time.Duration(i*7919%1_000_000 + 1)) // to the nanosecond, as the Go, Java and Python SDKs send it
			spans = append(spans, db)
		}
	}
	return marshal(b, request("shop", spans...))
}

// BenchmarkConsume is the receiver's work per request of 1,000 spans:
// the wire walk, the mapping, the trace lookups and the records.
func BenchmarkConsume(b *testing.B) {
	clk := &fakeClock{now: t0}
	s := &sink{}
	r, err := New(s, WithClock(clk.Now))
	if err != nil {
		b.Fatal(err)
	}
	defer r.Shutdown(b.Context())
	body := benchBody(b)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if _, err := r.Consume(body); err != nil {
			b.Fatal(err)
		}
		if n++; n%100 == 0 {
			s.reports = s.reports[:0]
			r.Flush(clk.now)
		}
	}
	b.ReportMetric(float64(n*1000)/b.Elapsed().Seconds(), "spans/s")
}

// FuzzConsume: any body is either refused with an error or recorded; the
// receiver never panics and never records for an invalid tenant.
func FuzzConsume(f *testing.F) {
	f.Add(marshal(f, request("api", server(1, "acme", "/a", time.Millisecond), pgSpan(1, 2, "SELECT * FROM t /*tenant='x'*/", time.Millisecond))))
	f.Add([]byte{0x0a, 0x02, 0x12, 0x00})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		clk := &fakeClock{now: t0}
		s := &sink{}
		r, err := New(s, WithClock(clk.Now), WithTraceWait(0))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Shutdown(t.Context())
		if _, err := r.Consume(body); err != nil {
			return
		}
		r.Flush(clk.now)
		for k := range s.rows() {
			if len(k.tenant) > 128 || len(k.route) > 256 {
				t.Fatalf("unvalidated row %q", k)
			}
		}
	})
}

// BenchmarkExport is one exporter's requests of 100 spans (what the SDKs'
// batch span processors send by default at low rates) against 1,000, in
// process (Consume), over OTLP/HTTP (protobuf, a loopback server) and
// over OTLP/gRPC, with the once-a-second merge every 100,000 spans. The
// figure to compare is ns/span: the goal is 100-span requests within 2×
// of 1,000-span ones. The client's work (net/http, grpc-go) is in the
// figure too.
func BenchmarkExport(b *testing.B) {
	for _, n := range []int{100, 1000} {
		body := benchSpans(b, n)
		b.Run(fmt.Sprintf("inproc/%d", n), func(b *testing.B) {
			benchExport(b, n, body, func(r *Receiver) func() error {
				return func() error { _, err := r.Consume(body); return err }
			})
		})
		b.Run(fmt.Sprintf("http/%d", n), func(b *testing.B) {
			benchExport(b, n, body, func(r *Receiver) func() error { return httpExporter(b, r, body, "") })
		})
		b.Run(fmt.Sprintf("http-gzip/%d", n), func(b *testing.B) {
			z := gz(body)
			benchExport(b, n, body, func(r *Receiver) func() error { return httpExporter(b, r, z, "gzip") })
		})
		b.Run(fmt.Sprintf("grpc/%d", n), func(b *testing.B) {
			benchExport(b, n, body, func(r *Receiver) func() error { return grpcExporter(b, r, body) })
		})
	}
}

// benchExport runs export (made by mk for a new receiver) in a loop,
// flushing every 100,000 spans, and reports ns/span.
func benchExport(b *testing.B, n int, body []byte, mk func(*Receiver) func() error) {
	clk := &fakeClock{now: t0}
	s := &sink{}
	r, err := New(s, WithClock(clk.Now))
	if err != nil {
		b.Fatal(err)
	}
	defer r.Shutdown(b.Context())
	export := mk(r)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	spans := 0
	for b.Loop() {
		if err := export(); err != nil {
			b.Fatal(err)
		}
		if spans += n; spans%100_000 == 0 {
			s.mu.Lock()
			s.reports = s.reports[:0]
			s.mu.Unlock()
			r.Flush(clk.now)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(max(spans, 1)), "ns/span")
}

// httpExporter posts body to r over a loopback HTTP server, as
// otlptracehttp does (protobuf, keep-alive), with the Content-Encoding
// enc (the Collector's otlphttp exporter sends gzip).
func httpExporter(b *testing.B, r *Receiver, body []byte, enc string) func() error {
	srv := httptest.NewServer(r)
	b.Cleanup(srv.Close)
	c := srv.Client()
	return func() error {
		req, err := http.NewRequest(http.MethodPost, srv.URL+PathTraces, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", ContentTypeProtobuf)
		if enc != "" {
			req.Header.Set("Content-Encoding", enc)
		}
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
}

// grpcExporter exports body to r over a loopback gRPC server, as
// otlptracegrpc does (one connection, the message as is).
func grpcExporter(b *testing.B, r *Receiver, body []byte) func() error {
	gs := grpc.NewServer(r.GRPCServerOptions()...)
	r.RegisterGRPC(gs)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go gs.Serve(ln)
	b.Cleanup(gs.Stop)
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cc.Close() })
	return func() error {
		var out coltracepb.ExportTraceServiceResponse
		return cc.Invoke(b.Context(), coltracepb.TraceService_Export_FullMethodName, rawRequest(body), &out, grpc.ForceCodec(rawCodec{}))
	}
}

// BenchmarkGunzip is the decompression of a gzip body of 100 spans (the
// OpenTelemetry Collector's otlphttp exporter compresses by default),
// set-up included: what a compressed request costs beyond its bytes.
func BenchmarkGunzip(b *testing.B) {
	z := gz(benchSpans(b, 100))
	var buf bytes.Buffer
	b.SetBytes(int64(len(z)))
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		if err := gunzip(&buf, z, 64<<20, 64<<20); err != nil {
			b.Fatal(err)
		}
	}
}
