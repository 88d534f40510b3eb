package enforce

import (
	"testing"
	"time"

	"github.com/qtop-dev/qtop/quota"
	"github.com/qtop-dev/qtop/tenant"
)

// TestEnforcerQuota: the fleet verdict limits a tenant that its own
// per-process plan would admit; the plan still refuses obvious excess
// once the verdict has expired; charges reach the gate's usage.
func TestEnforcerQuota(t *testing.T) {
	g, _ := quota.NewGate(quota.WithBurst(0))
	e, err := New(WithQuota(g), WithPlans(map[string]Plan{PlanFree: {Limit: Limit{RUPerSecond: 100, Burst: 100}, Weight: 1}}))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	acme := tenant.Tags{Tenant: "acme", Tier: tenant.T2}
	g.Apply(at(0), []quota.Verdict{{Tenant: "acme", For: time.Second, Allowance: 10}})
	for i, s := range []struct {
		ms     int
		charge float64
		admit  bool
	}{
		{0, 5, true},     // allowance 10 RU/s: 500 ms of debt
		{100, 0, false},  // the fleet verdict refuses; the plan (100 RU/s, 95 left) would admit
		{500, 250, true}, // plan: 100 − 250 = −150 RU, positive again at 2 s
		{600, 0, false},  // both refuse
		{1500, 0, false}, // verdict expired: the plan's bucket, in debt until 2 s, refuses
		{2100, 0, true},  // the plan alone admits
	} {
		d := e.AllowAt(at(s.ms), acme)
		if d.Admitted() != s.admit {
			t.Fatalf("step %d (t=%d ms): %v, want admitted %v", i, s.ms, d, s.admit)
		}
		if d.Admitted() && s.charge > 0 {
			e.ChargeAt(at(s.ms), acme, s.charge)
		}
	}
	u := g.Cut()
	if len(u) != 1 || u[0].Admitted != 255 || u[0].Tier != tenant.T2 || u[0].Refused == 0 {
		t.Fatalf("usage %+v, want acme T2 admitted 255 and some refused", u)
	}
	// A shadow verdict admits and counts a shadow throttle.
	g.Apply(at(3000), []quota.Verdict{{Tenant: "acme", For: time.Second, Allowance: 0, Shadow: true}})
	if d := e.AllowAt(at(3000), acme); !d.Admitted() {
		t.Fatal("shadow verdict refused")
	}
	if st := e.Stats(); st.Tiers[tenant.T2.Index()].ShadowThrottled != 1 {
		t.Fatalf("shadow throttles %d, want 1", st.Tiers[tenant.T2.Index()].ShadowThrottled)
	}
}
