package enforce

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/quota"
	"github.com/qtop-dev/qtop/ru"
	"github.com/qtop-dev/qtop/tenant"
)

// Plan is what a tenant's subscription buys: an RU limit, a weight in the
// fair queue and a cap on work in flight.
type Plan struct {
	Limit Limit `json:"limit"`
	// Weight is the tenant's share in a fairqueue.Queue (≥ 1).
	Weight int `json:"weight"`
	// Concurrency caps the tenant's work in flight in a fairqueue.Queue (0: no cap).
	Concurrency int `json:"concurrency"`
}

// The plan names DefaultPlans knows.
const (
	PlanFree       = "free"
	PlanPro        = "pro"
	PlanEnterprise = "enterprise"
)

// DefaultPlans returns free (100 RU/s, burst 200, weight 1, 4 in flight),
// pro (1,000 RU/s, burst 2,000, weight 4, 16 in flight) and enterprise
// (10,000 RU/s, burst 20,000, weight 16, 64 in flight).
func DefaultPlans() map[string]Plan {
	return map[string]Plan{
		PlanFree:       {Limit: Limit{100, 200}, Weight: 1, Concurrency: 4},
		PlanPro:        {Limit: Limit{1000, 2000}, Weight: 4, Concurrency: 16},
		PlanEnterprise: {Limit: Limit{10000, 20000}, Weight: 16, Concurrency: 64},
	}
}

// Rule names an enforcement stage, for shadow mode.
type Rule uint8

// The stages, in the order the middleware applies them.
const (
	// RuleShed is tier shedding and the ratio-driven price multipliers.
	RuleShed Rule = iota
	// RuleQueue is CoDel admission of queued work.
	RuleQueue
	// RuleBucket is the per-tenant RU bucket (and policy throttles).
	RuleBucket
	numRules
)

var ruleNames = [numRules]string{"shed", "queue", "bucket"}

func (r Rule) String() string {
	if r < numRules {
		return ruleNames[r]
	}
	return fmt.Sprintf("Rule(%d)", uint8(r))
}

// Verdict is what a stage decided.
type Verdict uint8

// The verdicts.
const (
	Admit Verdict = iota
	Throttle
	Shed
	Drop // CoDel failed queued work early
)

var verdictNames = [...]string{"admit", "throttle", "shed", "drop"}

func (v Verdict) String() string {
	if int(v) < len(verdictNames) {
		return verdictNames[v]
	}
	return fmt.Sprintf("Verdict(%d)", uint8(v))
}

// Decision is the outcome of an admission check.
type Decision struct {
	Verdict Verdict
	// Shadow means the verdict was decided and counted but not applied:
	// the work goes ahead.
	Shadow bool
	// RetryAfter is when a refused caller may try again: until its bucket
	// is back above zero, or until the next possible recovery step.
	RetryAfter time.Duration
	// Tier is the tier the request was judged in (TierUnset resolved).
	Tier tenant.Tier
}

// Admitted reports whether the work may go ahead.
func (d Decision) Admitted() bool { return d.Verdict == Admit || d.Shadow }

// roundUp is d for a message: whole seconds from a second up, whole
// milliseconds below (a Retry-After header holds whole seconds).
func roundUp(d time.Duration) time.Duration {
	unit := time.Millisecond
	if d >= time.Second {
		unit = time.Second
	}
	if r := d % unit; r != 0 {
		d += unit - r
	}
	return d
}

// Err returns nil when admitted, else ErrThrottled, ErrShed or
// ErrQueueDelay wrapped with detail.
func (d Decision) Err() error {
	if d.Admitted() {
		return nil
	}
	switch d.Verdict {
	case Throttle:
		return fmt.Errorf("%w (retry after %v)", ErrThrottled, roundUp(d.RetryAfter))
	case Shed:
		return fmt.Errorf("%w (tier %v, retry after %v)", ErrShed, d.Tier, roundUp(d.RetryAfter))
	default:
		return fmt.Errorf("%w (tier %v)", ErrQueueDelay, d.Tier)
	}
}

type config struct {
	plans      map[string]Plan
	planOf     func(tenant string) string
	model      ru.Model
	signal     Signal
	price      PriceConfig
	defTier    tenant.Tier
	shadow     [numRules]bool
	maxTenants int
	idle       time.Duration
	evalEvery  time.Duration
	logger     *slog.Logger
	quota      *quota.Gate // quota.go
}

// Option configures New.
type Option func(*config)

// WithPlans replaces the plan table (default DefaultPlans).
func WithPlans(p map[string]Plan) Option { return func(c *config) { c.plans = p } }

// WithPlanOf sets how a tenant's plan is found (default: every tenant is
// on "free"). An unknown plan name means the first of free, pro,
// enterprise that the table has.
func WithPlanOf(f func(tenant string) string) Option { return func(c *config) { c.planOf = f } }

// WithCostModel sets the RU cost model (default DefaultModel).
func WithCostModel(m ru.Model) Option { return func(c *config) { c.model = m } }

// WithSignal sets the latency-ratio signal that drives tier prices; the
// middleware feeds it every request's latency. Without one, prices stay
// at rest unless set by hand.
func WithSignal(s Signal) Option { return func(c *config) { c.signal = s } }

// WithPriceConfig tunes the price controller.
func WithPriceConfig(p PriceConfig) Option { return func(c *config) { c.price = p } }

// WithDefaultTier sets the tier of requests whose tier is unset (default
// T2). It may not be T0: unknown work is never made unsheddable.
func WithDefaultTier(t tenant.Tier) Option { return func(c *config) { c.defTier = t } }

// WithShadow runs the given stages in shadow mode: their decisions are
// made, counted and logged, and the work goes ahead anyway.
func WithShadow(rules ...Rule) Option {
	return func(c *config) {
		for _, r := range rules {
			if r < numRules {
				c.shadow[r] = true
			}
		}
	}
}

// WithMaxTenants bounds the tenants whose buckets are kept (default
// 100,000); WithIdleTenant sets how long a full bucket stays (default 1 m).
func WithMaxTenants(n int) Option           { return func(c *config) { c.maxTenants = n } }
func WithIdleTenant(d time.Duration) Option { return func(c *config) { c.idle = d } }

// WithEvalEvery sets how often requests re-read the signal and step the
// price controller (default 250 ms).
func WithEvalEvery(d time.Duration) Option { return func(c *config) { c.evalEvery = d } }

// WithLogger sets where shadow decisions are logged, at debug level
// (default: nowhere).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

const numStripes = 8

// stripe picks the counter stripe of tenant t (FNV-1a over a few bytes).
func stripe(t string) int {
	h := uint32(2166136261)
	for i := 0; i < len(t) && i < 16; i++ {
		h = (h ^ uint32(t[i])) * 16777619
	}
	if len(t) > 16 {
		h = (h ^ uint32(t[len(t)-1])) * 16777619
	}
	return int(h % numStripes)
}

type tierCounters struct {
	admitted, throttled, shed, dropped      atomic.Uint64
	shadowThrottled, shadowShed, shadowDrop atomic.Uint64
	ru                                      atomic.Uint64 // float64 bits, RU charged (with price)
	_                                       [24]byte
}

// Enforcer applies RU buckets, tier prices and shedding, and the
// collector's policy, inside one process. Every decision is local: there
// is no remote call on the request path. Safe for concurrent use; make one
// with New.
type Enforcer struct {
	cfg config
	// The buckets, one set per kind, each keyed by tenant: the tenant's
	// own (plan, override, policy tenant cap), the shadow mirror of it,
	// and per tier those of policy tier caps, applied and shadow.
	buckets        *Buckets
	shadowTenants  *Buckets
	tierCaps       [tenant.NumTiers]*Buckets
	shadowTierCaps [tenant.NumTiers]*Buckets
	price          *PriceController
	nextEval       atomic.Int64
	pol            atomic.Pointer[policy.Compiled]
	polMu          sync.Mutex
	overrides      atomic.Pointer[map[string]Limit]
	ovMu           sync.Mutex
	// tiers holds the counters striped by tenant, so that cores deciding
	// for different tenants do not contend on one cache line.
	tiers     [numStripes][tenant.NumTiers]tierCounters
	shadowLog atomic.Uint64
}

// New returns an Enforcer.
func New(opts ...Option) (*Enforcer, error) {
	c := config{plans: DefaultPlans(), model: ru.DefaultModel(), defTier: tenant.T2,
		maxTenants: 100_000, idle: time.Minute, evalEvery: 250 * time.Millisecond}
	for _, o := range opts {
		o(&c)
	}
	if len(c.plans) == 0 {
		return nil, fmt.Errorf("%w: no plans", ErrConfig)
	}
	for name, p := range c.plans {
		if err := p.Limit.Validate(); err != nil {
			return nil, fmt.Errorf("plan %s: %w", name, err)
		}
		if p.Weight < 1 {
			return nil, fmt.Errorf("%w: plan %s: weight %d, want at least 1 (its share of the service under contention; a plans file gives it as \"weight\")", ErrConfig, name, p.Weight)
		}
		if p.Concurrency < 0 {
			return nil, fmt.Errorf("%w: plan %s: concurrency %d, want 0 (no bound) or more", ErrConfig, name, p.Concurrency)
		}
	}
	if err := c.model.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if !c.defTier.Valid() || c.defTier == tenant.T0 {
		return nil, fmt.Errorf("%w: default tier %v (want T1, T2 or T3)", ErrConfig, c.defTier)
	}
	if c.evalEvery <= 0 {
		return nil, fmt.Errorf("%w: eval every %v (want > 0)", ErrConfig, c.evalEvery)
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	e := &Enforcer{cfg: c}
	var err error
	if e.price, err = newPriceController(c.price); err != nil {
		return nil, err
	}
	def := e.PlanOf("").Limit
	mk := func(limitOf func(string) (Limit, bool)) (*Buckets, error) {
		return newBuckets(def, withLimitOf(limitOf), withMaxKeys(c.maxTenants), withIdle(c.idle))
	}
	if e.buckets, err = mk(e.tenantLimitOf(false)); err != nil {
		return nil, err
	}
	if e.shadowTenants, err = mk(e.tenantLimitOf(true)); err != nil {
		return nil, err
	}
	for i := range e.tierCaps {
		tier := tenant.T0 + tenant.Tier(i)
		if e.tierCaps[i], err = mk(e.tierCapOf(tier, false)); err != nil {
			return nil, err
		}
		if e.shadowTierCaps[i], err = mk(e.tierCapOf(tier, true)); err != nil {
			return nil, err
		}
	}
	empty := map[string]Limit{}
	e.overrides.Store(&empty)
	return e, nil
}

// PlanOf returns the plan tenant t is on.
func (e *Enforcer) PlanOf(t string) Plan {
	if e.cfg.planOf != nil && t != "" {
		if p, ok := e.cfg.plans[e.cfg.planOf(t)]; ok {
			return p
		}
	}
	for _, n := range []string{PlanFree, PlanPro, PlanEnterprise} {
		if p, ok := e.cfg.plans[n]; ok {
			return p
		}
	}
	for _, p := range e.cfg.plans {
		return p // a table without the standard names: any plan, consistently enough
	}
	return Plan{}
}

// tenantLimitOf returns the limit function of the tenants' buckets
// (shadow: of their shadow mirror, lowered to the shadow tenant cap).
func (e *Enforcer) tenantLimitOf(shadow bool) func(string) (Limit, bool) {
	return func(t string) (Limit, bool) {
		pol := e.pol.Load()
		l := tenantLimit(e, t, pol)
		if c := pol.Eval(t, tenant.TierUnset).Shadow.TenantCap; shadow && c > 0 && c < l.RUPerSecond {
			l.RUPerSecond = c
		}
		return l, true
	}
}

// tierCapOf returns the limit function of the buckets of tier's policy
// caps (shadow: of its shadow caps).
func (e *Enforcer) tierCapOf(tier tenant.Tier, shadow bool) func(string) (Limit, bool) {
	return func(t string) (Limit, bool) {
		eff := e.pol.Load().Eval(t, tier)
		c := eff.Applied.TierCap
		if shadow {
			c = eff.Shadow.TierCap
		}
		if c > 0 {
			return Limit{RUPerSecond: c, Burst: c}, true
		}
		return Limit{}, false
	}
}

// invalidate makes every bucket resolve its limit again on next use.
func (e *Enforcer) invalidate() {
	e.buckets.Invalidate()
	e.shadowTenants.Invalidate()
	for i := range e.tierCaps {
		e.tierCaps[i].Invalidate()
		e.shadowTierCaps[i].Invalidate()
	}
}

// tenantLimit is the plan's limit, or the override, lowered to the policy's
// tenant throttle cap.
func tenantLimit(e *Enforcer, t string, pol *policy.Compiled) Limit {
	l, ok := (*e.overrides.Load())[t]
	if !ok {
		l = e.PlanOf(t).Limit
	}
	if c := pol.Eval(t, tenant.TierUnset).Applied.TenantCap; c > 0 && c < l.RUPerSecond {
		l.RUPerSecond = c
		l.Burst = min(l.Burst, c)
	}
	return l
}

// SetOverride gives tenant t its own limit in place of its plan's, keeping
// the tokens (or debt) its bucket holds.
func (e *Enforcer) SetOverride(t string, l Limit) error {
	if err := tenant.ValidateTenant(t); err != nil {
		return fmt.Errorf("enforce: override: %w", err)
	}
	if err := l.Validate(); err != nil {
		return err
	}
	e.ovMu.Lock()
	defer e.ovMu.Unlock()
	m := make(map[string]Limit, len(*e.overrides.Load())+1)
	for k, v := range *e.overrides.Load() {
		m[k] = v
	}
	m[t] = l
	e.overrides.Store(&m)
	e.invalidate()
	return nil
}

// DeleteOverride puts tenant t back on its plan's limit.
func (e *Enforcer) DeleteOverride(t string) {
	e.ovMu.Lock()
	defer e.ovMu.Unlock()
	old := *e.overrides.Load()
	if _, ok := old[t]; !ok {
		return
	}
	m := make(map[string]Limit, len(old))
	for k, v := range old {
		if k != t {
			m[k] = v
		}
	}
	e.overrides.Store(&m)
	e.invalidate()
}

// ApplyPolicy installs the collector's policy: its price rules multiply
// RU charges, its throttle rules cap tenants (a cap of 0 refuses
// everything), its shadow rules are only counted. Rules that fail
// validation are skipped. A policy with the version already applied costs
// nothing, so it can be wired straight to the reporter's callback:
// reporter.OnPolicy(enf.ApplyPolicy). Safe for concurrent use; requests
// read the policy without a lock.
func (e *Enforcer) ApplyPolicy(p policy.Policy) { e.ApplyPolicyAt(time.Now(), p) }

// ApplyPolicyAt is ApplyPolicy with the time as an argument.
func (e *Enforcer) ApplyPolicyAt(now time.Time, p policy.Policy) {
	e.polMu.Lock()
	defer e.polMu.Unlock()
	if cur := e.pol.Load(); cur != nil && cur.Policy().Version == p.Version && p.Version != 0 {
		return
	}
	c := policy.Compile(p, now)
	if c.Invalid() > 0 {
		e.cfg.logger.Warn("enforce: policy rules skipped as invalid", "version", p.Version, "invalid", c.Invalid())
	}
	e.pol.Store(c)
	e.invalidate()
}

// Policy returns the policy last applied.
func (e *Enforcer) Policy() policy.Policy {
	if c := e.pol.Load(); c != nil {
		return c.Policy()
	}
	return policy.Policy{}
}

// refreshAt recompiles the policy when one of its rules has expired.
func (e *Enforcer) refreshAt(n int64, now time.Time) *policy.Compiled {
	c := e.pol.Load()
	if c == nil || n < c.NextExpiry() {
		return c
	}
	e.polMu.Lock()
	defer e.polMu.Unlock()
	if c = e.pol.Load(); n >= c.NextExpiry() {
		c = policy.Compile(c.Policy(), now)
		e.pol.Store(c)
		e.invalidate()
	}
	return c
}

// Price returns the tier price controller.
func (e *Enforcer) Price() *PriceController { return e.price }

// Buckets returns the per-tenant RU buckets.
func (e *Enforcer) Buckets() *Buckets { return e.buckets }

// Shadowed reports whether stage r runs in shadow mode.
func (e *Enforcer) Shadowed(r Rule) bool { return r < numRules && e.cfg.shadow[r] }

func (e *Enforcer) tierOf(t tenant.Tier) tenant.Tier {
	if t.Valid() {
		return t
	}
	return e.cfg.defTier
}

// ObserveAt feeds the latency of finished work to the signal.
func (e *Enforcer) ObserveAt(now time.Time, latency time.Duration) {
	if e.cfg.signal != nil {
		e.cfg.signal.ObserveAt(now, latency.Seconds())
	}
}

// stepAt lets the price controller follow the signal, at most once per
// eval interval across all requests.
func (e *Enforcer) stepAt(now time.Time) {
	if e.cfg.signal == nil {
		return
	}
	n := now.UnixNano()
	next := e.nextEval.Load()
	if n < next || !e.nextEval.CompareAndSwap(next, n+int64(e.cfg.evalEvery)) {
		return
	}
	r, ok := e.cfg.signal.ValueAt(now)
	e.price.UpdateAt(now, r, ok)
}

func (e *Enforcer) logShadow(r Rule, tags tenant.Tags, tier tenant.Tier, v Verdict) {
	e.shadowLog.Add(1)
	if e.cfg.logger.Enabled(context.Background(), slog.LevelDebug) {
		e.cfg.logger.Debug("enforce: shadow decision", "rule", r.String(), "verdict", v.String(),
			"tenant", tags.Tenant, "tier", tier.String(), "route", tags.Route)
	}
}

// ShedAt is the tier shedder: it refuses work whose tier the price
// controller is shedding. It also lets the controller follow the signal.
func (e *Enforcer) ShedAt(now time.Time, tags tenant.Tags) Decision {
	tier := e.tierOf(tags.Tier)
	e.stepAt(now)
	d := Decision{Tier: tier}
	if !e.price.Shed(tier) {
		return d
	}
	c := &e.tiers[stripe(tags.Tenant)][tier.Index()]
	d.Verdict, d.RetryAfter = Shed, e.price.cfg.RecoverEvery
	if e.cfg.shadow[RuleShed] {
		d.Shadow = true
		c.shadowShed.Add(1)
		e.logShadow(RuleShed, tags, tier, Shed)
		return d
	}
	c.shed.Add(1)
	return d
}

// AllowAt is the RU bucket stage: it refuses work of a tenant whose
// bucket is in debt, or that the policy throttles, and counts admitted
// work. Charge the work's real cost with ChargeAt when it is done.
func (e *Enforcer) AllowAt(now time.Time, tags tenant.Tags) Decision {
	tier := e.tierOf(tags.Tier)
	n := now.UnixNano()
	pol := e.refreshAt(n, now)
	c := &e.tiers[stripe(tags.Tenant)][tier.Index()]
	d := Decision{Tier: tier}
	ok, wait := true, time.Duration(0)
	if pol == nil || pol.Rules() == 0 {
		ok, wait = e.buckets.AllowAt(now, tags.Tenant)
	} else {
		eff := pol.Eval(tags.Tenant, tier)
		ok, wait = e.allowPolicy(now, tags.Tenant, tier, eff, false)
		if sok, _ := e.allowPolicy(now, tags.Tenant, tier, eff, true); !sok && ok {
			c.shadowThrottled.Add(1)
			e.logShadow(RuleBucket, tags, tier, Throttle)
		}
	}
	if e.cfg.quota != nil {
		ok, wait = e.allowQuota(now, tags, tier, c, ok, wait)
	}
	if ok {
		c.admitted.Add(1)
		return d
	}
	d.Verdict, d.RetryAfter = Throttle, wait
	if e.cfg.shadow[RuleBucket] {
		d.Shadow = true
		c.shadowThrottled.Add(1)
		c.admitted.Add(1)
		e.logShadow(RuleBucket, tags, tier, Throttle)
		return d
	}
	c.throttled.Add(1)
	return d
}

// allowPolicy decides with the policy's caps: applied ones, or (shadow)
// what the shadow rules would decide.
func (e *Enforcer) allowPolicy(now time.Time, t string, tier tenant.Tier, eff policy.Eval, shadow bool) (bool, time.Duration) {
	tenantCap, tierCap, zero := eff.Applied.TenantCap, eff.Applied.TierCap, eff.Applied.ZeroUntil
	own, caps := e.buckets, e.tierCaps[tier.Index()]
	if shadow {
		// The shadow bucket mirrors the tenant's, charged at the shadow
		// price and capped by the shadow caps.
		tenantCap, tierCap, zero = eff.Shadow.TenantCap, eff.Shadow.TierCap, eff.Shadow.ZeroUntil
		if tenantCap < 0 && tierCap < 0 && eff.Shadow.Multiplier == 1 {
			return true, 0
		}
		own, caps = e.shadowTenants, e.shadowTierCaps[tier.Index()]
	}
	if tenantCap == 0 || tierCap == 0 {
		return false, max(zero.Sub(now), time.Millisecond)
	}
	ok, wait := own.AllowAt(now, t)
	if tierCap > 0 {
		ok2, w2 := caps.AllowAt(now, t)
		ok = ok && ok2
		wait = max(wait, w2)
	}
	return ok, wait
}

// AdmitAt runs the tier shedder and then the bucket stage, for work that
// is not queued (CoDel is the Queue type's job).
func (e *Enforcer) AdmitAt(now time.Time, tags tenant.Tags) Decision {
	if d := e.ShedAt(now, tags); !d.Admitted() {
		return d
	}
	return e.AllowAt(now, tags)
}

// Multiplier returns the RU price multiplier that ChargeAt applies to
// tags at now: the tier's price (its highest finite step while shed, 1 in
// shadow mode) times the policy's price rules.
func (e *Enforcer) Multiplier(now time.Time, tags tenant.Tags) float64 {
	return e.multiplier(e.tierOf(tags.Tier), tags.Tenant, e.refreshAt(now.UnixNano(), now))
}

func (e *Enforcer) multiplier(tier tenant.Tier, t string, pol *policy.Compiled) float64 {
	m := 1.0
	if !e.cfg.shadow[RuleShed] {
		m = e.price.Multiplier(tier)
		if math.IsInf(m, 1) {
			m = e.price.cfg.Steps[len(e.price.cfg.Steps)-1]
		}
	}
	if pol != nil && pol.Rules() > 0 {
		m *= pol.Eval(t, tier).Applied.Multiplier
	}
	return m
}

// ChargeAt charges finished work's cost ru (from the cost model) to the
// tenant's bucket, multiplied by the current price, and returns the RU
// charged.
func (e *Enforcer) ChargeAt(now time.Time, tags tenant.Tags, ru float64) float64 {
	if !(ru > 0) || math.IsInf(ru, 0) {
		return 0
	}
	tier := e.tierOf(tags.Tier)
	pol := e.refreshAt(now.UnixNano(), now)
	charged := ru * e.multiplier(tier, tags.Tenant, pol)
	e.buckets.ChargeAt(now, tags.Tenant, charged)
	if pol != nil && pol.Rules() > 0 {
		eff := pol.Eval(tags.Tenant, tier)
		i := tier.Index()
		if eff.Applied.TierCap > 0 {
			e.tierCaps[i].ChargeAt(now, tags.Tenant, charged)
		}
		sm := charged * eff.Shadow.Multiplier
		if eff.Shadow.TenantCap > 0 || eff.Shadow.Multiplier != 1 {
			e.shadowTenants.ChargeAt(now, tags.Tenant, sm)
		}
		if eff.Shadow.TierCap > 0 {
			e.shadowTierCaps[i].ChargeAt(now, tags.Tenant, sm)
		}
	}
	if e.cfg.quota != nil {
		e.cfg.quota.ChargeAt(now, tenant.Tags{Tenant: tags.Tenant, Tier: tier}, charged)
	}
	addFloat(&e.tiers[stripe(tags.Tenant)][tier.Index()].ru, charged)
	return charged
}

// CostAt prices work with the cost model and charges it (ChargeAt).
func (e *Enforcer) CostAt(now time.Time, tags tenant.Tags, op ru.Op, bytes int64, d time.Duration) float64 {
	return e.ChargeAt(now, tags, e.cfg.model.Cost(op, bytes, d))
}

func addFloat(a *atomic.Uint64, v float64) {
	for {
		old := a.Load()
		if a.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// countDrop records a CoDel drop (or shadow drop) for tier.
func (e *Enforcer) countDrop(tier tenant.Tier, shadow bool) {
	c := &e.tiers[0][e.tierOf(tier).Index()]
	if shadow {
		c.shadowDrop.Add(1)
	} else {
		c.dropped.Add(1)
	}
}

// TierStats are the cumulative counters of one tier.
type TierStats struct {
	Admitted, Throttled, Shed, Dropped         uint64
	ShadowThrottled, ShadowShed, ShadowDropped uint64
	// RU is the RU charged, prices included.
	RU float64
	// Multiplier is the tier's current RU price: 1 at rest, the highest
	// step while the tier is shed (always finite, for reports).
	Multiplier float64
	// Shedding is true while the tier is shed.
	Shedding bool
}

// Stats is a cheap snapshot of the Enforcer's counters, for the reporter.
type Stats struct {
	Tiers         [tenant.NumTiers]TierStats
	Level         int
	PolicyVersion uint64
	Tenants       int
	Evicted       uint64
}

// Stats returns the cumulative counters, per tier (index 0 is T0).
func (e *Enforcer) Stats() Stats {
	var s Stats
	for i := range s.Tiers {
		t := &s.Tiers[i]
		for st := range e.tiers {
			c := &e.tiers[st][i]
			t.Admitted += c.admitted.Load()
			t.Throttled += c.throttled.Load()
			t.Shed += c.shed.Load()
			t.Dropped += c.dropped.Load()
			t.ShadowThrottled += c.shadowThrottled.Load()
			t.ShadowShed += c.shadowShed.Load()
			t.ShadowDropped += c.shadowDrop.Load()
			t.RU += math.Float64frombits(c.ru.Load())
		}
		t.Multiplier = e.price.Multiplier(tenant.T0 + tenant.Tier(i))
		if math.IsInf(t.Multiplier, 1) {
			t.Multiplier, t.Shedding = e.price.cfg.Steps[len(e.price.cfg.Steps)-1], true
		}
	}
	s.Level = e.price.Level()
	if c := e.pol.Load(); c != nil {
		s.PolicyVersion = c.Policy().Version
	}
	s.Evicted = e.buckets.Evicted() + e.shadowTenants.Evicted()
	for i := range e.tierCaps {
		s.Evicted += e.tierCaps[i].Evicted() + e.shadowTierCaps[i].Evicted()
	}
	s.Tenants = e.buckets.Len()
	return s
}

// Sub returns the counters of s minus those of prev (a window's worth, for
// a reporter that sends deltas); RU likewise; Multiplier, Shedding, Level,
// PolicyVersion and Tenants are those of s.
func (s Stats) Sub(prev Stats) Stats {
	out := s
	for i := range s.Tiers {
		a, b := s.Tiers[i], prev.Tiers[i]
		out.Tiers[i] = TierStats{
			Admitted: a.Admitted - b.Admitted, Throttled: a.Throttled - b.Throttled, Shed: a.Shed - b.Shed, Dropped: a.Dropped - b.Dropped,
			ShadowThrottled: a.ShadowThrottled - b.ShadowThrottled, ShadowShed: a.ShadowShed - b.ShadowShed, ShadowDropped: a.ShadowDropped - b.ShadowDropped,
			RU: a.RU - b.RU, Multiplier: a.Multiplier, Shedding: a.Shedding,
		}
	}
	out.Evicted = s.Evicted - prev.Evicted
	return out
}

// StatsDelta returns a function that, at each call, returns the counters
// since its previous call (since its creation for the first), for a
// reporter that sends per-window counts. The function is safe for
// concurrent use.
func (e *Enforcer) StatsDelta() func() Stats {
	var mu sync.Mutex
	prev := e.Stats()
	return func() Stats {
		mu.Lock()
		defer mu.Unlock()
		cur := e.Stats()
		d := cur.Sub(prev)
		prev = cur
		return d
	}
}
