package policy

import (
	"math"
	"time"

	"github.com/qtop-dev/qtop/tenant"
)

// Compiled is a policy indexed for evaluation on a request path: its
// valid rules that had not expired when it was compiled, by tenant and by
// tier. It is the one evaluation of a policy's throttle and price rules:
// the enforcer keeps one, and Policy.For compiles one. Immutable, so safe
// for concurrent use; a nil *Compiled is an empty policy.
type Compiled struct {
	src        Policy
	tenants    map[string][]Rule
	tiers      [tenant.NumTiers][]Rule
	nextExpiry int64 // unix ns; at or after it, compile again
	rules      int
	invalid    int
}

// Compile indexes p's rules that are valid and unexpired at now. Invalid
// rules are left out and counted (Invalid).
func Compile(p Policy, now time.Time) *Compiled {
	c := &Compiled{src: p, nextExpiry: math.MaxInt64}
	n := now.UnixNano()
	for _, r := range p.Rules {
		if r.Validate() != nil {
			c.invalid++
			continue
		}
		if !now.Before(r.Expires) {
			continue
		}
		if e := r.Expires.UnixNano(); e < c.nextExpiry {
			c.nextExpiry = max(e, n)
		}
		c.rules++
		if r.Tenant != "" {
			if c.tenants == nil {
				c.tenants = make(map[string][]Rule)
			}
			t := tenant.Escape(r.Tenant)
			c.tenants[t] = append(c.tenants[t], r)
		} else if i := r.Tier.Index(); i >= 0 {
			c.tiers[i] = append(c.tiers[i], r)
		}
	}
	return c
}

// Policy returns the policy c was compiled from.
func (c *Compiled) Policy() Policy {
	if c == nil {
		return Policy{}
	}
	return c.src
}

// NextExpiry returns, in unix nanoseconds, when the first of c's rules
// expires: from then on, compile the policy again (math.MaxInt64: never).
func (c *Compiled) NextExpiry() int64 {
	if c == nil {
		return math.MaxInt64
	}
	return c.nextExpiry
}

// Rules returns the number of rules c holds; Invalid the number left out
// as invalid.
func (c *Compiled) Rules() int {
	if c == nil {
		return 0
	}
	return c.rules
}

// Invalid returns the number of rules left out as invalid.
func (c *Compiled) Invalid() int {
	if c == nil {
		return 0
	}
	return c.invalid
}

// Eval is what a policy's throttle and price rules mean for one tenant of
// one tier: the applied part and, apart, what its shadow rules would do.
// Shadow rules never change the applied part.
type Eval struct {
	Applied, Shadow Outcome
}

// Outcome is the effect of the matching rules of one kind (applied or
// shadow). A tenant rule and a tier rule that both match apply together:
// prices multiply, the lowest cap wins.
type Outcome struct {
	// Matched counts the matching throttle and price rules.
	Matched int
	// Multiplier is the product of the matching price rules (1 if none).
	Multiplier float64
	// TenantCap and TierCap are the lowest throttle caps, in RU/s, of the
	// matching tenant rules and tier rules (< 0: none).
	TenantCap, TierCap float64
	// ZeroUntil is when the last matching cap of 0 (refuse everything)
	// expires, for Retry-After; zero when there is none.
	ZeroUntil time.Time
}

func (o *Outcome) add(r *Rule, isTenant bool) {
	capp := &o.TierCap
	if isTenant {
		capp = &o.TenantCap
	}
	switch r.Action {
	case Price:
		o.Multiplier *= r.Multiplier
	case Throttle:
		if *capp < 0 || r.RUPerSecond < *capp {
			*capp = r.RUPerSecond
		}
		if r.RUPerSecond == 0 && r.Expires.After(o.ZeroUntil) {
			o.ZeroUntil = r.Expires
		}
	default:
		return
	}
	o.Matched++
}

// Eval returns what c means for tenant t of tier (TierUnset: the tenant
// rules alone). A tenant named like the overflow row (tenant.Other) and
// its stand-in (tenant.Escape) are one tenant: a rule for either applies.
func (c *Compiled) Eval(t string, tier tenant.Tier) Eval {
	e := Eval{Applied: Outcome{Multiplier: 1, TenantCap: -1, TierCap: -1},
		Shadow: Outcome{Multiplier: 1, TenantCap: -1, TierCap: -1}}
	if c == nil {
		return e
	}
	if c.tenants != nil {
		rs := c.tenants[tenant.Escape(t)]
		for i := range rs {
			e.outcome(&rs[i]).add(&rs[i], true)
		}
	}
	if i := tier.Index(); i >= 0 {
		rs := c.tiers[i]
		for i := range rs {
			e.outcome(&rs[i]).add(&rs[i], false)
		}
	}
	return e
}

func (e *Eval) outcome(r *Rule) *Outcome {
	if r.Shadow {
		return &e.Shadow
	}
	return &e.Applied
}

// Effect returns the applied part of e as an Effect.
func (e Eval) Effect() Effect {
	out := Effect{Multiplier: e.Applied.Multiplier, Shadow: e.Shadow.Matched > 0}
	for _, c := range [2]float64{e.Applied.TenantCap, e.Applied.TierCap} {
		if c >= 0 && (!out.Throttled || c < out.RUPerSecond) {
			out.Throttled, out.RUPerSecond = true, c
		}
	}
	return out
}
