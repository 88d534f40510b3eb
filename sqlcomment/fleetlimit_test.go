package sqlcomment

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/quota/lease"
	"github.com/qtop-dev/qtop/tenant"
)

// TestBudgetConcurrencyAcrossProcesses: two processes (two Budgets, each
// with its own Redis client and lease semaphore) share a concurrency
// budget of 1 through the real Redis: while one runs an analytics
// statement the other's is refused, although its own count is 0; after
// the first finishes the second is admitted. A transaction's statement
// takes no fleet slot.
func TestBudgetConcurrencyAcrossProcesses(t *testing.T) {
	addr := testsvc.Redis(t)
	prefix := "qtop-test-budget-" + time.Now().Format("150405.000000000") + ":"
	set := []policy.Budget{{ID: "analytics", Match: []map[string]string{{"tenant": "analytics"}},
		Concurrency: 1, Mode: policy.Enforce, Reason: "test"}}
	process := func() *Budgets {
		b := NewBudgets()
		mustSet(t, b, set, nil)
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { rdb.Close() })
		sem, err := lease.New(rdb, b.FleetConcurrency, lease.WithPrefix(prefix), lease.WithTTL(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		sem.Start()
		t.Cleanup(func() { sem.Shutdown(context.Background()) })
		b.SetFleetLimiter(sem)
		return b
	}
	p1, p2 := process(), process()
	an := tenant.Tags{Tenant: "analytics"}
	cfg := &config{}
	now := time.Now()
	tk1, err := p1.Admit(now, &an, cfg, q1, false)
	if err != nil {
		t.Fatal(err)
	}
	_, err = p2.Admit(now, &an, cfg, q1, false)
	if be := budgetErr(t, err); be.Limit != LimitConcurrency || be.RetryAfter <= 0 {
		t.Fatalf("the second process's refusal = %+v", be)
	}
	// Inside a transaction: never refused, no fleet slot taken.
	tx, err := p2.Admit(now, &an, cfg, q1, true)
	if err != nil || tx.slots[0].fleet != "" {
		t.Fatalf("in a transaction: %v, fleet slot %q", err, tx.slots[0].fleet)
	}
	p2.Finish(&tx, now, time.Millisecond, false)
	if p1.FleetConcurrency("budget/analytics/") != 1 || p1.FleetConcurrency("budget/other/") != 0 || p1.FleetConcurrency("tenant") != 0 {
		t.Fatal("FleetConcurrency does not name the budgets' limits")
	}
	p1.Finish(&tk1, now, 10*time.Millisecond, false)
	tk2, err := p2.Admit(now, &an, cfg, q1, false)
	if err != nil {
		t.Fatalf("after the first process's statement ended: %v", err)
	}
	p2.Finish(&tk2, now, 10*time.Millisecond, false)
	// Without the limiter, back to the per-process limit.
	p2.SetFleetLimiter(nil)
	tk3, err := p1.Admit(now, &an, cfg, q1, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p2.Admit(now, &an, cfg, q1, false); err != nil {
		t.Fatalf("per-process limit: %v", err)
	}
	p1.Finish(&tk3, now, time.Millisecond, false)
}
