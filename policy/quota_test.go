package policy

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/tenant"
)

func TestQuotas(t *testing.T) {
	now := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	later := now.Add(time.Hour)
	p := Policy{Rules: []Rule{
		{ID: "t2", Tier: tenant.T2, Action: Quota, RUPerSecond: 500, Expires: later, Reason: "plan"},
		{ID: "t2s", Tier: tenant.T2, Action: Quota, RUPerSecond: 100, Shadow: true, Expires: later, Reason: "try"},
		{ID: "big", Tenant: "bigco", Action: Quota, RUPerSecond: 2000, Expires: later, Reason: "override"},
		{ID: "big2", Tenant: "bigco", Action: Quota, RUPerSecond: 1500, Expires: later, Reason: "override"},
		{ID: "shadow", Tenant: "shop", Action: Quota, RUPerSecond: 10, Shadow: true, Expires: later, Reason: "try"},
		{ID: "old", Tenant: "gone", Action: Quota, RUPerSecond: 1, Expires: now, Reason: "expired"},
		{ID: "thr", Tenant: "thr", Action: Throttle, RUPerSecond: 1, Expires: later, Reason: "not a quota"},
	}}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	q := p.Quotas(now)
	for _, c := range []struct {
		tenant string
		tier   tenant.Tier
		want   QuotaLimit
		ok     bool
	}{
		{"bigco", tenant.T2, QuotaLimit{RUPerSecond: 1500}, true}, // its own rule overrides the tier's; the lowest wins
		{"acme", tenant.T2, QuotaLimit{RUPerSecond: 500}, true},   // the tier's applied rule beats the shadow one
		{"acme", tenant.T3, QuotaLimit{}, false},
		{"shop", tenant.T1, QuotaLimit{RUPerSecond: 10, Shadow: true}, true},
		{"gone", tenant.TierUnset, QuotaLimit{}, false},
		{"thr", tenant.TierUnset, QuotaLimit{}, false},
	} {
		got, ok := q(c.tenant, c.tier)
		if got != c.want || ok != c.ok {
			t.Errorf("%s %v: %+v %v, want %+v %v", c.tenant, c.tier, got, ok, c.want, c.ok)
		}
	}
	// A quota rule changes nothing in a process's own effect.
	if e := p.For(tenant.Tags{Tenant: "shop", Tier: tenant.T2}, now); e.Shadow || e.Throttled {
		t.Errorf("quota rules leaked into For: %+v", e)
	}
	for _, bad := range []float64{-1, math.NaN(), math.Inf(1)} {
		r := Rule{Tenant: "a", Action: Quota, RUPerSecond: bad, Expires: later, Reason: "x"}
		if err := r.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("ru_per_second %v: %v", bad, err)
		}
	}
}
