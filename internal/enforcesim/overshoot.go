package enforcesim

import (
	"math/rand/v2"
	"time"

	"github.com/qtop-dev/qtop/enforce"
	"github.com/qtop-dev/qtop/tenant"
)

// OvershootConfig is steady overload against one tenant's RU limit:
// Clients closed-loop clients send requests whose real cost is uniform in
// [CostMin, CostMax], known only when the request completes Latency after
// it was admitted (and charged then). A refused client retries after the
// Retry-After it was given.
type OvershootConfig struct {
	Limit            enforce.Limit
	Clients          int
	CostMin, CostMax float64
	// PlannedCost is the mean cost the static QPS limit was sized for.
	PlannedCost float64
	Latency     time.Duration
	Duration    time.Duration
	Seed        uint64
}

// DefaultOvershoot is the scenario of the package doc: a 1,000 RU/s limit
// (burst 1,000), 50 clients offering about ten times that with requests
// of 11–29 RU (mean 20, where the static limit planned 10) charged 50 ms
// after admission, for 10 minutes.
func DefaultOvershoot() OvershootConfig {
	return OvershootConfig{Limit: enforce.Limit{RUPerSecond: 1000, Burst: 1000}, Clients: 50, CostMin: 11, CostMax: 29,
		PlannedCost: 10, Latency: 50 * time.Millisecond, Duration: 10 * time.Minute, Seed: 3}
}

// OvershootRow is the outcome of one limiter.
type OvershootRow struct {
	Mode       string
	LimitRU    float64 // the configured RU over the run
	AdmittedRU float64
	// Overshoot is AdmittedRU / LimitRU − 1.
	Overshoot float64
}

// Overshoot runs the scenario against the RU bucket of an Enforcer
// (charged after the work) and against a static QPS limit sized for the
// planned mean cost.
func Overshoot(c OvershootConfig) ([]OvershootRow, error) {
	var rows []OvershootRow
	for _, ru := range []bool{false, true} {
		r, err := overshoot(c, ru)
		if err != nil {
			return nil, err
		}
		rows = append(rows, r)
	}
	return rows, nil
}

func overshoot(c OvershootConfig, ru bool) (OvershootRow, error) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := rand.New(rand.NewPCG(c.Seed, 11))
	tags := tenant.Tags{Tenant: "heavy", Tier: tenant.T2}
	row := OvershootRow{LimitRU: c.Limit.RUPerSecond * c.Duration.Seconds()}
	var (
		e      *enforce.Enforcer
		static *qpsLimit
		err    error
	)
	if ru {
		row.Mode = "RU bucket, charged after the work"
		e, err = enforce.New(enforce.WithPlans(map[string]enforce.Plan{enforce.PlanFree: {Limit: c.Limit, Weight: 1}}))
	} else {
		row.Mode = "static QPS limit (planned cost)"
		q := c.Limit.RUPerSecond / c.PlannedCost
		static, err = newQPSLimit(q, c.Limit.Burst/c.PlannedCost)
	}
	if err != nil {
		return row, err
	}
	type done struct {
		at   time.Duration
		cost float64
	}
	next := make([]time.Duration, c.Clients) // when each client acts
	for i := range next {
		next[i] = time.Duration(i) * time.Millisecond
	}
	var pending []done // completions, in time order (constant latency)
	const tick = time.Millisecond
	for t := time.Duration(0); t < c.Duration; t += tick {
		for len(pending) > 0 && pending[0].at <= t {
			if ru {
				e.ChargeAt(base.Add(pending[0].at), tags, pending[0].cost)
			}
			pending = pending[1:]
		}
		now := base.Add(t)
		for i := range next {
			if next[i] > t {
				continue
			}
			cost := c.CostMin + r.Float64()*(c.CostMax-c.CostMin)
			var ok bool
			var wait time.Duration
			if ru {
				d := e.AdmitAt(now, tags)
				ok, wait = d.Admitted(), d.RetryAfter
			} else {
				ok = static.take(now)
				wait = static.b.WaitAt(now, static.r, 0)
			}
			if !ok {
				next[i] = t + max(wait, tick)
				continue
			}
			row.AdmittedRU += cost
			pending = append(pending, done{t + c.Latency, cost})
			next[i] = t + c.Latency
		}
	}
	row.Overshoot = row.AdmittedRU/row.LimitRU - 1
	return row, nil
}
