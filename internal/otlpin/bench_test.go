package otlpin

import (
	"fmt"
	"testing"
	"time"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
)

// benchBody is 1,000 spans as an SDK sends them: per trace a SERVER span
// with nine attributes and two PostgreSQL CLIENT spans with six, without a
// tenant (taken from the trace).
func benchBody(b *testing.B) []byte {
	var spans []spanSpec
	for i := uint64(1); len(spans) < 1000; i++ {
		srv := server(i, fmt.Sprintf("tenant-%d", i%50), "/items/:id", 20*time.Millisecond)
		srv.attrs = append(srv.attrs, str("tenant.tier", "T2"), str("http.request.method", "GET"), str("url.scheme", "http"),
			str("server.address", "127.0.0.1"), str("user_agent.original", "load/1.0"), str("network.protocol.version", "1.1"))
		spans = append(spans, srv)
		for j := uint64(2); j <= 3 && len(spans) < 1000; j++ {
			spans = append(spans, pgSpan(i, j, "SELECT id, name, price FROM items WHERE id = $1", 5*time.Millisecond,
				str("db.name", "shop"), str("db.user", "app"), str("net.peer.name", "127.0.0.1"),
				&commonpb.KeyValue{Key: "net.peer.port", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: 5432}}}))
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
