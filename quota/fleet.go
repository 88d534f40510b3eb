package quota

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/qtop-dev/qtop/tenant"
)

// Defaults of a Fleet.
const (
	DefaultMaxSources = 10_000
	// DefaultNear lists a tenant once the fleet's demand reaches this
	// fraction of its limit, so that allowances cap growth before the
	// limit is crossed (a process may then grow to limit/demand times
	// its share before it is refused).
	DefaultNear = 0.5
	// DefaultHold is how many of a source's windows a verdict holds for,
	// and how many a source's usage counts for after its last report.
	DefaultHold = 3
	// DefaultMinFor is the shortest time a verdict holds, so that a reply
	// late by a few intervals (a busy collector) does not let a limited
	// tenant through.
	DefaultMinFor = time.Second
	// DefaultRepay is the time over which the fleet pays back admitted RU
	// above the limit (at least one of the process's windows).
	DefaultRepay = 500 * time.Millisecond
	// DefaultMaxCut bounds how much of the limit paying back debt may
	// withhold at once, so that an overshoot the fleet could not have
	// prevented (the interval before the verdicts arrived) is not paid
	// back by a deep undershoot.
	DefaultMaxCut = 0.25
)

// Rates are a tenant's usage in RU per second.
type Rates struct {
	Demand, Admitted float64
}

// Fleet is the collector's side: it keeps the latest usage of every
// reporting process, sums it per tenant, and answers each process with
// the verdicts of the tenants it must limit. With several collectors,
// each one's sums are exchanged (Local, SetRemote) and added. Not safe
// for concurrent use: the collector calls it under its own lock.
type Fleet struct {
	limit func(tenant string, tier tenant.Tier) (Limit, bool)
	cfg   fleetConfig

	sources  map[string]*source
	totals   map[string]*total
	remote   map[string]Rates
	remoteAt time.Time
	sweepAt  time.Time
}

type source struct {
	seen   time.Time
	window time.Duration
	avg    time.Duration // moving average of its windows
	rates  map[string]rate
	spare  map[string]rate // the previous report's, reused
}

type rate struct {
	tier             tenant.Tier
	demand, admitted float64 // RU/s
	limit            float64 // RU/s, when observed
	// idle counts the source's reports in a row without this listed
	// tenant: it keeps its last allowance for hold reports, so that a
	// process that was idle for a window does not come back unlimited.
	idle int
}

type total struct {
	tier             tenant.Tier
	demand, admitted float64
	n                int // sources that contribute
	// bal is the fleet's balance in RU while the tenant is listed: it
	// starts at 0 when the tenant is first listed (what is admitted
	// until one window later is forgiven), is refilled at the
	// limit, capped at one interval's worth, and charged with the RU every
	// report says was admitted; below 0 it is debt that later allowances
	// pay back.
	listed bool
	limit  float64 // the limit the balance was started with
	bal    float64
	balAt  time.Time
	balAt0 time.Time     // when the balance was started
	window time.Duration // the longest window of its sources
	// given holds the allowance last given to each source while the
	// tenant is listed, and givenSum their sum: a new allowance never
	// takes the sum above the collector's part of the limit, though the
	// shares it is computed from were reported at different times.
	given    map[string]float64
	givenSum float64
}

func (t *total) ungive(src string) {
	if a, ok := t.given[src]; ok {
		t.givenSum = max(0, t.givenSum-a)
		delete(t.given, src)
	}
}

// grantSlack is how far above its part of the limit a collector's grants
// may sum.
const grantSlack = 0.03

// charge refills the balance at limit up to capRU, then takes ru.
func (t *total) charge(now time.Time, limit, capRU, ru float64) {
	if t.balAt.IsZero() {
		t.bal, t.balAt = capRU, now
	}
	if dt := now.Sub(t.balAt); dt > 0 {
		t.bal = min(capRU, t.bal+limit*dt.Seconds())
		t.balAt = now
	}
	t.bal = max(t.bal-ru, -limit*float64(maxDebt/time.Second))
}

// balance is the balance at now without charging anything.
func (t *total) balance(now time.Time, limit, capRU float64) float64 {
	b := t.bal
	if dt := now.Sub(t.balAt); dt > 0 {
		b = min(capRU, b+limit*dt.Seconds())
	}
	return b
}

type fleetConfig struct {
	maxSources, maxTenants int
	near                   float64
	hold                   int
	minFor, repay          time.Duration
	maxCut                 float64
}

// FleetOption configures NewFleet.
type FleetOption func(*fleetConfig)

// WithMaxSources bounds the processes tracked; reports of further ones
// are ignored until some expire. Default DefaultMaxSources.
func WithMaxSources(n int) FleetOption { return func(c *fleetConfig) { c.maxSources = n } }

// WithFleetTenants bounds the tenants of one source's usage (the rest of a
// report is ignored) and the tenants summed. Default DefaultMaxTenants.
func WithFleetTenants(n int) FleetOption { return func(c *fleetConfig) { c.maxTenants = n } }

// WithNear sets the fraction of its limit at which a tenant is listed
// (0 < near ≤ 1). Default DefaultNear.
func WithNear(f float64) FleetOption { return func(c *fleetConfig) { c.near = f } }

// WithHold sets how many windows a verdict holds and a source's usage
// counts. Default DefaultHold.
func WithHold(n int) FleetOption { return func(c *fleetConfig) { c.hold = n } }

// WithRepay sets the time over which the fleet pays back RU admitted above
// a limit (while the tenant is listed, its allowance is lowered by the
// debt divided by this time, or by the reporting window if longer).
// Default DefaultRepay.
func WithRepay(d time.Duration) FleetOption { return func(c *fleetConfig) { c.repay = d } }

// WithMaxCut sets the largest fraction of the limit that paying back debt
// withholds (0 to 1; 0 forgives all debt). Default DefaultMaxCut.
func WithMaxCut(f float64) FleetOption { return func(c *fleetConfig) { c.maxCut = f } }

// WithMinFor sets the shortest time a verdict holds. Default
// DefaultMinFor.
func WithMinFor(d time.Duration) FleetOption { return func(c *fleetConfig) { c.minFor = d } }

// NewFleet returns an empty fleet. limit returns a tenant's fleet-wide
// limit, false for a tenant without one; it is called for every tenant of
// every report, so it should be a map lookup.
func NewFleet(limit func(tenant string, tier tenant.Tier) (Limit, bool), opts ...FleetOption) (*Fleet, error) {
	c := fleetConfig{maxSources: DefaultMaxSources, maxTenants: DefaultMaxTenants, near: DefaultNear, hold: DefaultHold,
		minFor: DefaultMinFor, repay: DefaultRepay, maxCut: DefaultMaxCut}
	for _, o := range opts {
		o(&c)
	}
	switch {
	case limit == nil:
		return nil, fmt.Errorf("%w: nil limit function", ErrConfig)
	case c.maxSources < 1 || c.maxTenants < 1:
		return nil, fmt.Errorf("%w: max sources %d, max tenants %d (want ≥ 1)", ErrConfig, c.maxSources, c.maxTenants)
	case !(c.near > 0 && c.near <= 1):
		return nil, fmt.Errorf("%w: near %v (want 0 < near ≤ 1)", ErrConfig, c.near)
	case c.hold < 1 || c.hold > 100:
		return nil, fmt.Errorf("%w: hold %d windows (want 1 to 100)", ErrConfig, c.hold)
	case !(c.maxCut >= 0 && c.maxCut <= 1):
		return nil, fmt.Errorf("%w: max cut %v (want 0 to 1)", ErrConfig, c.maxCut)
	case c.minFor < 0 || c.minFor > time.Hour || c.repay <= 0 || c.repay > time.Hour:
		return nil, fmt.Errorf("%w: min for %v, repay %v (want 0 to 1 h, and > 0)", ErrConfig, c.minFor, c.repay)
	}
	return &Fleet{limit: limit, cfg: c, sources: make(map[string]*source),
		totals: make(map[string]*total), remote: map[string]Rates{}}, nil
}

// SetLimits replaces the limit function (a new policy).
func (f *Fleet) SetLimits(limit func(tenant string, tier tenant.Tier) (Limit, bool)) {
	if limit != nil {
		f.limit = limit
	}
}

// Observe takes one report's usage: what process src did over a window
// of length window ending about now. It replaces the process's previous
// usage. Only tenants with a limit are kept.
func (f *Fleet) Observe(now time.Time, src string, window time.Duration, usage []Usage) {
	f.sweep(now)
	if window <= 0 {
		return
	}
	s := f.sources[src]
	if s == nil {
		if len(f.sources) >= f.cfg.maxSources {
			return
		}
		s = &source{rates: make(map[string]rate), spare: make(map[string]rate)}
		f.sources[src] = s
	}
	f.subtract(src, s, false)
	old := s.rates
	clear(s.spare)
	s.rates, s.spare = s.spare, old
	s.seen, s.window = now, window
	if end := now.Add(time.Duration(f.cfg.hold) * window); end.Before(f.sweepAt) {
		f.sweepAt = end
	}
	if s.avg == 0 {
		s.avg = window
	}
	s.avg += (window - s.avg) / 5
	// A window much shorter than the source's usual one (a late cut
	// followed by one on time) would make a rate of a few requests: take
	// the rate over at least half the usual window.
	sec := max(window, s.avg/2).Seconds()
	for i, u := range usage {
		if i >= f.cfg.maxTenants {
			break
		}
		lim, ok := f.limit(u.Tenant, u.Tier)
		if !ok {
			continue
		}
		d, a := u.Demand()/sec, u.Admitted/sec
		if !finiteNonNeg(d) || !finiteNonNeg(a) {
			continue
		}
		r := s.rates[u.Tenant]
		r.tier, r.demand, r.admitted, r.limit = u.Tier, r.demand+d, r.admitted+a, lim.RUPerSecond
		s.rates[u.Tenant] = r
	}
	for name, r := range old {
		if _, ok := s.rates[name]; ok || r.idle >= f.cfg.hold {
			continue
		}
		if t := f.totals[name]; t != nil && t.listed {
			s.rates[name] = rate{tier: r.tier, limit: r.limit, idle: r.idle + 1}
		}
	}
	for name, r := range s.rates {
		t := f.totals[name]
		if t == nil {
			if len(f.totals) >= f.cfg.maxTenants {
				delete(s.rates, name)
				continue
			}
			t = &total{}
			f.totals[name] = t
		}
		t.tier = r.tier
		t.window = max(t.window, window)
		t.demand += r.demand
		t.admitted += r.admitted
		t.n++
		if t.listed {
			// Only the part of the window that began one window after the
			// tenant was listed: until every process has had its first
			// reply, what it admits could not have been limited, and is
			// forgiven.
			part := min(1, max(0, now.Sub(t.balAt0.Add(window)).Seconds()/sec))
			t.charge(now, r.limit, r.limit*sec, r.admitted*sec*part)
		}
	}
	for name := range old {
		t := f.totals[name]
		if t == nil {
			continue
		}
		if _, still := s.rates[name]; !still {
			t.ungive(src)
		}
		if t.n <= 0 {
			delete(f.totals, name)
		}
	}
}

func finiteNonNeg(v float64) bool { return v >= 0 && !math.IsInf(v, 0) }

// subtract removes s's contribution from the totals, and the totals left
// without a source when drop is set.
func (f *Fleet) subtract(src string, s *source, drop bool) {
	for name, r := range s.rates {
		t := f.totals[name]
		if t == nil {
			continue
		}
		if drop {
			t.ungive(src)
		}
		t.n--
		if t.n <= 0 {
			t.n, t.demand, t.admitted = 0, 0, 0
			if drop {
				delete(f.totals, name)
			}
			continue
		}
		t.demand = max(0, t.demand-r.demand)
		t.admitted = max(0, t.admitted-r.admitted)
	}
}

// sweep forgets sources silent for longer than hold of their windows.
func (f *Fleet) sweep(now time.Time) {
	if now.Before(f.sweepAt) {
		return
	}
	next := now.Add(time.Hour)
	for name, s := range f.sources {
		end := s.seen.Add(time.Duration(f.cfg.hold) * s.window)
		if !now.Before(end) {
			f.subtract(name, s, true)
			delete(f.sources, name)
			continue
		}
		if end.Before(next) {
			next = end
		}
	}
	f.sweepAt = next
}

// Rates returns a tenant's fleet-wide usage: the sum over this
// collector's sources and the other collectors'.
func (f *Fleet) Rates(tenant string) Rates {
	r := f.remote[tenant]
	if t := f.totals[tenant]; t != nil {
		r.Demand += t.demand
		r.Admitted += t.admitted
	}
	return r
}

// Local calls fn with this collector's sums of every tenant it tracks.
func (f *Fleet) Local(fn func(tenant string, r Rates)) {
	for name, t := range f.totals {
		fn(name, Rates{Demand: t.demand, Admitted: t.admitted})
	}
}

// SetRemote sets the sums of the other collectors at now (replacing the
// last), and charges what they admitted since the last call to the
// tenants' balances.
func (f *Fleet) SetRemote(now time.Time, r map[string]Rates) {
	if r == nil {
		r = map[string]Rates{}
	}
	if dt := now.Sub(f.remoteAt); !f.remoteAt.IsZero() && dt > 0 {
		for name, rr := range r {
			if t := f.totals[name]; t != nil && t.listed {
				lim, ok := f.limit(name, t.tier)
				// The others' sums lag one exchange more than this
				// collector's own reports: forgive two windows.
				part := min(1, max(0, now.Sub(t.balAt0.Add(2*t.window)).Seconds()/dt.Seconds()))
				if ok {
					t.charge(now, lim.RUPerSecond, lim.RUPerSecond*dt.Seconds(), rr.Admitted*dt.Seconds()*part)
				}
			}
		}
	}
	f.remote, f.remoteAt = r, now
}

// Verdicts appends to dst the verdicts for process src at now: one per
// tenant of its latest usage whose fleet demand has reached the near
// fraction of the tenant's limit. Each allows src the limit times its
// share of the fleet's demand; each holds for hold of src's windows.
func (f *Fleet) Verdicts(now time.Time, src string, dst []Verdict) []Verdict {
	s := f.sources[src]
	if s == nil {
		return dst
	}
	hold := max(time.Duration(f.cfg.hold)*s.window, f.cfg.minFor)
	start := len(dst)
	for name, r := range s.rates {
		lim, ok := f.limit(name, r.tier)
		if !ok {
			continue
		}
		allow, capRU := lim.RUPerSecond, lim.RUPerSecond*s.window.Seconds()
		t := f.totals[name]
		if t != nil && t.listed && t.limit == lim.RUPerSecond {
			if b := t.balance(now, lim.RUPerSecond, capRU); b < 0 {
				cut := min(-b/max(f.cfg.repay, s.window).Seconds(), f.cfg.maxCut*allow)
				allow = max(0, allow-cut)
			}
		}
		v, limited := Decide(lim, allow, r.demand, f.Rates(name).Demand, f.cfg.near)
		if t != nil && (t.listed != limited || t.limit != lim.RUPerSecond) {
			// Newly listed, or a new limit: start with an empty balance.
			t.listed, t.limit = limited, lim.RUPerSecond
			t.bal, t.balAt, t.balAt0 = 0, now, now
			clear(t.given)
			t.givenSum = 0
		}
		if !limited {
			continue
		}
		if t != nil && !math.IsInf(v.Allowance, 0) {
			// This collector's part of the fleet's allowance, less what its
			// other sources hold now.
			fleet := t.demand + f.remote[name].Demand
			budget := allow
			if fleet > 0 {
				budget = allow * t.demand / fleet
			}
			old := t.given[src]
			if r.idle > 0 {
				v.Allowance = old // no demand in its last window: keep its share
			}
			if fleet >= lim.RUPerSecond {
				// Over its limit: never above what the others leave, with a
				// slack for the noise of shares measured at different
				// times (a hard cap would clip only their upward swings).
				v.Allowance = max(0, min(v.Allowance, budget*(1+grantSlack)-(t.givenSum-old)))
			} else {
				// Under it: its share and all the fleet's headroom, so that
				// a process whose last window was quiet is not refused.
				v.Allowance += lim.RUPerSecond - fleet
			}
			if t.given == nil {
				t.given = make(map[string]float64)
			}
			t.given[src] = v.Allowance
			t.givenSum = max(0, t.givenSum-old+v.Allowance)
		}
		v.Tenant, v.For = name, hold
		dst = append(dst, v)
	}
	sort.Slice(dst[start:], func(i, j int) bool { return dst[start+i].Tenant < dst[start+j].Tenant })
	return dst
}

// Decide is the quota rule for one tenant: with the fleet's demand fleet
// (RU/s) and one process's demand own, it reports whether the tenant is
// listed (fleet ≥ near × limit) and the verdict's rejection rate,
// (fleet − limit) / fleet or 0, and allowance, allow × own / fleet, where
// allow is the fleet's allowance: the limit, lowered while the fleet pays
// back debt.
func Decide(lim Limit, allow, own, fleet, near float64) (Verdict, bool) {
	if lim.RUPerSecond == 0 && fleet > 0 {
		return Verdict{Rate: 1, Shadow: lim.Shadow}, true
	}
	if !(fleet > 0) || fleet < near*lim.RUPerSecond {
		return Verdict{}, false
	}
	v := Verdict{Rate: max(0, (fleet-lim.RUPerSecond)/fleet), Allowance: allow * own / fleet, Shadow: lim.Shadow}
	return v, true
}
