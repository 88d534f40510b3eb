package enforcesim

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/qtop-dev/qtop/enforce"
	"github.com/qtop-dev/qtop/ratio"
	"github.com/qtop-dev/qtop/tenant"
)

// Load is one tenant's traffic: requests per second and RU per request,
// normally and during the spike.
type Load struct {
	Tenant               string
	Tier                 tenant.Tier
	Rate, Cost           float64
	SpikeRate, SpikeCost float64
}

// OverloadConfig is the mixed-tier overload: tenants share a backend that
// serves Capacity RU per second first come first served (plus a fixed
// Base latency); between SpikeStart and SpikeEnd the load rises to about
// three times capacity. A request is goodput when it completes within SLO.
type OverloadConfig struct {
	Capacity                       float64
	Base, SLO                      time.Duration
	Duration, SpikeStart, SpikeEnd time.Duration
	Loads                          []Load
	// Headroom sizes each tenant's static limit: Headroom × its normal
	// requests per second (static mode) or RU per second (RU mode).
	Headroom float64
	Seed     uint64
}

// DefaultOverload is the scenario of the package doc: 10,000 RU/s of
// capacity, normally 71% used; for 20 s two T3 batch tenants switch to
// 100-RU scans at twice their rate and T1 and T2 tenants surge 1.5× and 2×.
func DefaultOverload() OverloadConfig {
	c := OverloadConfig{Capacity: 10_000, Base: 5 * time.Millisecond, SLO: time.Second,
		Duration: 180 * time.Second, SpikeStart: 20 * time.Second, SpikeEnd: 40 * time.Second, Headroom: 1.5, Seed: 1}
	c.Loads = append(c.Loads, Load{"support", tenant.T0, 50, 2, 50, 2})
	for _, n := range []string{"app-1", "app-2", "app-3", "app-4"} {
		c.Loads = append(c.Loads, Load{n, tenant.T1, 300, 3, 450, 3})
	}
	for _, n := range []string{"api-1", "api-2", "api-3", "api-4"} {
		c.Loads = append(c.Loads, Load{n, tenant.T2, 200, 3, 400, 3})
	}
	for _, n := range []string{"batch-1", "batch-2"} {
		c.Loads = append(c.Loads, Load{n, tenant.T3, 50, 10, 100, 100})
	}
	return c
}

// OverloadRow is the outcome of one protection scheme.
type OverloadRow struct {
	Mode string
	// Goodput per tier (index 0 is T0): requests completed within the SLO
	// over requests offered, over the whole run and for requests offered
	// during the spike.
	Goodput, SpikeGoodput [tenant.NumTiers]float64
	// PeakP95 is the worst p95 latency of one second.
	PeakP95 time.Duration
	// Recovery is the time from the end of the spike until p95 latency
	// stays within twice its level before the spike; -1 if it never does.
	Recovery time.Duration
	// AdmittedRU is the RU per second admitted during the spike.
	AdmittedRU float64
	// T3Restored is, in RU mode, when T3's price came back to 1 after the
	// spike (gradual recovery); 0 otherwise.
	T3Restored time.Duration
}

type arrival struct {
	at   time.Duration
	load int
	cost float64
}

func arrivals(c OverloadConfig) []arrival {
	r := rand.New(rand.NewPCG(c.Seed, 7))
	var out []arrival
	for i, l := range c.Loads {
		t := time.Duration(0)
		for {
			rate := l.Rate
			if t >= c.SpikeStart && t < c.SpikeEnd {
				rate = l.SpikeRate
			}
			t += time.Duration(r.ExpFloat64() / rate * float64(time.Second))
			if t >= c.Duration {
				break
			}
			cost := l.Cost
			if t >= c.SpikeStart && t < c.SpikeEnd {
				cost = l.SpikeCost
			}
			out = append(out, arrival{t, i, cost})
		}
	}
	slices.SortStableFunc(out, func(a, b arrival) int { return int(a.at - b.at) })
	return out
}

type completion struct {
	at      time.Duration
	load    int
	cost    float64
	latency time.Duration
	spike   bool
}

// Overload runs the scenario with static per-tenant QPS limits and with
// RU buckets, ratio-driven tier prices and CoDel.
func Overload(c OverloadConfig) ([]OverloadRow, error) {
	arr := arrivals(c)
	var rows []OverloadRow
	for _, mode := range []string{"static QPS limits", "RU buckets + ratio shedding"} {
		row, err := overload(c, arr, mode != "static QPS limits")
		if err != nil {
			return nil, err
		}
		row.Mode = mode
		rows = append(rows, row)
	}
	return rows, nil
}

// overloadRun is one mode's run of the overload scenario: the
// limiters, the backend's queue and the tallies.
type overloadRun struct {
	c       OverloadConfig
	ru      bool
	base    time.Time
	static  []*qpsLimit
	e       *enforce.Enforcer
	codel   *enforce.CoDel
	sig     *ratio.Signal
	offered [tenant.NumTiers]float64
	good    [tenant.NumTiers]float64
	sOff    [tenant.NumTiers]float64
	sGood   [tenant.NumTiers]float64
	pending []completion
	last    time.Duration // when the backend finishes what it has
	bins    [][]time.Duration
	spikeRU float64
	// restoredAt is when T3's price was back to 1 after the spike.
	restoredAt time.Duration
}

func overload(c OverloadConfig, arr []arrival, ru bool) (OverloadRow, error) {
	r, err := newOverloadRun(c, ru)
	if err != nil {
		return OverloadRow{}, err
	}
	for _, a := range arr {
		r.complete(a.at)
		r.arrive(a)
	}
	r.complete(math.MaxInt64)
	return r.row(), nil
}

// newOverloadRun makes the limiters: with ru an Enforcer with RU buckets
// and ratio-driven prices, else one static QPS bucket per load.
func newOverloadRun(c OverloadConfig, ru bool) (*overloadRun, error) {
	r := &overloadRun{c: c, ru: ru, base: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), codel: enforce.NewCoDel(0, 0),
		sig:  ratio.NewSignal(ratio.WithShortWindow(2*time.Second), ratio.WithLongWindow(60*time.Second), ratio.WithSlots(4, 30), ratio.WithMinSamples(200)),
		bins: make([][]time.Duration, int(c.Duration/time.Second)+2)}
	if !ru {
		for _, l := range c.Loads {
			lim := c.Headroom * l.Rate
			b, err := newQPSLimit(lim, lim)
			if err != nil {
				return nil, err
			}
			r.static = append(r.static, b)
		}
		return r, nil
	}
	var err error
	if r.e, err = enforce.New(enforce.WithSignal(r.sig), enforce.WithEvalEvery(250*time.Millisecond)); err != nil {
		return nil, err
	}
	for _, l := range c.Loads {
		lim := c.Headroom * l.Rate * l.Cost
		if err := r.e.SetOverride(l.Tenant, enforce.Limit{RUPerSecond: lim, Burst: lim}); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (r *overloadRun) at(d time.Duration) time.Time { return r.base.Add(d) }

// complete finishes the requests the backend has done by upTo.
func (r *overloadRun) complete(upTo time.Duration) {
	for len(r.pending) > 0 && r.pending[0].at <= upTo {
		p := r.pending[0]
		r.pending = r.pending[1:]
		l := r.c.Loads[p.load]
		if r.ru {
			r.e.ChargeAt(r.at(p.at), tenant.Tags{Tenant: l.Tenant, Tier: l.Tier}, p.cost)
		}
		r.sig.ObserveAt(r.at(p.at), p.latency.Seconds())
		if b := int(p.at / time.Second); b < len(r.bins) {
			r.bins[b] = append(r.bins[b], p.latency)
		}
		if p.latency <= r.c.SLO {
			r.good[l.Tier.Index()]++
			if p.spike {
				r.sGood[l.Tier.Index()]++
			}
		}
	}
}

// arrive offers a to the limiters and, admitted, queues it at the backend.
func (r *overloadRun) arrive(a arrival) {
	c := r.c
	l := c.Loads[a.load]
	ti := l.Tier.Index()
	spike := a.at >= c.SpikeStart && a.at < c.SpikeEnd
	r.offered[ti]++
	if spike {
		r.sOff[ti]++
	}
	now := r.at(a.at)
	delay := max(0, r.last-a.at)
	admit := false
	if r.ru {
		tags := tenant.Tags{Tenant: l.Tenant, Tier: l.Tier}
		admit = r.e.ShedAt(now, tags).Admitted() &&
			(l.Tier == tenant.T0 || !r.codel.DropAt(now, delay, delay == 0)) &&
			r.e.AllowAt(now, tags).Admitted()
		if r.restoredAt == 0 && a.at >= c.SpikeEnd && r.e.Price().Multiplier(tenant.T3) == 1 {
			r.restoredAt = a.at - c.SpikeEnd
		}
	} else {
		admit = r.static[a.load].take(now)
	}
	if !admit {
		return
	}
	if spike {
		r.spikeRU += a.cost
	}
	start := max(a.at, r.last)
	r.last = start + time.Duration(a.cost/c.Capacity*float64(time.Second))
	lat := r.last - a.at + c.Base
	r.pending = append(r.pending, completion{at: a.at + lat, load: a.load, cost: a.cost, latency: lat, spike: spike})
}

// row is the run's figures: goodput, admitted RU in the spike, peak p95
// and the recovery.
func (r *overloadRun) row() OverloadRow {
	c := r.c
	var row OverloadRow
	for i := range r.offered {
		row.Goodput[i] = r.good[i] / r.offered[i]
		row.SpikeGoodput[i] = r.sGood[i] / r.sOff[i]
	}
	row.AdmittedRU = r.spikeRU / (c.SpikeEnd - c.SpikeStart).Seconds()
	row.T3Restored = r.restoredAt
	p95 := make([]time.Duration, len(r.bins))
	var baseline time.Duration
	for b, lat := range r.bins {
		if len(lat) == 0 {
			continue
		}
		slices.Sort(lat)
		p95[b] = lat[int(0.95*float64(len(lat)))]
		row.PeakP95 = max(row.PeakP95, p95[b])
		if t := time.Duration(b) * time.Second; t >= 5*time.Second && t < c.SpikeStart {
			baseline = max(baseline, p95[b])
		}
	}
	row.Recovery = recovery(p95, baseline, c)
	return row
}

// recovery is the time from the spike's end to the first second from
// which every full second's p95 stays within twice the baseline (−1:
// never).
func recovery(p95 []time.Duration, baseline time.Duration, c OverloadConfig) time.Duration {
	end := int(c.Duration/time.Second) - 1 // the last full second
	for b := int(c.SpikeEnd / time.Second); b <= end; b++ {
		ok := true
		for x := b; x <= end; x++ {
			if p95[x] > 2*baseline {
				ok = false
				break
			}
		}
		if ok {
			return time.Duration(b)*time.Second - c.SpikeEnd
		}
	}
	return -1
}
