package quota_test

import (
	"fmt"
	"time"

	"github.com/qtop-dev/qtop/quota"
	"github.com/qtop-dev/qtop/tenant"
)

// Two processes share bigco's fleet-wide limit of 300 RU/s. Each reports
// its usage every second; the collector's Fleet answers each with its
// allowance, and each Gate applies it locally. p0 reports first: alone
// over the limit, it gets all of it (and half of the 1 % slack); p1's
// share is 100, less half of what the two would hold above the limit.
// Within a few reports the allowances are the limit in proportion to each
// process's demand.
func Example() {
	limit := func(t string, _ tenant.Tier) (quota.Limit, bool) {
		return quota.Limit{RUPerSecond: 300}, t == "bigco"
	}
	fleet, _ := quota.NewFleet(limit)
	now := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)

	gates := []*quota.Gate{}
	for range 2 {
		g, _ := quota.NewGate()
		gates = append(gates, g)
	}
	for sec := range 6 {
		for i, ru := range []float64{400, 200} { // RU each process was asked for in a second
			g, src := gates[i], fmt.Sprint("p", i)
			// What it admitted in the last second: what it was asked for,
			// up to its allowance (the Gate's usage, as g.Cut returns it).
			adm := ru
			if allow, ok := g.Limited(now, "bigco"); ok {
				adm = min(ru, allow)
			}
			fleet.Observe(now, src, time.Second, []quota.Usage{{Tenant: "bigco", Admitted: adm, Refused: ru - adm}})
			v := fleet.Verdicts(now, src, nil)
			g.Apply(now, v)
			if allow, _ := g.Limited(now, "bigco"); sec == 0 || sec == 5 {
				fmt.Printf("second %d, p%d: rejection rate %.2f, allowance %.0f RU/s\n", sec, i, v[0].Rate, allow)
			}
		}
		now = now.Add(time.Second)
	}
	// Output:
	// second 0, p0: rejection rate 0.25, allowance 302 RU/s
	// second 0, p1: rejection rate 0.50, allowance 51 RU/s
	// second 5, p0: rejection rate 0.50, allowance 205 RU/s
	// second 5, p1: rejection rate 0.50, allowance 99 RU/s
}
