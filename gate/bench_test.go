package gate_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/agent"
	"github.com/qtop-dev/qtop/enforce"
	"github.com/qtop-dev/qtop/gate"
)

// benchUpstream serves 256 bytes of JSON on loopback, like bench/gateload's.
func benchUpstream(b *testing.B) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	body := []byte(strings.Repeat("x", 256))
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	})}
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// benchGate runs a gate in front of up whose one plan never refuses.
func benchGate(b *testing.B, up string, cfg gate.Config) string {
	b.Helper()
	u, _ := url.Parse(up)
	cfg.Upstream = u
	plans := map[string]enforce.Plan{"bench": {Limit: enforce.Limit{RUPerSecond: 1e9, Burst: 1e9}, Weight: 1}}
	a, err := agent.New(agent.WithService("bench"), agent.WithTenant(agent.FromHeader("X-Tenant", "X-Tier")),
		agent.WithPlans(plans, func(string) string { return "bench" }), agent.WithInterval(time.Hour))
	if err != nil {
		b.Fatal(err)
	}
	g, err := gate.New(a, cfg)
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() { g.Serve(ln); close(done) }()
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		g.Shutdown(ctx)
		<-done
	})
	return ln.Addr().String()
}

// drive sends b.N requests one after the other on one keep-alive
// connection to addr, as bench/gateload's workers do.
func drive(b *testing.B, addr string) {
	b.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	req := []byte("GET /item/42 HTTP/1.1\r\nHost: " + addr + "\r\nX-Tenant: acme\r\nX-Tier: T1\r\nUser-Agent: bench\r\n\r\n")
	br := bufio.NewReaderSize(c, 4096)
	one := func() {
		if _, err := c.Write(req); err != nil {
			b.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
	for range 100 { // warm the connections and pools
		one()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		one()
	}
}

// BenchmarkDirect is the upstream alone, the baseline of BenchmarkGate:
// the gate's own cost per request is the difference.
func BenchmarkDirect(b *testing.B) {
	drive(b, strings.TrimPrefix(benchUpstream(b), "http://"))
}

// BenchmarkGate is a GET through the gate (tenant, admission, charge,
// record, proxy) to a loopback upstream, whole round trips.
func BenchmarkGate(b *testing.B) {
	drive(b, benchGate(b, benchUpstream(b), gate.Config{}))
}

// BenchmarkGateStdTransport is BenchmarkGate with net/http's Transport
// upstream (Config.StdTransport).
func BenchmarkGateStdTransport(b *testing.B) {
	drive(b, benchGate(b, benchUpstream(b), gate.Config{StdTransport: true}))
}

// BenchmarkGateStdServer is BenchmarkGate with net/http's server in front
// (Config.StdServer).
func BenchmarkGateStdServer(b *testing.B) {
	drive(b, benchGate(b, benchUpstream(b), gate.Config{StdServer: true}))
}
