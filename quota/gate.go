package quota

import (
	"fmt"
	"hash/maphash"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/gcra"
	"github.com/qtop-dev/qtop/tenant"
)

// Defaults of a Gate.
const (
	DefaultMaxTenants = 10_000
	DefaultBurst      = 50 * time.Millisecond
	DefaultCost       = 1.0
)

// maxDebt caps how far into the future an allowance's debt reaches.
const maxDebt = time.Minute

// Gate applies the collector's verdicts inside one process. AllowAt and
// ChargeAt are the request path: local, no remote call, no allocation
// once a tenant is known. Apply takes the verdicts of a reply; Cut takes
// the usage for the next report. Safe for concurrent use; make one with
// NewGate.
type Gate struct {
	cfg    gateConfig
	seed   maphash.Seed
	shards [gateShards]gateShard

	refused, shadowRefused, expired, untracked atomic.Uint64
	nlimited, ntracked                         atomic.Int64
}

// gateShards spreads tenants over locks, so that cores deciding for
// different tenants do not contend.
const gateShards = 16

type gateShard struct {
	mu      sync.Mutex
	limited map[string]*allowance
	usage   map[string]*tally
	_       [40]byte // a cache line each
}

func (g *Gate) shard(tenant string) *gateShard {
	return &g.shards[maphash.String(g.seed, tenant)%gateShards]
}

// allowance is one limited tenant's local rate: a token bucket that may
// go into debt, charged after the work.
type allowance struct {
	rate    gcra.Rate
	b       gcra.Bucket
	none    bool    // allowance 0: everything refused
	debt    float64 // RU below a full bucket at the last Apply
	until   int64
	shadow  bool
	expired bool // counted once
	seen    bool // in the latest answer (Apply's scratch)
}

type tally struct {
	tier              tenant.Tier
	admitted, refused float64
	n                 uint64
	mean              float64 // RU per admitted request, last known
}

type gateConfig struct {
	maxTenants int
	burst      time.Duration
	cost       float64
	reg        prometheus.Registerer
}

// GateOption configures NewGate.
type GateOption func(*gateConfig)

// WithMaxTenants bounds the tenants whose usage a Gate tracks per
// interval (and the verdicts it keeps); the usage of tenants beyond it is
// not reported and is counted (Stats.Untracked). Default
// DefaultMaxTenants.
func WithMaxTenants(n int) GateOption { return func(c *gateConfig) { c.maxTenants = n } }

// WithBurst sets how much an allowance may admit at once after an idle
// spell, as a duration of its rate. Default DefaultBurst.
func WithBurst(d time.Duration) GateOption { return func(c *gateConfig) { c.burst = d } }

// WithDefaultCost sets the RU a refused request is estimated at before
// the tenant has an admitted request to average. Default DefaultCost.
func WithDefaultCost(ru float64) GateOption { return func(c *gateConfig) { c.cost = ru } }

// WithRegisterer registers the Gate's metrics on reg: qtop_quota_refused_total
// (label mode: applied or shadow), qtop_quota_answers_expired_total,
// qtop_quota_untracked_total and qtop_quota_limited_tenants.
func WithRegisterer(reg prometheus.Registerer) GateOption { return func(c *gateConfig) { c.reg = reg } }

// NewGate returns a gate with no verdicts: it admits everything.
func NewGate(opts ...GateOption) (*Gate, error) {
	c := gateConfig{maxTenants: DefaultMaxTenants, burst: DefaultBurst, cost: DefaultCost}
	for _, o := range opts {
		o(&c)
	}
	switch {
	case c.maxTenants < 1 || c.maxTenants > 1_000_000:
		return nil, fmt.Errorf("%w: max tenants %d (want 1 to 1,000,000)", ErrConfig, c.maxTenants)
	case c.burst < 0 || c.burst > maxDebt:
		return nil, fmt.Errorf("%w: burst %v (want 0 to %v)", ErrConfig, c.burst, maxDebt)
	case !(c.cost > 0) || math.IsInf(c.cost, 0):
		return nil, fmt.Errorf("%w: default cost %v (want a finite number > 0)", ErrConfig, c.cost)
	}
	g := &Gate{cfg: c, seed: maphash.MakeSeed()}
	for i := range g.shards {
		g.shards[i].limited = make(map[string]*allowance)
		g.shards[i].usage = make(map[string]*tally)
	}
	if c.reg != nil {
		if err := g.register(c.reg); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// Decision is the Gate's answer for one request.
type Decision struct {
	// Admit is false when the request must be refused.
	Admit bool
	// Shadow is true when a shadow verdict would have refused it; the
	// request is admitted.
	Shadow bool
	// RetryAfter is when a refused caller may try again.
	RetryAfter time.Duration
}

// AllowAt decides whether work of tags' tenant may start at now. A tenant
// without a live verdict is admitted. A refusal is counted in the
// tenant's usage at its estimated cost. Charge admitted work with
// ChargeAt when it is done.
func (g *Gate) AllowAt(now time.Time, tags tenant.Tags) Decision {
	sh := g.shard(tags.Tenant)
	sh.mu.Lock()
	a := sh.limited[tags.Tenant]
	if a == nil {
		sh.mu.Unlock()
		return Decision{Admit: true}
	}
	n := now.UnixNano()
	if n >= a.until {
		if !a.expired {
			a.expired = true
			g.expired.Add(1)
		}
		sh.mu.Unlock()
		return Decision{Admit: true}
	}
	var wait time.Duration
	switch {
	case a.none:
		wait = time.Duration(a.until - n)
	case a.b.AllowAt(now, a.rate, 0):
		sh.mu.Unlock()
		return Decision{Admit: true}
	default:
		wait = a.b.WaitAt(now, a.rate, 0)
	}
	if a.shadow {
		sh.mu.Unlock()
		g.shadowRefused.Add(1)
		return Decision{Admit: true, Shadow: true}
	}
	if t := g.tallyLocked(sh, tags); t != nil {
		est := t.mean
		if !(est > 0) {
			est = g.cfg.cost
		}
		t.refused += est
	}
	sh.mu.Unlock()
	g.refused.Add(1)
	return Decision{RetryAfter: max(wait, time.Millisecond)}
}

// RefusedElsewhere counts in tags' tenant's usage a request that another
// stage refused (the process's own plan, say) at its estimated cost, so
// that the demand the collector sees includes it.
func (g *Gate) RefusedElsewhere(tags tenant.Tags) {
	sh := g.shard(tags.Tenant)
	sh.mu.Lock()
	if t := g.tallyLocked(sh, tags); t != nil {
		est := t.mean
		if !(est > 0) {
			est = g.cfg.cost
		}
		t.refused += est
	}
	sh.mu.Unlock()
}

// ChargeAt records finished work's cost ru for tags' tenant: in its usage
// and, when the tenant is limited, against its allowance (possibly into
// debt). A cost that is not a finite number > 0 is ignored.
func (g *Gate) ChargeAt(now time.Time, tags tenant.Tags, ru float64) {
	if !(ru > 0) || math.IsInf(ru, 0) {
		return
	}
	n := now.UnixNano()
	sh := g.shard(tags.Tenant)
	sh.mu.Lock()
	if t := g.tallyLocked(sh, tags); t != nil {
		t.admitted += ru
		t.n++
	}
	if a := sh.limited[tags.Tenant]; a != nil && n < a.until && !a.none {
		a.b.ChargeAt(now, a.rate, ru)
	}
	sh.mu.Unlock()
}

func (g *Gate) tallyLocked(sh *gateShard, tags tenant.Tags) *tally {
	t := sh.usage[tags.Tenant]
	if t == nil {
		if g.ntracked.Load() >= int64(g.cfg.maxTenants) {
			g.untracked.Add(1)
			return nil
		}
		g.ntracked.Add(1)
		t = &tally{}
		sh.usage[tags.Tenant] = t
	}
	if tags.Tier != tenant.TierUnset {
		t.tier = tags.Tier
	}
	return t
}

// Apply replaces the verdicts with those of one reply, received at now.
// A tenant in the answer keeps its bucket's state (its debt); a tenant
// not in it is no longer limited. Verdicts beyond the Gate's max tenants,
// or with an empty tenant, are ignored. Each shard of tenants changes at
// once; a request meanwhile sees the old or the new answer for its
// tenant.
func (g *Gate) Apply(now time.Time, verdicts []Verdict) {
	n := now.UnixNano()
	var by [gateShards][]*Verdict
	kept := 0
	for i := range verdicts {
		v := &verdicts[i]
		if v.Tenant == "" || !(v.For > 0) || math.IsNaN(v.Allowance) || v.Allowance < 0 || math.IsInf(v.Allowance, 0) {
			continue
		}
		if kept == g.cfg.maxTenants {
			break
		}
		kept++
		k := maphash.String(g.seed, v.Tenant) % gateShards
		by[k] = append(by[k], v)
	}
	total := 0
	for k := range g.shards {
		sh := &g.shards[k]
		sh.mu.Lock()
		for _, a := range sh.limited {
			a.seen = false
		}
		for _, v := range by[k] {
			a := sh.limited[v.Tenant]
			if a == nil {
				a = &allowance{none: true}
				sh.limited[v.Tenant] = a
			}
			a.seen, a.expired, a.shadow = true, false, v.Shadow
			a.until = n + int64(min(v.For, maxDebt))
			// The debt is kept in RU, not in time: a process whose
			// allowance grows pays back what it admitted above the old one
			// at the new rate (a debt of 1 RU at 0.5 RU/s would otherwise
			// hold it back 2 s at any allowance).
			if !a.none {
				a.debt = max(0, a.rate.Burst()-a.b.TokensAt(now, a.rate))
			}
			r, err := gcra.NewRate(v.Allowance, 0)
			if err != nil { // allowance 0 (or too small to refill in a lifetime)
				a.none = true
				continue
			}
			a.none = false
			a.rate = r.WithMaxDebt(maxDebt).WithBurstDuration(g.cfg.burst)
			a.b.SetAt(now, a.rate, a.rate.Burst()-a.debt)
		}
		for t, a := range sh.limited {
			if !a.seen {
				delete(sh.limited, t)
			}
		}
		total += len(sh.limited)
		sh.mu.Unlock()
	}
	g.nlimited.Store(int64(total))
}

// Cut returns the usage per tenant since the previous Cut, sorted by
// tenant, and starts a new interval. Tenants without usage are left out.
func (g *Gate) Cut() []Usage {
	out := make([]Usage, 0, g.ntracked.Load())
	for k := range g.shards {
		out = g.shards[k].cut(g, out)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tenant < out[j].Tenant })
	return out
}

func (sh *gateShard) cut(g *Gate, out []Usage) []Usage {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for name, t := range sh.usage {
		if t.admitted == 0 && t.refused == 0 {
			// A limited tenant keeps its mean cost, so that its refusals
			// after a quiet window are not estimated at the default cost.
			if _, limited := sh.limited[name]; !limited || t.n == 0 && t.mean == 0 {
				delete(sh.usage, name)
				g.ntracked.Add(-1)
			}
			continue
		}
		out = append(out, Usage{Tenant: name, Tier: t.tier, Admitted: t.admitted, Refused: t.refused})
		if t.n > 0 {
			t.mean = t.admitted / float64(t.n)
		}
		t.admitted, t.refused, t.n = 0, 0, 0
	}
	return out
}

// Limited returns the allowance in RU/s of tenant at now and whether it is
// limited (a live verdict).
func (g *Gate) Limited(now time.Time, tenant string) (ruPerSecond float64, ok bool) {
	sh := g.shard(tenant)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	a := sh.limited[tenant]
	if a == nil || now.UnixNano() >= a.until {
		return 0, false
	}
	if a.none {
		return 0, true
	}
	return a.rate.PerSecond(), true
}

// GateStats are the Gate's cumulative counters.
type GateStats struct {
	// Refused and ShadowRefused count requests refused, or that a shadow
	// verdict would have refused.
	Refused, ShadowRefused uint64
	// Expired counts verdicts that expired before a new answer came (the
	// collector unreachable): the tenant fell back to the local plan.
	Expired uint64
	// Untracked counts requests whose tenant was beyond WithMaxTenants.
	Untracked uint64
	// Limited is the number of tenants with a verdict now.
	Limited int
}

// Stats returns the counters.
func (g *Gate) Stats() GateStats {
	return GateStats{Refused: g.refused.Load(), ShadowRefused: g.shadowRefused.Load(),
		Expired: g.expired.Load(), Untracked: g.untracked.Load(), Limited: int(g.nlimited.Load())}
}

func (g *Gate) register(reg prometheus.Registerer) error {
	refused := prometheus.NewDesc("qtop_quota_refused_total",
		"Requests the fleet-wide quota refused (mode applied) or would have refused (mode shadow).", []string{"mode"}, nil)
	cs := []prometheus.Collector{
		gateCollector{g, refused},
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "qtop_quota_answers_expired_total",
			Help: "Quota verdicts that expired before the collector renewed them (the tenant fell back to the local plan)."},
			func() float64 { return float64(g.expired.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "qtop_quota_untracked_total",
			Help: "Requests whose tenant was beyond the gate's tenant limit (usage not reported)."},
			func() float64 { return float64(g.untracked.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "qtop_quota_limited_tenants",
			Help: "Tenants with a live fleet-wide quota verdict in this process."},
			func() float64 { return float64(g.nlimited.Load()) }),
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("quota: metrics: %w", err)
		}
	}
	return nil
}

type gateCollector struct {
	g *Gate
	d *prometheus.Desc
}

func (c gateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.d }
func (c gateCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(c.d, prometheus.CounterValue, float64(c.g.refused.Load()), "applied")
	ch <- prometheus.MustNewConstMetric(c.d, prometheus.CounterValue, float64(c.g.shadowRefused.Load()), "shadow")
}
