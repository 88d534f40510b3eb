package sqlcomment

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/tenant"
)

func TestBudgetMetrics(t *testing.T) {
	b := NewBudgets()
	mustSet(t, b, []policy.Budget{{ID: "c", Each: "tenant", Concurrency: 1, Mode: policy.Enforce, ConfirmBroad: true, Reason: "t"}},
		[]policy.Runaway{{ID: "r", AfterSeconds: 1, Action: policy.Report, Reason: "t"}})
	reg := prometheus.NewRegistry()
	if err := b.Register(reg); err != nil {
		t.Fatal(err)
	}
	tags := tenant.Tags{Tenant: "a"}
	tk, _ := b.Admit(bt0, &tags, &config{}, q1, false)
	b.Admit(bt0, &tags, &config{}, q1, false) // refused
	b.Finish(&tk, bt0.Add(2*time.Second), 2*time.Second, false)
	err := testutil.CollectAndCompare(reg, strings.NewReader(`
# HELP qtop_sqlcomment_budget_statements_total Statements admitted by a database budget (sent), by budget.
# TYPE qtop_sqlcomment_budget_statements_total counter
qtop_sqlcomment_budget_statements_total{budget="c"} 1
# HELP qtop_sqlcomment_budget_in_flight Statements of a database budget in flight.
# TYPE qtop_sqlcomment_budget_in_flight gauge
qtop_sqlcomment_budget_in_flight{budget="c"} 0
# HELP qtop_sqlcomment_budget_keys Buckets a database budget holds (one per value of its each tag).
# TYPE qtop_sqlcomment_budget_keys gauge
qtop_sqlcomment_budget_keys{budget="c"} 1
# HELP qtop_sqlcomment_runaway_total Statements a runaway rule acted on, by rule and outcome (cancelled, reported, refused, watched).
# TYPE qtop_sqlcomment_runaway_total counter
qtop_sqlcomment_runaway_total{outcome="cancelled",rule="r"} 0
qtop_sqlcomment_runaway_total{outcome="refused",rule="r"} 0
qtop_sqlcomment_runaway_total{outcome="reported",rule="r"} 1
qtop_sqlcomment_runaway_total{outcome="watched",rule="r"} 0
`), "qtop_sqlcomment_budget_statements_total", "qtop_sqlcomment_budget_in_flight", "qtop_sqlcomment_budget_keys", "qtop_sqlcomment_runaway_total")
	if err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(reg, "qtop_sqlcomment_budget_violations_total"); n != 9 {
		t.Fatalf("%d violation series, want 9 (3 limits × 3 outcomes)", n)
	}
	if probs, err := testutil.CollectAndLint(reg); err != nil || len(probs) > 0 {
		t.Fatalf("lint: %v %v", err, probs)
	}
	// A removed budget disappears from the metrics.
	mustSet(t, b, nil, nil)
	if n := testutil.CollectAndCount(reg); n != 0 {
		t.Fatalf("%d series after the budgets were removed", n)
	}
}
