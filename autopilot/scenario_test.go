package autopilot

import (
	"fmt"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/policy"
)

// t0 is the first second of every scenario.
var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// scenario is a noisy-neighbour incident, one snapshot a second: 20
// small tenants at 10 RU/s and p95 20 ms, and offenders that import from
// second start to second end at 800 RU/s (10 RU/s otherwise). While the
// offenders' admitted load is over 200 RU/s the small tenants' p95 is
// hurt × their baseline. A limit set by the test (as enforcement would)
// caps an offender's admitted load from the second after it was set.
type scenario struct {
	start, end int
	offenders  []string
	tiers      map[string]string // tier of an offender ("" T2)
	hurt       float64           // victims' p95 factor in the incident (default 2.5)
	// p95 overrides the victims' p95 factor at a second (flapping).
	p95 func(sec int) float64
	// reqPerSec is the victims' requests a second (default 5: judged on
	// enough requests; under 2, on a few: incident/thin.go).
	reqPerSec float64
	// baselines sends the collector's baselines in the rows.
	baselines bool
	// waits adds pool wait and parallel workers that follow the
	// offenders' admitted load.
	waits  bool
	limits map[string]limitFrom
	// dbOnly makes the offenders' load database sessions only: no RU,
	// and no limit holds them (no process applies it to them).
	dbOnly bool
	// spans are the seconds [start, end) of an offender's import when
	// they are not the scenario's.
	spans map[string][2]int
}

type limitFrom struct {
	from int
	ru   float64
}

// demand is an offender's RU/s at second sec before any limit.
func (sc *scenario) demand(name string, sec int) float64 {
	start, end := sc.start, sc.end
	if sp, ok := sc.spans[name]; ok {
		start, end = sp[0], sp[1]
	}
	if sec >= start && sec < end {
		return 800
	}
	return 10
}

// admitted is an offender's RU/s at sec under the limits set.
func (sc *scenario) admitted(name string, sec int) float64 {
	d := sc.demand(name, sec)
	if l, ok := sc.limits[name]; ok && sec >= l.from && l.ru > 0 {
		return min(d, l.ru)
	}
	return d
}

// limit sets a limit on name from second from (0: none).
func (sc *scenario) limit(name string, from int, ru float64) {
	if sc.limits == nil {
		sc.limits = map[string]limitFrom{}
	}
	sc.limits[name] = limitFrom{from: from, ru: ru}
}

func (sc *scenario) snap(sec int) *api.Snapshot {
	s := &api.Snapshot{Time: t0.Add(time.Duration(sec) * time.Second), Source: api.SourceCollector, Measure: api.MeasureRU,
		Collector: api.CollectorStatus{Uptime: time.Hour}}
	var off float64
	for _, o := range sc.offenders {
		if sc.dbOnly {
			off += sc.demand(o, sec)
		} else {
			off += sc.admitted(o, sec)
		}
	}
	f := 1.0
	if off > 200 {
		f = or(sc.hurt, 2.5)
	}
	if sc.p95 != nil {
		f = sc.p95(sec)
	}
	for _, o := range sc.offenders {
		h := make([]float64, api.HistoryLen)
		for j := range h {
			h[j] = sc.admitted(o, sec-(api.HistoryLen-1-j))
		}
		row := api.TenantRow{Tenant: o, Tier: cmpS(sc.tiers[o], "T2"), RUPerSec: h[len(h)-1], P95Seconds: 0.2, History: h,
			DBLoad: h[len(h)-1] / 100}
		if sc.dbOnly {
			row.RUPerSec, row.History, row.DBLoad = 0, make([]float64, api.HistoryLen), sc.demand(o, sec)/100
		}
		s.Tenants = append(s.Tenants, row)
	}
	for k := range 20 {
		r := api.TenantRow{Tenant: fmt.Sprintf("t%02d", k), Tier: "T2", RUPerSec: 10, ReqPerSec: or(sc.reqPerSec, 5), DBLoad: 0.1, P95Seconds: 0.020 * f,
			History: flat(10)}
		if sc.baselines {
			r.BaselineP95Seconds, r.BaselineShare = 0.020, 0.05
		}
		s.Tenants = append(s.Tenants, r)
	}
	if sc.waits {
		for _, r := range s.Tenants {
			s.PoolWait = append(s.PoolWait, api.PoolWaitRow{Tenant: r.Tenant, WaitPerSec: r.RUPerSec / 1000})
			s.Statements = append(s.Statements, api.StatementRow{Tenant: r.Tenant, Workers: int(r.RUPerSec / 10)})
		}
	}
	var ru float64
	for _, r := range s.Tenants {
		ru += r.RUPerSec
	}
	for i := range s.Tenants {
		s.Tenants[i].Share = s.Tenants[i].RUPerSec / ru
	}
	return s
}

func flat(v float64) []float64 {
	h := make([]float64, api.HistoryLen)
	for i := range h {
		h[i] = v
	}
	return h
}

func or(v, def float64) float64 {
	if v == 0 {
		return def
	}
	return v
}

func cmpS(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// rule is a rule for the scenarios: 3 victims at 2×, an offender with
// 30% of the RU at 3× its baseline, a quota at its baseline.
func rule(mode policy.AutopilotMode) policy.AutopilotRule {
	return policy.AutopilotRule{Name: "noisy", Mode: mode, VictimsMin: 3, MinShare: 0.3, MinFactor: 3,
		Action: policy.AutopilotQuota, Factor: 1, ForSeconds: 900, IntervalSeconds: 30, HoldSeconds: 30, RelaxSteps: 2}
}

// step is a decision reduced to what the tests compare.
type step struct {
	sec    int
	kind   Kind
	tenant string
	limit  float64
}

func (s step) String() string { return fmt.Sprintf("%d %s %s %g", s.sec, s.kind, s.tenant, s.limit) }

// run runs e over seconds [0, to) of sc; with enforce, each decision's
// limit caps the offender from the next second (a lift removes it).
func run(t *testing.T, e *Engine, sc *scenario, to int, enforce bool) ([]step, []Decision) {
	t.Helper()
	return runFrom(t, e, sc, 0, to, enforce)
}

// runFrom is run over seconds [from, to).
func runFrom(t *testing.T, e *Engine, sc *scenario, from, to int, enforce bool) ([]step, []Decision) {
	t.Helper()
	var steps []step
	var all []Decision
	for sec := from; sec < to; sec++ {
		for _, d := range e.Step(sc.snap(sec)) {
			if err := checkPart(d); err != nil {
				t.Fatalf("second %d: %v: %v", sec, d, err)
			}
			all = append(all, d)
			steps = append(steps, step{sec, d.Kind, d.Tenant, d.Limit})
			if !enforce {
				continue
			}
			if d.Kind == KindLift || d.Kind == KindCancel {
				sc.limit(d.Tenant, sec+1, 0)
			} else {
				sc.limit(d.Tenant, sec+1, d.Limit)
			}
		}
	}
	return steps, all
}

// checkPart checks that the policy part a decision writes is valid.
func checkPart(d Decision) error {
	switch {
	case d.PolicyRule != nil:
		return d.PolicyRule.Validate()
	case d.Budget != nil:
		return d.Budget.Validate()
	}
	return fmt.Errorf("no policy part")
}

func newEngine(t *testing.T, a policy.Autopilot) *Engine {
	t.Helper()
	e, err := New(a)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func same(t *testing.T, got []step, want ...step) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("decisions:\n got %v\nwant %v", got, want)
	}
}
