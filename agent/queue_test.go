package agent

import (
	"math"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/qtop-dev/qtop/enforce"
)

// TestQueuedRequestJudgedAtAdmission: requests that waited in the queue
// are judged by their tenant's bucket as of their admission and charged
// for their work, not for their wait. Ten requests of a fresh tenant at
// T0, one slot, 300 ms each, a plan far above what they cost: all ten are
// served and each costs what one that did not wait costs. Before, a
// request judged at its arrival, seconds stale, found the bucket in debt
// (charged by the requests admitted meanwhile) and was answered 429, and
// each was charged for its wait: the last one ten times the first.
// Fake time: the bubble's clock.
func TestQueuedRequestJudgedAtAdmission(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		plans := map[string]enforce.Plan{"p": {Limit: enforce.Limit{RUPerSecond: 1000, Burst: 2000}, Weight: 1}}
		slow := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { time.Sleep(300 * time.Millisecond) })
		one := newAgent(t, WithTenant(FromHeader("X-Tenant", "X-Tier")), WithPlans(plans, func(string) string { return "p" }))
		serve(one.Handler(slow), "GET", "/", "X-Tenant", "fresh", "X-Tier", "T0")
		single := rows(one)["fresh||request"].RU

		a := newAgent(t, WithTenant(FromHeader("X-Tenant", "X-Tier")), WithSlots(1), WithPlans(plans, func(string) string { return "p" }))
		h := a.Handler(slow)
		codes := make([]int, 10)
		var wg sync.WaitGroup
		for i := range codes {
			wg.Go(func() { codes[i] = serve(h, "GET", "/", "X-Tenant", "fresh", "X-Tier", "T0").Code })
		}
		wg.Wait()
		for i, c := range codes {
			if c != http.StatusOK {
				t.Errorf("request %d: %d, want 200", i, c)
			}
		}
		r := rows(a)["fresh||request"]
		if r.Count != 10 || single <= 0 || math.Abs(r.RU-10*single) > 1e-9*r.RU {
			t.Errorf("%d requests cost %v RU, want 10 × %v", r.Count, r.RU, single)
		}
	})
}
