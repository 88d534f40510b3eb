package envoyrls_test

import (
	"context"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/metadata"

	"github.com/qtop-dev/qtop/internal/envoyrls"
	"github.com/qtop-dev/qtop/quota"
)

// TestMetrics: every answer is counted by code, and what a shadow rule
// would have refused apart (acme's shadow throttle of 1 RU/s admits the
// first of its two requests, and would refuse the second, which is
// answered OK); the series pass the linter.
func TestMetrics(t *testing.T) {
	src := &source{}
	shadow := throttle("acme", 1)
	shadow.ID, shadow.Shadow = "s-acme", true
	src.set(throttle("bigcorp", 0), shadow)
	clk := newClock()
	reg := prometheus.NewRegistry()
	svc, err := envoyrls.New(src, envoyrls.WithClock(clk.now), envoyrls.WithRegisterer(reg),
		envoyrls.WithAuth(func(h string) bool { return h == "Bearer tok" }))
	if err != nil {
		t.Fatal(err)
	}
	c := serve(t, svc)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer tok")
	c.ShouldRateLimit(ctx, req([]string{"tenant", "acme"}))
	c.ShouldRateLimit(ctx, req([]string{"tenant", "acme"}))
	c.ShouldRateLimit(ctx, req([]string{"tenant", "bigcorp"}))
	c.ShouldRateLimit(ctx, req())
	c.ShouldRateLimit(context.Background(), req([]string{"tenant", "acme"}))
	want := `
# HELP qtop_rls_requests_total ShouldRateLimit calls answered, by code: ok, over_limit, invalid (InvalidArgument), unauthenticated, refused (refused for now by the admission check: the collector replaying its write-ahead log), busy (Unavailable: too many calls open), slow (its message did not come within the read timeout).
# TYPE qtop_rls_requests_total counter
qtop_rls_requests_total{code="busy"} 0
qtop_rls_requests_total{code="invalid"} 1
qtop_rls_requests_total{code="ok"} 2
qtop_rls_requests_total{code="over_limit"} 1
qtop_rls_requests_total{code="refused"} 0
qtop_rls_requests_total{code="slow"} 0
qtop_rls_requests_total{code="unauthenticated"} 1
# HELP qtop_rls_buckets Throttle buckets tracked (one per throttled tenant seen, and one per tenant under a shadow throttle).
# TYPE qtop_rls_buckets gauge
qtop_rls_buckets 1
# HELP qtop_rls_shadow_over_limit_total Descriptors a shadow rule (a throttle or a fleet quota) would have answered OVER_LIMIT; the answer was not changed.
# TYPE qtop_rls_shadow_over_limit_total counter
qtop_rls_shadow_over_limit_total 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "qtop_rls_requests_total", "qtop_rls_buckets", "qtop_rls_shadow_over_limit_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(reg, "qtop_rls_answer_seconds"); n != 1 {
		t.Errorf("%d answer histograms", n)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", err, problems)
	}
}

// TestShadowQuota: a shadow fleet-quota verdict refuses nothing and
// counts what it would have refused.
func TestShadowQuota(t *testing.T) {
	clk := newClock()
	reg := prometheus.NewRegistry()
	svc, err := envoyrls.New(&source{}, envoyrls.WithClock(clk.now), envoyrls.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	svc.Apply(clk.now(), []quota.Verdict{{Tenant: "bigcorp", For: time.Second, Allowance: 10, Shadow: true}})
	for i := range 5 {
		resp, err := svc.DecideAt(clk.now(), req([]string{"tenant", "bigcorp"}))
		if err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OK {
			t.Fatalf("request %d: %v %v", i, resp, err)
		}
	}
	// A 0.5 RU burst admits the first.
	want := `
# HELP qtop_rls_shadow_over_limit_total Descriptors a shadow rule (a throttle or a fleet quota) would have answered OVER_LIMIT; the answer was not changed.
# TYPE qtop_rls_shadow_over_limit_total counter
qtop_rls_shadow_over_limit_total 4
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "qtop_rls_shadow_over_limit_total"); err != nil {
		t.Error(err)
	}
}
