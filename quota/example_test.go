package quota_test

import (
	"fmt"
	"time"

	"github.com/qtop-dev/qtop/quota"
	"github.com/qtop-dev/qtop/tenant"
)

// Two processes share bigco's fleet-wide limit of 300 RU/s. Each reports
// its usage; the collector's Fleet answers each with its share, and each
// Gate applies it locally.
func Example() {
	limit := func(t string, _ tenant.Tier) (quota.Limit, bool) {
		return quota.Limit{RUPerSecond: 300}, t == "bigco"
	}
	fleet, _ := quota.NewFleet(limit)
	now := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	bigco := tenant.Tags{Tenant: "bigco"}

	gates := []*quota.Gate{}
	for i, ru := range []float64{400, 200} { // RU each process admitted in the last second
		g, _ := quota.NewGate()
		g.ChargeAt(now, bigco, ru)
		fleet.Observe(now, fmt.Sprint("p", i), time.Second, g.Cut())
		gates = append(gates, g)
	}
	for i, g := range gates {
		v := fleet.Verdicts(now, fmt.Sprint("p", i), nil)
		g.Apply(now, v)
		allow, _ := g.Limited(now, "bigco")
		fmt.Printf("p%d: rejection rate %.2f, allowance %.0f RU/s\n", i, v[0].Rate, allow)
	}
	// Output:
	// p0: rejection rate 0.50, allowance 200 RU/s
	// p1: rejection rate 0.50, allowance 100 RU/s
}
