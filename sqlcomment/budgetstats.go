package sqlcomment

import (
	"github.com/prometheus/client_golang/prometheus"
)

// BudgetStats are the counters of one budget since it was first set.
type BudgetStats struct {
	ID       string
	Enforce  bool
	Admitted uint64
	InFlight int64
	Keys     int
	// Evictions counts buckets forgotten to make room (see Budgets);
	// Overflows counts statements charged to the overflow bucket, or left
	// out because more than 4 budgets matched.
	Evictions, Overflows uint64
	// Refused, Warned and InTx count violations by limit
	// (index Limit-1: share, statement, concurrency).
	Refused, Warned, InTx [3]uint64
}

// RunawayStats are the counters of one runaway rule.
type RunawayStats struct {
	ID                                    string
	Action                                string
	Cancelled, Reported, Refused, Watched uint64
}

// Stats returns the counters of the current budgets and runaway rules, in
// policy order.
func (b *Budgets) Stats() ([]BudgetStats, []RunawayStats) {
	s := b.cur.Load()
	bs := make([]BudgetStats, 0, len(s.all))
	for _, bu := range s.all {
		st := &bu.st.stats
		x := BudgetStats{ID: bu.id, Enforce: bu.enforce, Admitted: st.admitted.Load(),
			InFlight: st.inFlight.Load(), Evictions: st.evictions.Load(), Overflows: st.overflows.Load()}
		for l := range 3 {
			x.Refused[l] = st.viol[l][handledRefused].Load()
			x.Warned[l] = st.viol[l][handledWarned].Load()
			x.InTx[l] = st.viol[l][handledInTx].Load()
		}
		bu.st.mu.Lock()
		x.Keys = len(bu.st.keys)
		if bu.st.keys == nil {
			x.Keys = 1
		}
		bu.st.mu.Unlock()
		bs = append(bs, x)
	}
	rs := make([]RunawayStats, 0, len(s.rules))
	for _, r := range s.rules {
		rs = append(rs, RunawayStats{ID: r.id, Action: string(r.action), Cancelled: r.stats.cancelled.Load(),
			Reported: r.stats.reported.Load(), Refused: r.stats.refused.Load(), Watched: r.stats.watched.Load()})
	}
	return bs, rs
}

// Register registers the budgets' metrics with reg, read at each scrape
// from the current budgets (so the budget label has at most
// policy.MaxBudgets values, and removed budgets disappear):
//
//	qtop_sqlcomment_budget_statements_total{budget}
//	qtop_sqlcomment_budget_violations_total{budget,limit,handled}
//	qtop_sqlcomment_budget_in_flight{budget}
//	qtop_sqlcomment_budget_keys{budget}
//	qtop_sqlcomment_budget_evictions_total{budget}
//	qtop_sqlcomment_runaway_total{rule,outcome}
func (b *Budgets) Register(reg prometheus.Registerer) error {
	return reg.Register(budgetCollector{b})
}

type budgetCollector struct{ b *Budgets }

var (
	descAdmitted = prometheus.NewDesc("qtop_sqlcomment_budget_statements_total",
		"Statements admitted by a database budget (sent), by budget.", []string{"budget"}, nil)
	descViolations = prometheus.NewDesc("qtop_sqlcomment_budget_violations_total",
		"Statements over a database budget's limit, by budget, limit and how it was handled (refused, warned, in_tx).",
		[]string{"budget", "limit", "handled"}, nil)
	descInFlight = prometheus.NewDesc("qtop_sqlcomment_budget_in_flight",
		"Statements of a database budget in flight.", []string{"budget"}, nil)
	descKeys = prometheus.NewDesc("qtop_sqlcomment_budget_keys",
		"Buckets a database budget holds (one per value of its each tag).", []string{"budget"}, nil)
	descEvictions = prometheus.NewDesc("qtop_sqlcomment_budget_evictions_total",
		"Buckets of a database budget forgotten to make room for new values.", []string{"budget"}, nil)
	descRunaway = prometheus.NewDesc("qtop_sqlcomment_runaway_total",
		"Statements a runaway rule acted on, by rule and outcome (cancelled, reported, refused, watched).",
		[]string{"rule", "outcome"}, nil)
)

func (c budgetCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descAdmitted, descViolations, descInFlight, descKeys, descEvictions, descRunaway} {
		ch <- d
	}
}

func (c budgetCollector) Collect(ch chan<- prometheus.Metric) {
	bs, rs := c.b.Stats()
	for _, s := range bs {
		ch <- prometheus.MustNewConstMetric(descAdmitted, prometheus.CounterValue, float64(s.Admitted), s.ID)
		for l := range 3 {
			name := Limit(l + 1).String()
			ch <- prometheus.MustNewConstMetric(descViolations, prometheus.CounterValue, float64(s.Refused[l]), s.ID, name, "refused")
			ch <- prometheus.MustNewConstMetric(descViolations, prometheus.CounterValue, float64(s.Warned[l]), s.ID, name, "warned")
			ch <- prometheus.MustNewConstMetric(descViolations, prometheus.CounterValue, float64(s.InTx[l]), s.ID, name, "in_tx")
		}
		ch <- prometheus.MustNewConstMetric(descInFlight, prometheus.GaugeValue, float64(s.InFlight), s.ID)
		ch <- prometheus.MustNewConstMetric(descKeys, prometheus.GaugeValue, float64(s.Keys), s.ID)
		ch <- prometheus.MustNewConstMetric(descEvictions, prometheus.CounterValue, float64(s.Evictions), s.ID)
	}
	for _, r := range rs {
		ch <- prometheus.MustNewConstMetric(descRunaway, prometheus.CounterValue, float64(r.Cancelled), r.ID, "cancelled")
		ch <- prometheus.MustNewConstMetric(descRunaway, prometheus.CounterValue, float64(r.Reported), r.ID, "reported")
		ch <- prometheus.MustNewConstMetric(descRunaway, prometheus.CounterValue, float64(r.Refused), r.ID, "refused")
		ch <- prometheus.MustNewConstMetric(descRunaway, prometheus.CounterValue, float64(r.Watched), r.ID, "watched")
	}
}
