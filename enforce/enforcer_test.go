package enforce

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/ru"
	"github.com/qtop-dev/qtop/tenant"
)

// fixedSignal is a Signal whose ratio the test sets.
type fixedSignal struct {
	mu    sync.Mutex
	r     float64
	ok    bool
	count int
}

func (s *fixedSignal) ObserveAt(time.Time, float64) { s.mu.Lock(); s.count++; s.mu.Unlock() }
func (s *fixedSignal) ValueAt(time.Time) (float64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.r, s.ok
}
func (s *fixedSignal) set(r float64) { s.mu.Lock(); s.r, s.ok = r, true; s.mu.Unlock() }

func newTestEnforcer(t *testing.T, opts ...Option) *Enforcer {
	t.Helper()
	plans := map[string]Plan{
		PlanFree: {Limit: Limit{10, 10}, Weight: 1},
		PlanPro:  {Limit: Limit{100, 100}, Weight: 4},
	}
	e, err := New(append([]Option{WithPlans(plans), WithPlanOf(func(t string) string {
		if t == "bigco" {
			return PlanPro
		}
		return PlanFree
	})}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestEnforcerBucketSteps(t *testing.T) {
	e := newTestEnforcer(t)
	acme := tenant.Tags{Tenant: "acme", Tier: tenant.T1}
	big := tenant.Tags{Tenant: "bigco"}
	ms := time.Millisecond
	steps := []struct {
		at     time.Duration
		tags   tenant.Tags
		charge float64
		ok     bool
		retry  time.Duration
	}{
		{0, acme, 0, true, 0},
		{0, acme, 25, true, 0},         // charged after: bucket at -15
		{0, acme, 0, false, 1500 * ms}, // in debt
		{1500 * ms, acme, 0, true, 0},  // exactly out of debt
		{1600 * ms, acme, 0, true, 0},
		{0, big, 150, true, 0}, // pro plan: 100 RU/s, burst 100
		{100 * ms, big, 0, false, 400 * ms},
	}
	for i, s := range steps {
		d := e.AllowAt(at(s.at), s.tags)
		if d.Admitted() != s.ok || d.RetryAfter != s.retry {
			t.Errorf("step %d: %+v, want ok %v retry %v", i, d, s.ok, s.retry)
		}
		if s.charge > 0 {
			if got := e.ChargeAt(at(s.at), s.tags, s.charge); got != s.charge {
				t.Errorf("step %d: charged %v, want %v", i, got, s.charge)
			}
		}
	}
	st := e.Stats()
	if got := st.Tiers[1].Admitted; got != 4 {
		t.Errorf("T1 admitted %d, want 4", got)
	}
	if got := st.Tiers[1].Throttled; got != 1 {
		t.Errorf("T1 throttled %d, want 1", got)
	}
	if got := st.Tiers[2].Admitted + st.Tiers[2].Throttled; got != 2 {
		t.Errorf("unset tier counted as T2: %d, want 2", got)
	}
	if st.Tiers[1].RU != 25 || st.Tenants != 2 {
		t.Errorf("stats %+v", st)
	}
	if err := (Decision{Verdict: Throttle, RetryAfter: time.Second}).Err(); !errors.Is(err, ErrThrottled) {
		t.Errorf("Err = %v", err)
	}
}

func TestEnforcerOverride(t *testing.T) {
	e := newTestEnforcer(t)
	a := tenant.Tags{Tenant: "acme"}
	e.ChargeAt(t0, a, 20) // -10 at 10 RU/s
	if err := e.SetOverride("acme", Limit{RUPerSecond: 1000, Burst: 1000}); err != nil {
		t.Fatal(err)
	}
	if d := e.AllowAt(t0, a); d.Admitted() || d.RetryAfter != 10*ms1() {
		t.Errorf("debt must survive an override: %+v", d)
	}
	if d := e.AllowAt(at(11*time.Millisecond), a); !d.Admitted() {
		t.Errorf("override rate not applied: %+v", d)
	}
	e.DeleteOverride("acme")
	e.DeleteOverride("nobody")
	if l := e.Buckets().LimitOf("acme"); l.RUPerSecond != 10 {
		t.Errorf("limit after delete %+v", l)
	}
	if err := e.SetOverride("", Limit{1, 1}); !errors.Is(err, tenant.ErrEmpty) {
		t.Errorf("empty tenant: %v", err)
	}
	if err := e.SetOverride("x", Limit{0, 1}); !errors.Is(err, ErrConfig) {
		t.Errorf("zero rate: %v", err)
	}
}

func ms1() time.Duration { return time.Millisecond }

func TestEnforcerConfigErrors(t *testing.T) {
	for name, o := range map[string]Option{
		"no plans":    WithPlans(map[string]Plan{}),
		"bad plan":    WithPlans(map[string]Plan{"x": {Limit: Limit{0, 1}, Weight: 1}}),
		"bad weight":  WithPlans(map[string]Plan{"x": {Limit: Limit{1, 1}}}),
		"T0 default":  WithDefaultTier(tenant.T0),
		"unset tier":  WithDefaultTier(tenant.TierUnset),
		"bad model":   WithCostModel(ru.Model{PerMs: -1}),
		"bad eval":    WithEvalEvery(0),
		"bad price":   WithPriceConfig(PriceConfig{Steps: []float64{0.5}}),
		"bad maxkeys": WithMaxTenants(-1),
	} {
		if _, err := New(o); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestEnforcerPriceAndShed(t *testing.T) {
	sig := &fixedSignal{}
	e := newTestEnforcer(t, WithSignal(sig), WithEvalEvery(time.Second))
	t0t := tenant.Tags{Tenant: "support", Tier: tenant.T0}
	t3 := tenant.Tags{Tenant: "batch", Tier: tenant.T3}
	sig.set(0.3) // severe: two steps per second
	for i := 0; i <= 12; i++ {
		now := at(time.Duration(i) * time.Second)
		if d := e.ShedAt(now, t0t); !d.Admitted() {
			t.Fatalf("T0 shed at %d s", i)
		}
	}
	if !e.Price().Shed(tenant.T1) || e.Price().Multiplier(tenant.T0) != 1 {
		t.Fatalf("level %d", e.Price().Level())
	}
	d := e.ShedAt(at(13*time.Second), t3)
	if d.Admitted() || d.Verdict != Shed || d.RetryAfter != 5*time.Second || !errors.Is(d.Err(), ErrShed) {
		t.Errorf("T3 not shed: %+v", d)
	}
	// While shed, a charge uses the highest finite step (8), and policy
	// prices multiply.
	if got := e.ChargeAt(at(13*time.Second), t3, 1); got != 8 {
		t.Errorf("charge while shed = %v, want 8", got)
	}
	if got := e.ChargeAt(at(13*time.Second), t0t, 1); got != 1 {
		t.Errorf("T0 charge = %v, want 1", got)
	}
	st := e.Stats()
	if st.Tiers[3].Shed != 1 || st.Tiers[0].Shed != 0 || st.Tiers[3].Multiplier != 8 || !st.Tiers[3].Shedding || st.Tiers[0].Shedding || st.Level != 12 {
		t.Errorf("stats %+v", st)
	}
	e.ObserveAt(t0, time.Millisecond)
	if sig.count != 1 {
		t.Error("ObserveAt did not reach the signal")
	}
}

func TestEnforcerShadow(t *testing.T) {
	e := newTestEnforcer(t, WithShadow(RuleShed, RuleBucket, Rule(99)))
	e.Price().SetLevel(t0, e.Price().MaxLevel())
	t3 := tenant.Tags{Tenant: "batch", Tier: tenant.T3}
	d := e.ShedAt(t0, t3)
	if !d.Admitted() || !d.Shadow || d.Verdict != Shed || d.Err() != nil {
		t.Errorf("shadow shed: %+v", d)
	}
	if got := e.ChargeAt(t0, t3, 50); got != 50 {
		t.Errorf("shadow price applied: %v", got)
	}
	d = e.AllowAt(t0, t3)
	if !d.Admitted() || !d.Shadow || d.Verdict != Throttle {
		t.Errorf("shadow throttle: %+v", d)
	}
	st := e.Stats().Tiers[3]
	if st.ShadowShed != 1 || st.ShadowThrottled != 1 || st.Shed != 0 || st.Throttled != 0 || st.Admitted != 1 {
		t.Errorf("stats %+v", st)
	}
	if !e.Shadowed(RuleBucket) || e.Shadowed(RuleQueue) {
		t.Error("Shadowed")
	}
}

func rule(id, tn string, tier tenant.Tier, a policy.Action, v float64, shadow bool, exp time.Duration) policy.Rule {
	r := policy.Rule{ID: id, Tenant: tn, Tier: tier, Action: a, Shadow: shadow, Expires: at(exp), Reason: "test"}
	if a == policy.Price {
		r.Multiplier = v
	} else {
		r.RUPerSecond = v
	}
	return r
}

func TestEnforcerPolicy(t *testing.T) {
	e := newTestEnforcer(t)
	big := tenant.Tags{Tenant: "bigco", Tier: tenant.T1}
	scraper := tenant.Tags{Tenant: "scraper", Tier: tenant.T2}
	batch := tenant.Tags{Tenant: "batchco", Tier: tenant.T3}
	p := policy.Policy{Version: 7, Rules: []policy.Rule{
		rule("cap", "bigco", 0, policy.Throttle, 5, false, time.Minute),        // 100 → 5 RU/s
		rule("block", "scraper", 0, policy.Throttle, 0, false, 30*time.Second), // refuse
		rule("t3price", "", tenant.T3, policy.Price, 3, false, time.Minute),
		rule("t1cap", "", tenant.T1, policy.Throttle, 2, false, time.Minute),
		rule("shadowcap", "batchco", 0, policy.Throttle, 0, true, time.Minute),
		{ID: "broken", Tenant: "x", Action: policy.Price, Multiplier: 0.5, Expires: at(time.Minute), Reason: "bad"},
	}}
	e.ApplyPolicyAt(t0, p)
	e.ApplyPolicyAt(t0, p) // same version: no-op
	if e.Policy().Version != 7 || e.Stats().PolicyVersion != 7 {
		t.Fatal("policy not applied")
	}
	if l := e.Buckets().LimitOf("bigco"); l.RUPerSecond != 5 || l.Burst != 5 {
		t.Errorf("bigco limit %+v, want capped at 5", l)
	}
	d := e.AllowAt(at(time.Second), scraper)
	if d.Admitted() || d.RetryAfter != 29*time.Second {
		t.Errorf("scraper: %+v", d)
	}
	// Tier T1 cap of 2 RU/s per tenant: a 4 RU charge puts bigco's T1
	// bucket (burst 2) 2 RU in debt: 1 s to wait, though its tenant bucket
	// (5 RU/s, burst 5) still has 1.
	if !e.AllowAt(at(time.Second), big).Admitted() {
		t.Fatal("bigco refused before any charge")
	}
	e.ChargeAt(at(time.Second), big, 4)
	if d := e.AllowAt(at(time.Second), big); d.Admitted() || d.RetryAfter != time.Second {
		t.Errorf("bigco T1 after charge: %+v", d)
	}
	// T3 price ×3; the shadow zero cap only counts.
	if got := e.ChargeAt(at(time.Second), batch, 2); got != 6 {
		t.Errorf("T3 charge %v, want 6", got)
	}
	if got := e.Multiplier(at(time.Second), batch); got != 3 {
		t.Errorf("multiplier %v", got)
	}
	d = e.AllowAt(at(time.Second), batch)
	if !d.Admitted() || e.Stats().Tiers[3].ShadowThrottled != 1 {
		t.Errorf("shadow cap: %+v %+v", d, e.Stats().Tiers[3])
	}
	// At 30 s the block expires; at 60 s every rule does.
	if d := e.AllowAt(at(30*time.Second), scraper); !d.Admitted() {
		t.Errorf("scraper after expiry: %+v", d)
	}
	if l := e.Buckets().LimitOf("bigco"); l.RUPerSecond != 5 {
		t.Errorf("bigco before expiry %+v", l)
	}
	e.AllowAt(at(time.Minute), big)
	if l := e.Buckets().LimitOf("bigco"); l.RUPerSecond != 100 {
		t.Errorf("bigco after expiry %+v", l)
	}
	if got := e.ChargeAt(at(time.Minute), batch, 2); got != 2 {
		t.Errorf("T3 charge after expiry %v", got)
	}
}

func TestEnforcerShadowPrice(t *testing.T) {
	e := newTestEnforcer(t) // free: 10 RU/s, burst 10
	a := tenant.Tags{Tenant: "acme", Tier: tenant.T2}
	e.ApplyPolicyAt(t0, policy.Policy{Version: 1, Rules: []policy.Rule{
		rule("sp", "acme", 0, policy.Price, 10, true, time.Hour)}})
	if got := e.ChargeAt(t0, a, 5); got != 5 {
		t.Fatalf("shadow price applied: %v", got)
	}
	// Real bucket: 10 − 5 = 5 left. Shadow bucket: 10 − 50 = −40.
	d := e.AllowAt(t0, a)
	if !d.Admitted() || d.Shadow {
		t.Fatalf("%+v", d)
	}
	if st := e.Stats().Tiers[2]; st.ShadowThrottled != 1 || st.Throttled != 0 || st.Admitted != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestEnforcerConcurrent(t *testing.T) {
	sig := &fixedSignal{}
	sig.set(0.7)
	e := newTestEnforcer(t, WithSignal(sig), WithEvalEvery(time.Millisecond), WithMaxTenants(128))
	var wg sync.WaitGroup
	for g := 0; g < 6; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			names := []string{"a", "b", "bigco", "scraper", "e"}
			for i := 0; i < 2000; i++ {
				now := at(time.Duration(i) * time.Millisecond)
				tags := tenant.Tags{Tenant: names[(i+g)%len(names)], Tier: tenant.Tier(i % 5)}
				switch {
				case g == 0 && i%100 == 0:
					e.ApplyPolicyAt(now, policy.Policy{Version: uint64(i), Rules: []policy.Rule{
						rule("c", "scraper", 0, policy.Throttle, 1, false, time.Minute),
						rule("p", "", tenant.T2, policy.Price, 2, i%200 == 0, time.Minute),
					}})
				case g == 1 && i%100 == 0:
					_ = e.SetOverride("a", Limit{float64(i + 1), 10})
					_ = e.Stats()
				}
				if e.AdmitAt(now, tags).Admitted() {
					e.CostAt(now, tags, ru.OpRead, 1024, time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	var total uint64
	for _, s := range e.Stats().Tiers {
		total += s.Admitted + s.Throttled + s.Shed
	}
	if total != 6*2000 {
		t.Errorf("decisions counted %d, want %d", total, 6*2000)
	}
}

// FuzzApplyPolicy feeds decoded policies, valid or not, to an Enforcer and
// checks that decisions and charges stay sane.
func FuzzApplyPolicy(f *testing.F) {
	f.Add(`{"version":1,"rules":[{"id":"a","tenant":"acme","action":"throttle","ru_per_second":0,"expires":"2026-01-01T10:00:00Z","reason":"r"}]}`)
	f.Add(`{"version":2,"rules":[{"id":"b","tier":"T3","action":"price","multiplier":4,"expires":"2026-01-01T09:00:30Z","reason":"r"},{"id":"c","tier":"T1","action":"throttle","ru_per_second":3,"shadow":true,"expires":"2026-01-01T10:00:00Z","reason":"r"}]}`)
	f.Add(`{"version":3,"rules":[{"id":"d","tenant":"acme","action":"price","multiplier":0.1,"expires":"2026-01-01T10:00:00Z","reason":"bad"}]}`)
	f.Fuzz(func(t *testing.T, doc string) {
		var p policy.Policy
		if json.Unmarshal([]byte(doc), &p) != nil {
			return
		}
		e, err := New()
		if err != nil {
			t.Fatal(err)
		}
		e.ApplyPolicyAt(t0, p)
		for i, tn := range []string{"acme", "other"} {
			for tier := tenant.TierUnset; tier <= tenant.T3+1; tier++ {
				tags := tenant.Tags{Tenant: tn, Tier: tier}
				now := at(time.Duration(i*40) * time.Second)
				d := e.AdmitAt(now, tags)
				if d.RetryAfter < 0 || (!d.Admitted() && d.Err() == nil) {
					t.Fatalf("decision %+v", d)
				}
				if m := e.Multiplier(now, tags); !(m >= 1) || math.IsInf(m, 0) {
					t.Fatalf("multiplier %v", m)
				}
				if ru := e.ChargeAt(now, tags, 1); !(ru >= 1) || math.IsInf(ru, 0) {
					t.Fatalf("charged %v", ru)
				}
			}
		}
	})
}

func TestEnforcerStatsDelta(t *testing.T) {
	e := newTestEnforcer(t)
	a := tenant.Tags{Tenant: "acme", Tier: tenant.T3}
	e.AllowAt(t0, a)
	delta := e.StatsDelta()
	e.AllowAt(t0, a)
	e.ChargeAt(t0, a, 50)
	e.AllowAt(t0, a)
	d := delta()
	if d.Tiers[3].Admitted != 1 || d.Tiers[3].Throttled != 1 || d.Tiers[3].RU != 50 || d.Tiers[3].Multiplier != 1 {
		t.Errorf("first delta %+v", d.Tiers[3])
	}
	if d = delta(); d.Tiers[3].Admitted != 0 || d.Tiers[3].Throttled != 0 || d.Tiers[3].RU != 0 {
		t.Errorf("empty delta %+v", d.Tiers[3])
	}
}

func BenchmarkEnforcerAdmitAt(b *testing.B) {
	e, _ := New(WithPlans(map[string]Plan{PlanFree: {Limit: Limit{1e9, 1e9}, Weight: 1}}))
	tags := make([]tenant.Tags, 1024)
	for i := range tags {
		tags[i] = tenant.Tags{Tenant: fmt.Sprintf("tenant-%04d", i), Tier: tenant.Tier(1 + i%4)}
		e.AdmitAt(t0, tags[i])
	}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			e.AdmitAt(t0, tags[i&1023])
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		var seed atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			i := int(seed.Add(512))
			for pb.Next() {
				e.AdmitAt(t0, tags[i&1023])
				i++
			}
		})
	})
	b.Run("charge", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			e.ChargeAt(t0, tags[i&1023], 1)
		}
	})
	// With policy rules of every kind for every tier, applied and shadow
	// (tenant caps for some tenants), so each request consults the tier
	// cap buckets and the shadow mirror too: still no allocation.
	p := policy.Policy{Version: 1}
	for _, tier := range []tenant.Tier{tenant.T1, tenant.T2, tenant.T3} {
		p.Rules = append(p.Rules,
			policy.Rule{ID: "cap" + tier.String(), Tier: tier, Action: policy.Throttle, RUPerSecond: 1e9, Expires: t0.Add(time.Hour), Reason: "b"},
			policy.Rule{ID: "shadow" + tier.String(), Tier: tier, Action: policy.Throttle, RUPerSecond: 1e9, Shadow: true, Expires: t0.Add(time.Hour), Reason: "b"},
			policy.Rule{ID: "price" + tier.String(), Tier: tier, Action: policy.Price, Multiplier: 2, Shadow: true, Expires: t0.Add(time.Hour), Reason: "b"})
	}
	for i := 0; i < 1024; i += 7 {
		p.Rules = append(p.Rules, policy.Rule{ID: fmt.Sprint("t", i), Tenant: tags[i].Tenant, Action: policy.Throttle, RUPerSecond: 1e9, Expires: t0.Add(time.Hour), Reason: "b"})
	}
	e.ApplyPolicyAt(t0, p)
	for i := range tags {
		e.AdmitAt(t0, tags[i])
		e.ChargeAt(t0, tags[i], 1)
	}
	b.Run("policy", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			e.AdmitAt(t0, tags[i&1023])
			e.ChargeAt(t0, tags[i&1023], 1)
		}
	})
}

// TestEnforcerPolicyPathAllocs guards what BenchmarkEnforcerAdmitAt/policy
// shows: with policy rules, admission and charge allocate nothing once a
// tenant's buckets exist.
func TestEnforcerPolicyPathAllocs(t *testing.T) {
	e := newTestEnforcer(t)
	tags := tenant.Tags{Tenant: "acme", Tier: tenant.T3}
	e.ApplyPolicyAt(t0, policy.Policy{Version: 1, Rules: []policy.Rule{
		{ID: "a", Tier: tenant.T3, Action: policy.Throttle, RUPerSecond: 1e9, Expires: t0.Add(time.Hour), Reason: "r"},
		{ID: "b", Tier: tenant.T3, Action: policy.Throttle, RUPerSecond: 1e9, Shadow: true, Expires: t0.Add(time.Hour), Reason: "r"},
		{ID: "c", Tenant: "acme", Action: policy.Price, Multiplier: 2, Shadow: true, Expires: t0.Add(time.Hour), Reason: "r"},
	}})
	e.AdmitAt(t0, tags)
	e.ChargeAt(t0, tags, 1)
	if n := testing.AllocsPerRun(100, func() {
		e.AdmitAt(t0, tags)
		e.ChargeAt(t0, tags, 0.001)
	}); n != 0 {
		t.Errorf("%v allocations per request with a policy rule, want 0", n)
	}
}

// TestDecisionErrRoundsRetryAfter: a refusal's message gives its wait
// rounded up to what a client can use, not to the nanosecond.
func TestDecisionErrRoundsRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		d    Decision
		want string
	}{
		{Decision{Verdict: Throttle, RetryAfter: 10*time.Minute + 8543762887}, "retry after 10m9s)"},
		{Decision{Verdict: Throttle, RetryAfter: 2 * time.Second}, "retry after 2s)"},
		{Decision{Verdict: Shed, Tier: 2, RetryAfter: 1500*time.Microsecond + 1}, "retry after 2ms)"},
	} {
		if got := tc.d.Err().Error(); !strings.HasSuffix(got, tc.want) {
			t.Errorf("%v: %q, want it to end %q", tc.d.RetryAfter, got, tc.want)
		}
	}
}
