package collector

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/qtop-dev/qtop/internal/envoyrls"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/quota"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/tlsfiles"
	"github.com/qtop-dev/qtop/tlsfiles/tlstest"
)

// envoyRLS makes the service as cmd/collector does.
func envoyRLS(d RLSDeps) (RateLimitService, error) {
	opts := []envoyrls.Option{envoyrls.WithClock(d.Now), envoyrls.WithRegisterer(d.Registerer)}
	if d.Auth != nil {
		opts = append(opts, envoyrls.WithAuth(d.Auth))
	}
	if d.Admit != nil {
		opts = append(opts, envoyrls.WithAdmission(d.Admit))
	}
	return envoyrls.New(d.Policy, opts...)
}

func rlsRequest(hits uint32, kv ...string) *rlsv3.RateLimitRequest {
	d := &rlcommon.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &rlcommon.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlcommon.RateLimitDescriptor{d}, HitsAddend: hits}
}

func rlsClient(t *testing.T, addr string, creds credentials.TransportCredentials) rlsv3.RateLimitServiceClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return rlsv3.NewRateLimitServiceClient(cc)
}

// startServer makes and starts a collector of cfg, shut down when the
// test ends.
func startServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	return s
}

func withBearer(ctx context.Context, tok string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
}

// TestRLSOverMTLS: the rate-limit service serves the listeners' TLS with
// mTLS: a client with the CA and a client certificate is answered; without
// the certificate, or trusting another CA, the handshake fails; the
// report token is required.
func TestRLSOverMTLS(t *testing.T) {
	ca, other := tlstest.NewCA(t, "ca"), tlstest.NewCA(t, "other")
	cert, key := ca.Server(t, "collector")
	ccert, ckey := ca.Client(t, "envoy")
	cfg := Config{Listen: "127.0.0.1:0", Store: StoreNone, DataDir: t.TempDir(), Writer: "w", Token: "tok",
		TLSConfig:  TLSConfig{TLS: tlsfiles.ServerFiles{Cert: cert, Key: key, ClientCA: ca.File}},
		Registerer: prometheus.NewRegistry()}
	cfg.RLSListen, cfg.RLS = "127.0.0.1:0", envoyRLS
	s := startServer(t, cfg)
	for _, c := range []struct {
		name  string
		files tlsfiles.ClientFiles
		tok   string
		code  codes.Code
	}{
		{"CA and client certificate", tlsfiles.ClientFiles{CA: ca.File, Cert: ccert, Key: ckey}, "tok", codes.OK},
		{"wrong token", tlsfiles.ClientFiles{CA: ca.File, Cert: ccert, Key: ckey}, "nope", codes.Unauthenticated},
		{"no client certificate", tlsfiles.ClientFiles{CA: ca.File}, "tok", codes.Unavailable},
		{"another CA", tlsfiles.ClientFiles{CA: other.File, Cert: ccert, Key: ckey}, "tok", codes.Unavailable},
	} {
		conf, err := c.files.Config()
		if err != nil {
			t.Fatal(err)
		}
		cl := rlsClient(t, s.RLSAddr(), credentials.NewTLS(conf))
		resp, err := cl.ShouldRateLimit(withBearer(t.Context(), c.tok), rlsRequest(0, "tenant", "acme"))
		if status.Code(err) != c.code {
			t.Errorf("%s: %v, want %v", c.name, err, c.code)
		}
		if err == nil && resp.OverallCode != rlsv3.RateLimitResponse_OK {
			t.Errorf("%s: %v", c.name, resp)
		}
	}
	// Plain text to a TLS listener fails too.
	cl := rlsClient(t, s.RLSAddr(), insecure.NewCredentials())
	if _, err := cl.ShouldRateLimit(withBearer(t.Context(), "tok"), rlsRequest(0, "tenant", "acme")); err == nil {
		t.Error("plain text answered by a TLS listener")
	}
}

// TestRLSFollowsPolicyAndQuotas: the answers follow the collector's
// policy at once (a throttle set and lifted through SetRule), and a fleet
// quota: after a tick has summed the service's usage, its allowance
// refuses what goes above it.
func TestRLSFollowsPolicyAndQuotas(t *testing.T) {
	var now atomic.Int64
	now.Store(t0.UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()).UTC() }
	cfg := Config{Listen: "127.0.0.1:0", Store: StoreNone, DataDir: t.TempDir(), Writer: "w", Token: "tok",
		Registerer: prometheus.NewRegistry(), Now: clock}
	cfg.RLSListen, cfg.RLS = "127.0.0.1:0", envoyRLS
	s := startServer(t, cfg)
	cl := rlsClient(t, s.RLSAddr(), insecure.NewCredentials())
	ask := func(hits uint32) *rlsv3.RateLimitResponse {
		t.Helper()
		resp, err := cl.ShouldRateLimit(withBearer(t.Context(), "tok"), rlsRequest(hits, "tenant", "bigcorp", "tier", "T2"))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if got := ask(1).OverallCode; got != rlsv3.RateLimitResponse_OK {
		t.Fatalf("no rule: %v", got)
	}
	rule := policy.Rule{ID: "stop", Tenant: "bigcorp", Action: policy.Throttle, RUPerSecond: 0, Expires: t0.Add(time.Hour), Reason: "noisy"}
	if _, err := s.SetRule(t.Context(), rule, "test"); err != nil {
		t.Fatal(err)
	}
	if got := ask(1).OverallCode; got != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("throttled to 0: %v", got)
	}
	rule.Expires = t0 // lifts it
	if _, err := s.SetRule(t.Context(), rule, "test"); err != nil {
		t.Fatal(err)
	}
	if got := ask(1).OverallCode; got != rlsv3.RateLimitResponse_OK {
		t.Fatalf("lifted: %v", got)
	}
	q := policy.Rule{ID: "q", Tenant: "bigcorp", Action: policy.Quota, RUPerSecond: 10, Expires: t0.Add(time.Hour), Reason: "plan"}
	if _, err := s.SetRule(t.Context(), q, "test"); err != nil {
		t.Fatal(err)
	}
	if got := ask(100).OverallCode; got != rlsv3.RateLimitResponse_OK { // 100 RU, not yet limited
		t.Fatalf("before the fleet's sums: %v", got)
	}
	if a := s.Live().AppliedBy; a == nil || a.RateLimitService || a.Note() == "" {
		t.Fatalf("before a tick the collector says a gateway applies the policy: %+v", a)
	}
	now.Add(int64(time.Second))
	s.Tick(t.Context(), clock())
	// A gateway asks: the policy is applied there; "no process applies
	// this" would be wrong.
	if a := s.Live().AppliedBy; a == nil || !a.RateLimitService || a.Note() != "" {
		t.Fatalf("after a gateway's calls: %+v %q", a, a.Note())
	}
	ask(1) // admitted into its allowance's debt, or refused
	resp := ask(1)
	st := resp.Statuses[0]
	if resp.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT || st.CurrentLimit.RequestsPerUnit > 10 {
		t.Fatalf("over the fleet quota: %v", resp)
	}
}

func TestRLSExposure(t *testing.T) {
	base := func() Config {
		c := Config{Listen: "127.0.0.1:0", Store: StoreNone, DataDir: t.TempDir(), Writer: "w", Registerer: prometheus.NewRegistry()}
		c.RLSListen, c.RLS = "0.0.0.0:0", envoyRLS
		return c
	}
	_, err := New(base())
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "--rls-listen 0.0.0.0:0 is not loopback") ||
		!strings.Contains(err.Error(), "--token") || !strings.Contains(err.Error(), "--tls-cert") {
		t.Fatalf("open rls off loopback: %v", err)
	}
	c := base()
	c.Insecure = true
	s, err := New(c)
	if err != nil {
		t.Fatalf("--insecure: %v", err)
	}
	s.Shutdown(context.Background())
	c = base()
	c.RLSListen, c.RLS = "127.0.0.1:0", nil
	if _, err := New(c); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "without a rate-limit service") {
		t.Fatalf("no service: %v", err)
	}
}

// TestRLSSharesFleetQuotaWithAgents: the gateways' RU and an agent's
// count in the same fleet sums: with the agent asking three times what
// the gateways ask of a 100 RU/s quota, each gets a share — the
// gateways' allowance is below half the limit, not all of it — and the
// agent's allowance shows the gateways' demand counted.
func TestRLSSharesFleetQuotaWithAgents(t *testing.T) {
	var now atomic.Int64
	now.Store(t0.UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()).UTC() }
	cfg := Config{Listen: "127.0.0.1:0", Store: StoreNone, DataDir: t.TempDir(), Writer: "w", Token: "tok",
		Registerer: prometheus.NewRegistry(), Now: clock}
	cfg.RLSListen, cfg.RLS = "127.0.0.1:0", envoyRLS
	s := startServer(t, cfg)
	q := policy.Rule{ID: "q", Tenant: "bigcorp", Action: policy.Quota, RUPerSecond: 100, Expires: t0.Add(time.Hour), Reason: "plan"}
	if _, err := s.SetRule(t.Context(), q, "test"); err != nil {
		t.Fatal(err)
	}
	cl := rlsClient(t, s.RLSAddr(), insecure.NewCredentials())
	ask := func(hits uint32) *rlsv3.RateLimitResponse {
		t.Helper()
		resp, err := cl.ShouldRateLimit(withBearer(t.Context(), "tok"), rlsRequest(hits, "tenant", "bigcorp"))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	ask(100) // the gateways: 100 RU in the first second
	now.Add(int64(time.Second))
	s.Tick(t.Context(), clock())
	agent := func(seq uint64, admitted float64) []quota.Verdict {
		t.Helper()
		rep := &report.Report{Source: report.Source{Service: "api", Instance: "p1"}, Seq: seq,
			Start: clock().Add(-time.Second), End: clock()}
		rep.SetSection(quota.Usages{{Tenant: "bigcorp", Admitted: admitted}})
		reply, err := s.Consume(t.Context(), rep, nil)
		if err != nil {
			t.Fatal(err)
		}
		v, err := quota.UnmarshalVerdicts(reply.Quotas)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	v := agent(1, 300)
	if len(v) != 1 || !(v[0].Allowance < 100) {
		t.Fatalf("agent's verdict with the gateways' 100 RU/s counted: %+v", v)
	}
	ask(100) // the gateways again, then the exchange
	now.Add(int64(time.Second))
	s.Tick(t.Context(), clock())
	agent(2, 300)
	ask(10) // admitted into debt (a burst is 50 ms of the allowance)
	st := ask(10).Statuses[0]
	if st.Code != rlsv3.RateLimitResponse_OVER_LIMIT || st.CurrentLimit.RequestsPerUnit >= 50 {
		t.Fatalf("gateways' allowance beside an agent asking 3× as much: %v", st)
	}
	t.Logf("agent allowance %.1f RU/s; gateways %d requests/s", v[0].Allowance, st.CurrentLimit.RequestsPerUnit)
}

// TestRLSRapidResetClosed: a client of the rate-limit service's port that
// opens calls and resets them at once (HTTP/2 "rapid reset") has its
// connection closed after about 100 resets and counted, as the OTLP/gRPC
// port does; before, nothing cut it.
func TestRLSRapidResetClosed(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := Config{Listen: "127.0.0.1:0", Store: StoreNone, DataDir: t.TempDir(), Writer: "w", Token: "tok", Registerer: reg}
	cfg.RLSListen, cfg.RLS = "127.0.0.1:0", envoyRLS
	s := startServer(t, cfg)
	conn, err := net.Dial("tcp", s.RLSAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"},
		{":authority", s.RLSAddr()}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	go func() {
		// Until the server closes the connection (a write then fails).
		if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
			return
		}
		fr := http2.NewFramer(conn, nil)
		if fr.WriteSettings() != nil {
			return
		}
		for id := uint32(1); id < 1<<20; id += 2 {
			if fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block.Bytes(), EndHeaders: true}) != nil ||
				fr.WriteRSTStream(id, http2.ErrCodeCancel) != nil {
				return
			}
		}
	}()
	fr := http2.NewFramer(nil, conn)
	for {
		if _, err := fr.ReadFrame(); err != nil {
			break // the server closed the connection
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var floods float64
	for _, mf := range mfs {
		if mf.GetName() == "qtop_collector_grpc_reset_floods_total" {
			for _, m := range mf.GetMetric() {
				floods += m.GetCounter().GetValue()
			}
		}
	}
	if floods != 1 {
		t.Errorf("reset floods counted %v, want 1", floods)
	}
}
