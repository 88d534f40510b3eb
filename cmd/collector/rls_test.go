package main

import (
	"bytes"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

func TestRLSFlags(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"serve", "--help"}, &out, &errb); code != 0 {
		t.Fatal(code)
	}
	for _, s := range []string{"--rls-listen", "$QTOP_RLS_LISTEN", "ShouldRateLimit"} {
		if !strings.Contains(out.String()+errb.String(), s) {
			t.Errorf("serve --help does not name %s", s)
		}
	}
	for _, c := range []struct{ addr, want string }{
		{"8081", "rls listen"},
		{"0.0.0.0:0", "--rls-listen 0.0.0.0:0 is not loopback"},
	} {
		out.Reset()
		errb.Reset()
		code := run([]string{"serve", "--store", "none", "--data-dir", t.TempDir(), "--rls-listen", c.addr}, &out, &errb)
		if code != 1 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("--rls-listen %s: exit %d: %s", c.addr, code, errb.String())
		}
	}
}

// TestRLSBinary runs the collector binary with --rls-listen and asks it
// with Envoy's client types: a throttle posted to /v1/policy answers
// OVER_LIMIT from the next call, another tenant OK, a wrong token
// UNAUTHENTICATED.
func TestRLSBinary(t *testing.T) {
	bin := buildCollector(t)
	listen, rls := freePort(t), freePort(t)
	cmd, logs := startCollector(t, bin, "--store", "none", "--data-dir", t.TempDir(), "--listen", listen,
		"--rls-listen", rls, "--token", "rep", "--admin-token", "adm")
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	if !strings.Contains(logs.String(), "rate-limit service listening") {
		t.Errorf("no log line for the rate-limit listener:\n%s", logs)
	}
	rule := `{"tenant":"bigcorp","action":"throttle","ru_per_second":0,"expires":"` +
		time.Now().Add(time.Hour).UTC().Format(time.RFC3339) + `","reason":"noisy"}`
	req, _ := http.NewRequest(http.MethodPost, "http://"+listen+"/v1/policy", strings.NewReader(rule))
	req.Header.Set("Authorization", "Bearer adm")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/policy: %s", resp.Status)
	}
	cc, err := grpc.NewClient(rls, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	cl := rlsv3.NewRateLimitServiceClient(cc)
	ask := func(tok, tenantName string) (*rlsv3.RateLimitResponse, error) {
		ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+tok)
		return cl.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlcommon.RateLimitDescriptor{
			{Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "tenant", Value: tenantName}}}}})
	}
	for _, c := range []struct {
		tok, tenant string
		want        rlsv3.RateLimitResponse_Code
	}{{"rep", "bigcorp", rlsv3.RateLimitResponse_OVER_LIMIT}, {"rep", "acme", rlsv3.RateLimitResponse_OK}} {
		got, err := ask(c.tok, c.tenant)
		if err != nil || got.OverallCode != c.want {
			t.Errorf("%s: %v %v, want %v", c.tenant, got, err, c.want)
		}
	}
	if _, err := ask("adm", "acme"); status.Code(err) != codes.Unauthenticated {
		t.Errorf("the admin token on the report door: %v", err)
	}
}
