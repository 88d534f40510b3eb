package pilotpg

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/agent"
	"github.com/qtop-dev/qtop/enforce"
	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/tenant"
)

// TestAgentAppliesFleetQuota is the scenario's mechanism alone, without
// PostgreSQL: a fleet quota the collector holds (the policy rule the
// autopilot writes) reaches an agent in its report replies and refuses
// the tenant's jobs at the source; a shadow quota refuses nothing and is
// counted; a tenant without one is never refused. Every tenant is on the
// enterprise plan, far above the load, so no refusal is the plan's.
func TestAgentAppliesFleetQuota(t *testing.T) {
	srv, base := startCollector(t)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}()
	limited := tenant.Tags{Tenant: "bigcorp", Tier: tenant.T3}
	shadowed := tenant.Tags{Tenant: "shadowco", Tier: tenant.T1}
	free := tenant.Tags{Tenant: "acme", Tier: tenant.T2}
	ctx := context.Background()
	for _, r := range []policy.Rule{
		{ID: "q", Tenant: limited.Tenant, Action: policy.Quota, RUPerSecond: 1},
		{ID: "s", Tenant: shadowed.Tenant, Action: policy.Quota, RUPerSecond: 1, Shadow: true},
	} {
		r.Expires, r.Reason = time.Now().Add(time.Hour), "test"
		if _, err := srv.SetRule(ctx, r, "test"); err != nil {
			t.Fatal(err)
		}
	}
	a, err := agent.New(agent.WithCollector(base, ""), agent.WithService("shop"),
		agent.WithPlans(enforce.DefaultPlans(), func(string) string { return enforce.PlanEnterprise }))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown(context.Background())
	job := func(tags tenant.Tags) error {
		return a.Job(ctx, tags, func(context.Context) error { return nil })
	}
	var otherErrs []error
	refused := testsvc.PollEvery(30*time.Second, 50*time.Millisecond, func() bool {
		for _, tags := range []tenant.Tags{shadowed, free} {
			if err := job(tags); err != nil {
				otherErrs = append(otherErrs, err)
			}
		}
		return errors.Is(job(limited), enforce.ErrThrottled)
	})
	if !refused {
		t.Fatalf("%s's jobs were never refused under a fleet quota of 1 RU/s", limited.Tenant)
	}
	counted := testsvc.PollEvery(30*time.Second, 50*time.Millisecond, func() bool {
		if err := job(shadowed); err != nil {
			otherErrs = append(otherErrs, err)
		}
		return a.Enforcer().Stats().Tiers[shadowed.Tier.Index()].ShadowThrottled > 0
	})
	if len(otherErrs) > 0 {
		t.Fatalf("jobs without an applied quota refused: %v", otherErrs)
	}
	if !counted {
		t.Fatalf("%s's shadow quota was never counted", shadowed.Tenant)
	}
}
