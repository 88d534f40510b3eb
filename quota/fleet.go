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
	remote   map[string]remote
	remoteAt time.Time
	syncAt   [2]time.Time // this collector's last two exchanges (Local)
	// avgWindow is a moving average of every report's window.
	avgWindow time.Duration
	sweepAt   time.Time
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
	// charged: its window began while the tenant was listed (in the
	// listing epoch), so its admitted RU count in the fleet's debt.
	charged bool
	epoch   uint32
}

type total struct {
	tier             tenant.Tier
	demand, admitted float64
	n                int // sources that contribute
	// bal is the fleet's balance in RU while the tenant is listed: it
	// starts at 0 when the tenant is listed (or goes over its limit from
	// under it, or its limit changes), is refilled at the limit, banked up
	// to 5 % of a second of it, and charged at the admitted rate of the
	// windows begun since (chargeable, and the other collectors'); below
	// 0 it is debt that later allowances pay back. balAt0 is when it was
	// started.
	listed bool
	limit  float64 // the limit the balance was started with
	bal    float64
	balAt  time.Time
	balAt0 time.Time
	window time.Duration // the longest window of its sources
	// given holds the allowance last given to each source while the
	// tenant is listed, and the demand the source last reported. What
	// this collector's sources may admit before their next reply is
	// committed: the demand of the sources without an allowance (they
	// reported before the tenant was listed: not limited until their
	// next reply), and for each one with an allowance, the allowance, or
	// twice its demand if less (reserved: a process under its allowance is
	// not expected to more than double within a window). A new
	// allowance never takes it above the collector's part of the limit,
	// though the shares it is computed from were reported at different
	// times. givenDem and reserved are the sums over the counted grants.
	given              map[string]grant
	givenDem, reserved float64
	// replacing is set when the limit changed while the tenant was
	// listed: the sources without an allowance under the new limit still
	// hold one under the old, which their next reply replaces, and count
	// at their share rather than their demand.
	replacing bool
	// chargeable is the admitted RU/s of the sources whose window began
	// after the tenant was listed in this epoch (a new listing or a new
	// limit begins one): what the balance is charged with.
	chargeable float64
	epoch      uint32
	// over is set while the fleet's demand is over the limit (until it
	// falls below overUntil of it).
	over bool
	// syncDem is this collector's demand at its last two exchanges with
	// the others (Local), to line the others' sums up with it in time.
	syncDem [2]float64
}

type grant struct {
	allowance, demand float64
	counted           bool // in givenDem and reserved
}

// growth is how many times its last window's demand a source under its
// allowance is expected to admit at most before its next report.
const growth = 2

func (g grant) reserve() float64 { return min(g.allowance, growth*g.demand) }

// count adds src's grant g (with its demand now) to the sums.
func (t *total) count(src string, g grant) {
	if t.given == nil {
		t.given = make(map[string]grant)
	}
	g.counted = true
	t.given[src] = g
	t.givenDem += g.demand
	t.reserved += g.reserve()
}

// uncount takes src's grant out of the sums (it stays in given).
func (t *total) uncount(src string) {
	if g, ok := t.given[src]; ok && g.counted {
		t.givenDem = max(0, t.givenDem-g.demand)
		t.reserved = max(0, t.reserved-g.reserve())
		g.counted = false
		t.given[src] = g
	}
}

func (t *total) ungive(src string) {
	t.uncount(src)
	delete(t.given, src)
}

// committed is what this collector's sources may admit now (RU/s), but
// for a source without an allowance whose demand is except
// (their share of budget, for the sources without an allowance, while
// an old limit's allowances are replaced).
func (t *total) committed(now time.Time, budget, except float64) float64 {
	ungiven := max(0, t.demand-t.givenDem-except)
	if t.replacing && now.Sub(t.balAt0) < 2*t.window && t.demand > 0 {
		ungiven *= min(1, budget/t.demand)
	}
	return ungiven + t.reserved
}

// resetGrants forgets every allowance (a new listing or a new limit: the
// allowances in force were computed for another limit, and are replaced
// within one window).
func (t *total) resetGrants() {
	clear(t.given)
	t.givenDem, t.reserved = 0, 0
}

// grantSlack is how far above its part of the limit a collector's grants
// may sum.
const grantSlack = 0.01

// sharePull is the part of what the sources would hold above (or below)
// the collector's part of the limit that a process's allowance gives back
// (or takes) at its report.
const sharePull = 0.5

// maxPull is how far above its share, as a fraction of it, a process may
// be given.
const maxPull = 0.5

// bank is how much unused limit the balance keeps, in seconds of the
// limit: enough for the noise of the allowances, little enough that RU
// admitted above the limit soon becomes debt.
const bank = 0.05

// integrate brings the balance to now: refilled at limit, charged at the
// fleet's admitted RU/s (the sum of every source's rate over its last
// window, so that the reports' arriving in bunches does not make debt;
// it changes only where integrate is called), kept within its bank and
// its largest debt.
func (f *Fleet) integrate(now time.Time, name string, t *total) {
	t.bal = f.balance(now, name, t, t.limit)
	t.balAt = now
}

// balance is t's balance at now. What this collector's sources admitted
// in windows that began before the tenant was listed is not charged
// (before a process has had its first reply it could not have been
// limited, and is forgiven), nor the other collectors' until one window
// after (they forgive their own, and their sums lag an exchange).
func (f *Fleet) balance(now time.Time, name string, t *total, limit float64) float64 {
	b := t.bal
	if !t.balAt.IsZero() && now.After(t.balAt) {
		b += limit * now.Sub(t.balAt).Seconds()
		charged := func(from time.Time) float64 {
			return max(0, now.Sub(later(t.balAt, from)).Seconds())
		}
		b -= t.chargeable * charged(t.balAt0)
		b -= f.remote[name].admitted * charged(t.balAt0.Add(t.window))
	}
	return min(max(b, -limit*float64(maxDebt/time.Second)), limit*bank)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
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
		totals: make(map[string]*total), remote: map[string]remote{}}, nil
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
	f.integrateFor(now, s, usage)
	f.subtract(src, s, false)
	old := s.rates
	clear(s.spare)
	s.rates, s.spare = s.spare, old
	sec := f.newWindow(now, s, window)
	f.takeRates(s, usage, old, sec)
	f.addRates(now, src, s, window)
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

// integrateFor brings up to date the balances of the listed tenants that
// s's previous report or usage name.
func (f *Fleet) integrateFor(now time.Time, s *source, usage []Usage) {
	for name := range s.rates {
		if t := f.totals[name]; t != nil && t.listed {
			f.integrate(now, name, t)
		}
	}
	for i, u := range usage {
		if i >= f.cfg.maxTenants {
			break
		}
		if t := f.totals[u.Tenant]; t != nil && t.listed {
			f.integrate(now, u.Tenant, t)
		}
	}
}

// newWindow records s's report of a window ending at now and returns the
// seconds its rates are taken over.
func (f *Fleet) newWindow(now time.Time, s *source, window time.Duration) float64 {
	s.seen, s.window = now, window
	if end := now.Add(time.Duration(f.cfg.hold) * window); end.Before(f.sweepAt) {
		f.sweepAt = end
	}
	if s.avg == 0 {
		// A process's first window may be short (it began when the
		// process did): start from the fleet's usual one.
		s.avg = window
		if f.avgWindow > 0 {
			s.avg = f.avgWindow
		}
	}
	if f.avgWindow == 0 {
		f.avgWindow = window
	}
	f.avgWindow += (window - f.avgWindow) / 64
	s.avg += (window - s.avg) / 5
	// A window much shorter than the source's usual one (a late cut
	// followed by one on time) would make a rate of a few requests: take
	// the rate over at least half the usual window.
	return max(window, s.avg/2).Seconds()
}

// takeRates sets s's rates from usage over sec seconds; a listed tenant
// of its previous rates (old) that the usage leaves out stays, idle, for
// up to the hold.
func (f *Fleet) takeRates(s *source, usage []Usage, old map[string]rate, sec float64) {
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
}

// addRates adds s's rates to the totals (making room up to the tenant
// bound) and to the grants made to src.
func (f *Fleet) addRates(now time.Time, src string, s *source, window time.Duration) {
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
		if t.listed && !now.Add(-window).Before(t.balAt0) {
			r.charged, r.epoch = true, t.epoch
			t.chargeable += r.admitted
		} else {
			r.charged = false
		}
		s.rates[name] = r
		if g, ok := t.given[src]; ok {
			g.demand = r.demand
			t.count(src, g)
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
		t.uncount(src)
		if r.charged && r.epoch == t.epoch {
			t.chargeable = max(0, t.chargeable-r.admitted)
		}
		if drop {
			t.ungive(src)
		}
		t.n--
		if t.n <= 0 {
			t.n, t.demand, t.admitted = 0, 0, 0
			t.givenDem, t.reserved = 0, 0
			if drop {
				delete(f.totals, name)
			}
			continue
		}
		t.demand = max(0, t.demand-r.demand)
		t.admitted = max(0, t.admitted-r.admitted)
	}
}

// sweep forgets sources silent for longer than hold of their windows,
// and the other collectors' sums hold exchanges (or windows, if longer;
// at least twice the shortest verdict) after the last (Redis unreachable:
// this collector counts its own).
func (f *Fleet) sweep(now time.Time) {
	if !f.remoteAt.IsZero() && len(f.remote) > 0 {
		every := max(f.avgWindow, f.syncAt[0].Sub(f.syncAt[1]))
		if !f.syncAt[1].IsZero() && now.Sub(f.remoteAt) > max(time.Duration(f.cfg.hold)*every, 2*f.cfg.minFor) {
			for name, t := range f.totals {
				if t.listed {
					f.integrate(now, name, t)
				}
			}
			clear(f.remote)
		}
	}
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

// Remote is one other collector's sums, as an exchange returned them: Age
// is how long before the exchange that collector wrote them.
type Remote struct {
	Age   time.Duration
	Rates map[string]Rates
}

// remote is the other collectors' sums of one tenant. Their demand is
// kept as a multiple of this collector's (ratio: the sum over the others
// of their demand over this collector's demand when they wrote it), so
// that between exchanges it follows this collector's own, fresher,
// reports: a fleet-wide change shows in every collector's reports at
// once, and the others' sums would otherwise lag by an exchange. What
// cannot be lined up (this collector had no demand then) is kept as it
// was (fixed).
type remote struct {
	demand, admitted float64 // as exchanged
	ratio            float64 // others' demand per RU/s of this collector's
	base             float64 // the others' demand behind ratio
	fixed            float64
}

// maxGrowth bounds the others' demand estimated from this collector's
// growth since they wrote it, as a factor either way.
const maxGrowth = 16

// demandAt is the others' demand estimated at this collector's demand
// local.
func (r remote) demandAt(local float64) float64 {
	est := r.fixed
	if r.base > 0 {
		est += min(max(r.ratio*local, r.base/maxGrowth), r.base*maxGrowth)
	}
	return est
}

// fleetDemand is the tenant's demand over every collector.
func (f *Fleet) fleetDemand(name string, t *total) float64 {
	d := 0.0
	if t != nil {
		d = t.demand
	}
	if r, ok := f.remote[name]; ok {
		d += r.demandAt(d)
	}
	return d
}

// Rates returns a tenant's fleet-wide usage: the sum over this
// collector's sources and the other collectors' (their demand estimated
// now, their admitted RU as last exchanged).
func (f *Fleet) Rates(tenant string) Rates {
	t := f.totals[tenant]
	r := Rates{Demand: f.fleetDemand(tenant, t), Admitted: f.remote[tenant].admitted}
	if t != nil {
		r.Admitted += t.admitted
	}
	return r
}

// Local calls fn with this collector's sums of every tenant it tracks,
// to be exchanged at now with the other collectors (SetRemote takes
// their answer). The admitted RU/s of a listed tenant are those that
// count against its limit (not what this collector forgave).
func (f *Fleet) Local(now time.Time, fn func(tenant string, r Rates)) {
	f.syncAt[1], f.syncAt[0] = f.syncAt[0], now
	for name, t := range f.totals {
		t.syncDem[1], t.syncDem[0] = t.syncDem[0], t.demand
		r := Rates{Demand: t.demand, Admitted: t.admitted}
		if t.listed {
			r.Admitted = t.chargeable
		}
		fn(name, r)
	}
}

// localAt is t's demand age before the last exchange, from the last two
// (a tenant without a total had none).
func (f *Fleet) localAt(t *total, age time.Duration) float64 {
	if t == nil {
		return 0
	}
	span := f.syncAt[0].Sub(f.syncAt[1])
	if f.syncAt[1].IsZero() || span <= 0 || age <= 0 {
		return t.syncDem[0]
	}
	w := min(1, age.Seconds()/span.Seconds())
	return t.syncDem[0]*(1-w) + t.syncDem[1]*w
}

// SetRemote sets the sums of the other collectors, from an exchange made
// at now right after Local (replacing the last); the tenants' balances
// are charged with what they admit from now on.
func (f *Fleet) SetRemote(now time.Time, others []Remote) {
	for name, t := range f.totals {
		if t.listed {
			f.integrate(now, name, t)
		}
	}
	clear(f.remote)
	for _, o := range others {
		for name, rr := range o.Rates {
			r := f.remote[name]
			r.demand += rr.Demand
			r.admitted += rr.Admitted
			if at := f.localAt(f.totals[name], o.Age); at > 0 {
				r.ratio += rr.Demand / at
				r.base += rr.Demand
			} else {
				r.fixed += rr.Demand
			}
			f.remote[name] = r
		}
	}
	f.remoteAt = now
}

// overUntil is the fraction of the limit below which a tenant is no
// longer over it (a new crossing forgives a window).
const overUntil = 0.9

// unlist is the fraction of near below which a listed tenant is no
// longer listed: a fleet whose demand hovers around near does not flap
// between limited and not (each new listing forgets the allowances).
const unlist = 0.8

// Verdicts appends to dst the verdicts for process src at now: one per
// tenant of its latest usage whose fleet demand has reached the near
// fraction of the tenant's limit. Each allows src the limit times its
// share of the fleet's demand, less what the others hold now beyond
// their share; each holds for hold of src's windows.
func (f *Fleet) Verdicts(now time.Time, src string, dst []Verdict) []Verdict {
	s := f.sources[src]
	if s == nil {
		return dst
	}
	hold := max(time.Duration(f.cfg.hold)*s.window, f.cfg.minFor)
	start := len(dst)
	for name, r := range s.rates {
		lim, ok := f.limit(name, r.tier)
		t := f.totals[name]
		if !ok || t == nil {
			continue
		}
		v, allow, fleet, limited := f.decide(now, name, t, lim, s.window, r.demand)
		if !limited {
			continue
		}
		v.Allowance = f.share(now, src, t, r, v.Allowance, allow, fleet)
		t.count(src, grant{allowance: v.Allowance, demand: r.demand})
		v.Tenant, v.For = name, hold
		dst = append(dst, v)
	}
	sort.Slice(dst[start:], func(i, j int) bool { return dst[start+i].Tenant < dst[start+j].Tenant })
	return dst
}

// decide applies the quota rule to tenant name (total t, limit lim) for
// a source of demand own whose window is window: the verdict, the fleet's
// allowance (the limit, lowered while the fleet pays back debt), the
// fleet's demand, and whether the tenant is listed. It starts the balance
// again when the listing or the limit changes, and follows whether the
// fleet is over the limit.
func (f *Fleet) decide(now time.Time, name string, t *total, lim Limit, window time.Duration, own float64) (v Verdict, allow, fleet float64, limited bool) {
	allow = lim.RUPerSecond
	near := f.cfg.near
	if t.listed && t.limit == lim.RUPerSecond {
		if b := f.balance(now, name, t, lim.RUPerSecond); b < 0 {
			cut := min(-b/max(f.cfg.repay, window).Seconds(), f.cfg.maxCut*allow)
			allow = max(0, allow-cut)
		}
		near *= unlist
	}
	fleet = f.fleetDemand(name, t)
	v, limited = Decide(lim, allow, own, fleet, near)
	if t.listed != limited || t.limit != lim.RUPerSecond {
		// Newly listed, or a new limit: start with an empty balance.
		t.replacing = t.listed && limited
		t.listed, t.limit = limited, lim.RUPerSecond
		t.bal, t.balAt, t.balAt0 = 0, now, now
		t.epoch++
		t.chargeable = 0
		t.resetGrants()
	}
	if !limited {
		return v, allow, fleet, false
	}
	switch {
	case !t.over && fleet >= lim.RUPerSecond:
		// Over the limit from under it: the allowances in force were
		// given under it, with headroom, and what they let through
		// until every process has had a reply is forgiven, as at a
		// new listing (paying it back would hold the fleet under
		// the limit in the interval after).
		t.over = true
		t.balAt0 = now
		t.bal = min(t.bal, max(0, f.balance(now, name, t, lim.RUPerSecond)))
		t.balAt = now
		t.epoch++
		t.chargeable = 0
	case t.over && fleet < overUntil*lim.RUPerSecond:
		t.over = false
	}
	return v, allow, fleet, true
}

// share returns the allowance of source src (rates r) of tenant total t,
// from its verdict's allowance base, the fleet's allowance allow and the
// fleet's demand fleet.
func (f *Fleet) share(now time.Time, src string, t *total, r rate, base, allow, fleet float64) float64 {
	// This collector's part of the fleet's allowance, and what its
	// sources hold of it now besides src.
	budget := allow
	if fleet > 0 {
		budget = allow * t.demand / fleet
	}
	g, had := t.given[src]
	t.uncount(src)
	others := t.committed(now, budget, r.demand)
	// What the sources would hold with its share, above (or below)
	// the collector's part of the limit and its slack: the process
	// takes half of it off its share (or adds half of what is left,
	// up to maxPull of its share). Shares reported at different times
	// do not sum to the part; each report halves the difference, so
	// the sum stays at the part, and a process above its share gives
	// it back at its next report. (Taking it all off the reporter
	// starves the processes that report while the others are above
	// their shares, and they keep that for an interval.)
	if r.idle > 0 && had {
		base = g.allowance // no demand in its last window: keep its share
	}
	excess := others + base - budget*(1+grantSlack)
	pull := maxPull
	if fleet < allow {
		// Under the limit a share is already above the demand (by
		// limit/fleet); more would be let through at once if the
		// whole fleet jumped over it.
		pull = 0
	}
	a := min(max(0, base-sharePull*excess), base*(1+pull))
	if fleet < allow && fleet > 0 && t.n > 0 {
		// Under the limit, every source gets at least an equal part of
		// the collector's part of the headroom, so that a process whose
		// last window was quiet (or whose share the others' allowances
		// took) is not refused.
		a = max(a, (allow-fleet)*t.demand/fleet/float64(t.n))
	}
	return a
}

// Decide is the quota rule for one tenant: with the fleet's demand fleet
// (RU/s) and one process's demand own, it reports whether the tenant is
// listed (fleet ≥ near × limit) and the verdict's rejection rate,
// (fleet − limit) / fleet or 0, and allowance, allow × own / fleet, where
// allow is the fleet's allowance: the limit, lowered while the fleet pays
// back debt. Under the limit the shares sum to more than the demand.
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
