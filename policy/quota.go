package policy

import (
	"fmt"
	"math"
	"time"

	"github.com/qtop-dev/qtop/tenant"
)

// validateQuota checks a Quota rule: a finite RU/s ≥ 0.
func (r Rule) validateQuota() error {
	if r.RUPerSecond < 0 || math.IsNaN(r.RUPerSecond) || math.IsInf(r.RUPerSecond, 0) {
		return fmt.Errorf("%w: a quota needs ru_per_second, a finite number ≥ 0", ErrInvalid)
	}
	return nil
}

// QuotaLimit is a tenant's fleet-wide RU limit.
type QuotaLimit struct {
	RUPerSecond float64
	Shadow      bool
}

// Quotas returns the fleet-wide limits of the active Quota rules at now,
// compiled for lookups: a function that gives the limit of a tenant of a
// tier, false when no rule matches. A tenant's own rule overrides its
// tier's (as an override does a plan); among several rules of the same
// kind the lowest limit wins, and an applied rule wins over a shadow one.
// A tenant named tenant.Other and its stand-in (tenant.Escape) are one.
func (p Policy) Quotas(now time.Time) func(t string, tier tenant.Tier) (QuotaLimit, bool) {
	byTenant := map[string]QuotaLimit{}
	var byTier [tenant.NumTiers]*QuotaLimit
	better := func(old *QuotaLimit, r Rule) bool {
		if old == nil {
			return true
		}
		if old.Shadow != r.Shadow {
			return old.Shadow
		}
		return r.RUPerSecond < old.RUPerSecond
	}
	for _, r := range p.Rules {
		if r.Action != Quota || !now.Before(r.Expires) {
			continue
		}
		l := QuotaLimit{RUPerSecond: r.RUPerSecond, Shadow: r.Shadow}
		if r.Tenant != "" {
			t := tenant.Escape(r.Tenant)
			if old, ok := byTenant[t]; !ok || better(&old, r) {
				byTenant[t] = l
			}
			continue
		}
		if i := r.Tier.Index(); i >= 0 && better(byTier[i], r) {
			byTier[i] = &l
		}
	}
	return func(t string, tier tenant.Tier) (QuotaLimit, bool) {
		if l, ok := byTenant[tenant.Escape(t)]; ok {
			return l, true
		}
		if i := tier.Index(); i >= 0 && byTier[i] != nil {
			return *byTier[i], true
		}
		return QuotaLimit{}, false
	}
}
