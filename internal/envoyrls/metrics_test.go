package envoyrls_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/metadata"

	"github.com/qtop-dev/qtop/internal/envoyrls"
)

// TestMetrics: every answer is counted by code; the series pass the
// linter.
func TestMetrics(t *testing.T) {
	src := &source{}
	src.set(throttle("bigcorp", 0))
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
# HELP qtop_rls_requests_total ShouldRateLimit calls answered, by code: ok, over_limit, invalid (InvalidArgument), unauthenticated.
# TYPE qtop_rls_requests_total counter
qtop_rls_requests_total{code="invalid"} 1
qtop_rls_requests_total{code="ok"} 2
qtop_rls_requests_total{code="over_limit"} 1
qtop_rls_requests_total{code="unauthenticated"} 1
# HELP qtop_rls_buckets Throttle buckets tracked (one per throttled tenant seen).
# TYPE qtop_rls_buckets gauge
qtop_rls_buckets 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "qtop_rls_requests_total", "qtop_rls_buckets"); err != nil {
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
