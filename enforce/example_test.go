package enforce_test

import (
	"fmt"
	"time"

	"github.com/qtop-dev/qtop/enforce"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/ru"
	"github.com/qtop-dev/qtop/tenant"
)

func Example() {
	e, err := enforce.New(enforce.WithPlanOf(func(t string) string {
		if t == "bigco" {
			return enforce.PlanPro
		}
		return enforce.PlanFree // 100 RU/s, burst 200
	}))
	if err != nil {
		fmt.Println(err)
		return
	}
	now := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	acme := tenant.Tags{Tenant: "acme", Tier: tenant.T2}

	// A scan of 4 MiB that ran 2 s costs 2 + 512 + 200 RU, charged after
	// the work: acme's bucket goes 514 RU into debt.
	fmt.Println(e.AdmitAt(now, acme).Admitted())
	fmt.Printf("%.0f RU\n", e.CostAt(now, acme, ru.OpScan, 4<<20, 2*time.Second))
	d := e.AdmitAt(now.Add(time.Second), acme)
	fmt.Println(d.Admitted(), d.RetryAfter.Round(time.Millisecond))

	// The collector's policy prices T2 up three times.
	e.ApplyPolicyAt(now, policy.Policy{Version: 1, Rules: []policy.Rule{{
		ID: "p1", Tier: tenant.T2, Action: policy.Price, Multiplier: 3,
		Expires: now.Add(time.Hour), Reason: "noisy T2 batch",
	}}})
	fmt.Printf("%.0f RU\n", e.CostAt(now.Add(10*time.Second), acme, ru.OpRead, 0, 0))
	fmt.Println(e.Stats().Tiers[2].Admitted, e.Stats().Tiers[2].Throttled)
	// Output:
	// true
	// 714 RU
	// false 4.14s
	// 3 RU
	// 1 1
}
