package collector

import (
	"fmt"
	"time"

	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/tenant"
)

// Bounds of a policy rule beyond policy.Rule.Validate.
const (
	// MaxMultiplier bounds a price rule's multiplier.
	MaxMultiplier = 100
	// MaxRUPerSecond bounds a throttle's rate.
	MaxRUPerSecond = 1e9
)

// checkRule refuses a rule that validates but makes no sense: one that
// lasts longer than maxTTL, a multiplier or rate out of bounds, or a rule
// on tier T0 (never shed) without the explicit override.
func checkRule(r policy.Rule, now time.Time, maxTTL time.Duration, allowT0 bool) error {
	switch {
	case r.Tenant != "" && r.Tier != tenant.TierUnset:
		return fmt.Errorf("%w: a rule is for one tenant or for every tenant of a tier, not both (tenant %q, tier %s): drop one", policy.ErrInvalid, policy.StripControl(r.Tenant), r.Tier)
	case r.Expires.After(now.Add(maxTTL)):
		return fmt.Errorf("%w: expires %v is more than %v ahead (the collector's --max-rule-ttl)", policy.ErrInvalid, r.Expires.UTC(), maxTTL)
	case r.Action == policy.Price && r.Multiplier > MaxMultiplier:
		return fmt.Errorf("%w: multiplier %g, at most %d", policy.ErrInvalid, r.Multiplier, MaxMultiplier)
	case r.Action == policy.Throttle && r.RUPerSecond > MaxRUPerSecond:
		return fmt.Errorf("%w: ru_per_second %g, at most %g", policy.ErrInvalid, r.RUPerSecond, float64(MaxRUPerSecond))
	case r.Tier == tenant.T0 && !r.Shadow && !allowT0:
		return fmt.Errorf("%w: tier T0 is never shed; a rule on T0 needs the explicit override (allow_t0=true), or make it a shadow rule", policy.ErrInvalid)
	}
	return nil
}
