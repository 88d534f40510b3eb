package topn

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

var metrics = []Metric{
	{DBTime, "qtop_collector_tenant_db_seconds_total", "Database time by tenant."},
	{Requests, "qtop_collector_tenant_requests_total", "Requests by tenant."},
}

func TestCollectorExposition(t *testing.T) {
	r := mustNew(t, 2, WithMinTenure(0))
	reg := prometheus.NewPedanticRegistry()
	c, err := NewCollector(reg, r, "tenant", metrics...)
	if err != nil {
		t.Fatal(err)
	}
	r.Add("acme", Values{DBTime: 3, Requests: 2})
	r.Add("globex", Values{DBTime: 1, Requests: 1})
	r.Add("initech", Values{DBTime: 0.5, Requests: 4})
	r.Add("globex", Values{DBTime: 1, Requests: 1})
	want := `
# HELP qtop_collector_tenant_db_seconds_total Database time by tenant.
# TYPE qtop_collector_tenant_db_seconds_total counter
qtop_collector_tenant_db_seconds_total{tenant="acme"} 3
qtop_collector_tenant_db_seconds_total{tenant="globex"} 2
qtop_collector_tenant_db_seconds_total{tenant="other"} 0.5
# HELP qtop_collector_tenant_requests_total Requests by tenant.
# TYPE qtop_collector_tenant_requests_total counter
qtop_collector_tenant_requests_total{tenant="acme"} 2
qtop_collector_tenant_requests_total{tenant="globex"} 2
qtop_collector_tenant_requests_total{tenant="other"} 4
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", err, problems)
	}

	// initech becomes heavy: after a rerank it replaces globex, whose
	// series goes; initech's starts from what it added as a member.
	r.Rerank()
	r.Add("initech", Values{DBTime: 10, Requests: 1})
	r.Rerank()
	r.Add("initech", Values{DBTime: 1, Requests: 1})
	want = `
# HELP qtop_collector_tenant_db_seconds_total Database time by tenant.
# TYPE qtop_collector_tenant_db_seconds_total counter
qtop_collector_tenant_db_seconds_total{tenant="acme"} 3
qtop_collector_tenant_db_seconds_total{tenant="initech"} 1
qtop_collector_tenant_db_seconds_total{tenant="other"} 10.5
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "qtop_collector_tenant_db_seconds_total"); err != nil {
		t.Fatal(err)
	}
}

func TestCollectorSeriesBounded(t *testing.T) {
	const n = 20
	r := mustNew(t, n, WithMinTenure(0), WithMargin(1))
	reg := prometheus.NewRegistry()
	c, err := NewCollector(reg, r, "tenant", metrics...)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 5 {
		for i := range 100_000 {
			// Every round a different set of tenants is heaviest.
			r.Add(fmt.Sprintf("tenant-%d", i), Values{DBTime: float64((i + round*7919) % 1000), Requests: 1})
		}
		r.Cut()
		for _, m := range metrics {
			if got := testutil.CollectAndCount(c, m.Name); got != n+1 {
				t.Fatalf("round %d: %s has %d series, want %d", round, m.Name, got, n+1)
			}
		}
	}
	var total float64
	for _, row := range r.Totals() {
		total += row.Values[Requests]
	}
	if total > 500_000 {
		t.Fatalf("exported requests %v exceed what was added", total)
	}
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", err, problems)
	}
}

func TestNewCollectorErrors(t *testing.T) {
	r := mustNew(t, 2)
	reg := prometheus.NewRegistry()
	for _, tc := range []struct {
		name  string
		reg   prometheus.Registerer
		r     *Ranking
		label string
		ms    []Metric
	}{
		{"nil registerer", nil, r, "tenant", metrics},
		{"nil ranking", reg, nil, "tenant", metrics},
		{"bad label", reg, r, "ten-ant", metrics},
		{"no metrics", reg, r, "tenant", nil},
		{"bad measure", reg, r, "tenant", []Metric{{Measure(7), "x_total", ""}}},
		{"bad name", reg, r, "tenant", []Metric{{DBTime, "9x", ""}}},
	} {
		if _, err := NewCollector(tc.reg, tc.r, tc.label, tc.ms...); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", tc.name, err)
		}
	}
	if _, err := NewCollector(reg, r, "tenant", Metric{Measure: RU, Name: "qtop_tenant_ru_total"}); err != nil {
		t.Fatal(err)
	}
	_, err := NewCollector(reg, r, "tenant", Metric{Measure: RU, Name: "qtop_tenant_ru_total"})
	var are prometheus.AlreadyRegisteredError
	if !errors.As(err, &are) {
		t.Fatalf("second registration: %v", err)
	}
}
