package enforce

import (
	"math"
	"time"

	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/tenant"
)

// compiled is a policy indexed for the request path: rules by tenant and
// by tier, only those valid and unexpired when it was compiled.
type compiled struct {
	version uint64
	src     policy.Policy
	tenants map[string][]policy.Rule
	tiers   [tenant.NumTiers][]policy.Rule
	// nextExpiry is the earliest expiry (unix ns): at or after it the
	// policy must be compiled again.
	nextExpiry int64
	rules      int
	invalid    int
}

func compile(p policy.Policy, now time.Time) *compiled {
	c := &compiled{version: p.Version, src: p, nextExpiry: math.MaxInt64}
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
				c.tenants = make(map[string][]policy.Rule)
			}
			c.tenants[r.Tenant] = append(c.tenants[r.Tenant], r)
		} else {
			i := r.Tier.Index()
			c.tiers[i] = append(c.tiers[i], r)
		}
	}
	return c
}

// effect is what a policy means for one request: the applied part and,
// separately, what its shadow rules would have done.
type effect struct {
	mult float64
	// tenantCap and tierCap are throttle caps in RU/s (<0: none) from
	// tenant rules and tier rules.
	tenantCap, tierCap             float64
	shadowTenantCap, shadowTierCap float64
	shadowMult                     float64
	// expires is when a zero cap (reject everything) ends, for Retry-After.
	zeroUntil, shadowZeroUntil time.Time
}

func (c *compiled) effect(t string, tier tenant.Tier) effect {
	e := effect{mult: 1, shadowMult: 1, tenantCap: -1, tierCap: -1, shadowTenantCap: -1, shadowTierCap: -1}
	if c == nil {
		return e
	}
	apply := func(r policy.Rule, isTenant bool) {
		mult, capp, zero := &e.mult, &e.tierCap, &e.zeroUntil
		if isTenant {
			capp = &e.tenantCap
		}
		if r.Shadow {
			mult, zero = &e.shadowMult, &e.shadowZeroUntil
			capp = &e.shadowTierCap
			if isTenant {
				capp = &e.shadowTenantCap
			}
		}
		switch r.Action {
		case policy.Price:
			*mult *= r.Multiplier
		case policy.Throttle:
			if *capp < 0 || r.RUPerSecond < *capp {
				*capp = r.RUPerSecond
			}
			if r.RUPerSecond == 0 && r.Expires.After(*zero) {
				*zero = r.Expires
			}
		}
	}
	if c.tenants != nil {
		for _, r := range c.tenants[t] {
			apply(r, true)
		}
	}
	if i := tier.Index(); i >= 0 {
		for _, r := range c.tiers[i] {
			apply(r, false)
		}
	}
	return e
}

// tenantCap returns the lowest applied throttle cap of tenant rules for t
// (<0: none), which the tenant's bucket limit honours.
func (c *compiled) tenantCap(t string) float64 {
	capp := -1.0
	if c == nil || c.tenants == nil {
		return capp
	}
	for _, r := range c.tenants[t] {
		if !r.Shadow && r.Action == policy.Throttle && (capp < 0 || r.RUPerSecond < capp) {
			capp = r.RUPerSecond
		}
	}
	return capp
}
