package sqlcomment_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/sqlcomment"
	"github.com/qtop-dev/qtop/tenant"
)

// A concurrency budget of 1 for the analytics tenant, in Enforce mode:
// the second report in flight is refused before it is sent. (The wrappers
// call Admit and Finish; they are called here directly.)
func ExampleBudgets() {
	b := sqlcomment.NewBudgets()
	err := b.Set([]policy.Budget{{ID: "analytics", Match: []map[string]string{{"tenant": "analytics"}},
		Concurrency: 1, Mode: policy.Enforce, Reason: "reports hold back vacuum"}}, nil)
	fmt.Println(err)
	c := sqlcomment.NewCommenter(sqlcomment.WithBudgets(b))
	st := sqlcomment.Statement{Tags: tenant.Tags{Tenant: "analytics"}, Tagged: true}
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

	first, _ := c.Admit(now, "SELECT sum(total) FROM orders", &st, false)
	_, err = c.Admit(now, "SELECT sum(total) FROM orders", &st, false)
	var be *sqlcomment.BudgetError
	fmt.Println(errors.Is(err, sqlcomment.ErrBudget), errors.As(err, &be) && be.Limit == sqlcomment.LimitConcurrency)
	c.Finish(&first, now.Add(3*time.Second), 3*time.Second, false)

	_, err = c.Admit(now.Add(3*time.Second), "SELECT sum(total) FROM orders", &st, false)
	fmt.Println(err)
	// Output:
	// <nil>
	// true true
	// <nil>
}
