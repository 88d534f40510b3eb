package collector

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/qtop-dev/qtop/tlsfiles"
	"github.com/qtop-dev/qtop/tlsfiles/tlstest"
)

// An OTLP/gRPC listener off loopback needs the report token and TLS,
// whatever --listen is: the collector refuses to start without them,
// naming the flags.
func TestOTLPGRPCOffLoopbackNeedsToken(t *testing.T) {
	ca := tlstest.NewCA(t, "ca")
	cert, key := ca.Server(t, "collector")
	files := tlsfiles.ServerFiles{Cert: cert, Key: key}
	for _, c := range []struct {
		grpc, token string
		tls         bool
		insecure    bool
		ok          bool
		names       string
	}{
		{"0.0.0.0:0", "", false, false, false, "--token"},
		{":0", "", false, false, false, "--token"},
		{"127.0.0.1:0", "", false, false, true, ""},
		{"localhost:0", "", false, false, true, ""},
		{"0.0.0.0:0", "tok", false, false, false, "--tls-cert"},
		{"0.0.0.0:0", "", true, false, false, "--token"},
		{"0.0.0.0:0", "tok", true, false, true, ""},
		{"0.0.0.0:0", "", false, true, true, ""},
	} {
		cfg := Config{Listen: "127.0.0.1:0", Store: StoreNone, DataDir: t.TempDir(), Writer: "w",
			OTLPConfig: OTLPConfig{OTLPGRPC: c.grpc}, Token: c.token, TLSConfig: TLSConfig{Insecure: c.insecure}}
		if c.tls {
			cfg.TLS = files
		}
		s, err := New(cfg)
		if c.ok != (err == nil) {
			t.Errorf("%+v: %v", c, err)
		}
		if err != nil && (!errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "--otlp-grpc") || !strings.Contains(err.Error(), c.names)) {
			t.Errorf("%+v: error %q should name --otlp-grpc and %s", c, err, c.names)
		}
		if s != nil {
			s.Shutdown(t.Context())
		}
	}
}

// The OTLP doors hold refusals in the report door's places: a wrong token
// on /v1/traces or on OTLP/gRPC (refused from the stream's headers, its
// message unread) is counted on qtop_collector_refusals_held_total.
func TestOTLPRefusalsHeld(t *testing.T) {
	s, err := New(Config{Listen: "127.0.0.1:0", Store: StoreNone, DataDir: t.TempDir(), Writer: "w",
		Token: "tok", OTLPConfig: OTLPConfig{OTLPGRPC: "127.0.0.1:0"}, IntakeConfig: IntakeConfig{RefusalDelay: 20 * time.Millisecond}, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	cc, err := grpc.NewClient(s.OTLPGRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer wrong")
	if _, err := coltracepb.NewTraceServiceClient(cc).Export(ctx, otlpRequest("shop", 3, 1, t0, 1)); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("wrong token over gRPC: %v", err)
	}
	if got := testutil.ToFloat64(s.guard.refusalsHeld); got != 1 {
		t.Fatalf("held %v refusals, want 1", got)
	}
	body, _ := proto.Marshal(otlpRequest("shop", 3, 1, t0, 1))
	if w := postTraces(t, s.Handler(), body, "wrong"); w.Code != http.StatusUnauthorized {
		t.Fatalf("wrong token over HTTP: %d", w.Code)
	}
	if got := testutil.ToFloat64(s.guard.refusalsHeld); got != 2 {
		t.Fatalf("held %v refusals, want 2", got)
	}
}
