package collector

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// chanListener hands out the conns sent to it.
type chanListener struct {
	conns chan net.Conn
}

func (l chanListener) Accept() (net.Conn, error) {
	c, ok := <-l.conns
	if !ok {
		return nil, net.ErrClosed
	}
	return c, nil
}
func (l chanListener) Close() error   { return nil }
func (l chanListener) Addr() net.Addr { return &net.TCPAddr{} }

// TestCapListener: past its bound a listener closes a connection at once
// (never leaves it waiting) and counts it; the warning is logged once a
// minute with the refusals since the last one; a closed connection gives
// its slot back, once however often it is closed.
func TestCapListener(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := newConnMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	clk := &clock{t: t0}
	src := chanListener{conns: make(chan net.Conn)}
	l := limitConns(src, 2, "otlp", "otlp grpc", "raise --otlp-grpc-max-conns", m, log, clk.Now)
	pipe := net.Pipe
	accepted := make(chan net.Conn, 1)
	accept := func(conns ...net.Conn) {
		go func() {
			c, err := l.Accept()
			if err != nil {
				t.Error(err)
			}
			accepted <- c
		}()
		for _, c := range conns {
			src.conns <- c
		}
	}
	s1, _ := pipe()
	accept(s1)
	a1 := <-accepted
	s2, _ := pipe()
	accept(s2)
	a2 := <-accepted
	if got := testutil.ToFloat64(m.open.WithLabelValues("otlp")); got != 2 {
		t.Fatalf("open %v, want 2", got)
	}

	// Full: the next two are closed at once (their clients read EOF),
	// the warning is logged once; a fourth is taken when a slot is free.
	s3, c3 := pipe()
	s4, c4 := pipe()
	s5, _ := pipe()
	accept(s3, s4)
	for _, c := range []net.Conn{c3, c4} {
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatal("a connection beyond the bound was served")
		}
	}
	if got := testutil.ToFloat64(m.refused.WithLabelValues("otlp")); got != 2 {
		t.Fatalf("refused %v, want 2", got)
	}
	if n := strings.Count(logs.String(), "connection refused"); n != 1 || !strings.Contains(logs.String(), "max=2 refused=1") ||
		!strings.Contains(logs.String(), "raise --otlp-grpc-max-conns") {
		t.Fatalf("logs:\n%s", logs.String())
	}
	a1.Close()
	a1.Close() // gRPC may close twice: one slot back
	src.conns <- s5
	a5 := <-accepted
	if got := testutil.ToFloat64(m.open.WithLabelValues("otlp")); got != 2 {
		t.Fatalf("open %v after a close and an accept, want 2", got)
	}

	// A minute on, the next refusal logs again with the count since.
	clk.Add(connWarnEvery)
	s6, c6 := pipe()
	s7, _ := pipe()
	accept(s6)
	if _, err := c6.Read(make([]byte, 1)); err == nil {
		t.Fatal("a connection beyond the bound was served")
	}
	if n := strings.Count(logs.String(), "connection refused"); n != 2 || !strings.Contains(logs.String(), "max=2 refused=2") {
		t.Fatalf("logs:\n%s", logs.String())
	}
	a2.Close()
	src.conns <- s7
	a7 := <-accepted
	a5.Close()
	a7.Close()
	if got := testutil.ToFloat64(m.open.WithLabelValues("otlp")); got != 0 {
		t.Fatalf("open %v after every close, want 0", got)
	}
}

// TestOTLPGRPCBeyondMaxConns: an exporter beyond --otlp-grpc-max-conns
// is answered UNAVAILABLE at once, not left waiting while the others stay
// connected (before, it timed out on every export, unseen); one within
// the bound exports.
func TestOTLPGRPCBeyondMaxConns(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, err := New(Config{Store: StoreNone, DataDir: t.TempDir(), Registerer: reg, Listen: "127.0.0.1:0",
		OTLPConfig: OTLPConfig{OTLPGRPC: "127.0.0.1:0", OTLPGRPCMaxConns: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	export := func() (*grpc.ClientConn, error) {
		cc, err := grpc.NewClient(s.OTLPGRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		_, err = coltracepb.NewTraceServiceClient(cc).Export(t.Context(), otlpRequest("svc", 3, 1, time.Now(), 1))
		return cc, err
	}
	for range 2 {
		cc, err := export()
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
	}
	cc, err := export()
	defer cc.Close()
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("a third exporter: %v, want UNAVAILABLE", err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	refused := 0.0
	for _, mf := range mfs {
		if mf.GetName() == "qtop_collector_grpc_connections_refused_total" {
			refused = mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	if refused < 1 {
		t.Fatalf("refused connections counted: %v", refused)
	}
}
