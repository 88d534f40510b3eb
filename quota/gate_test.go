package quota

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/qtop-dev/qtop/tenant"
)

var t0 = time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// TestGateSteps walks one limited tenant through a verdict, debt, a
// renewal that keeps the debt, expiry and a lifted limit, on fixed
// instants.
func TestGateSteps(t *testing.T) {
	g, err := NewGate(WithBurst(0))
	if err != nil {
		t.Fatal(err)
	}
	acme := tenant.Tags{Tenant: "acme", Tier: tenant.T2}
	shop := tenant.Tags{Tenant: "shop", Tier: tenant.T2}
	type step struct {
		ms     int
		apply  []Verdict // applied before the request when non-nil
		tags   tenant.Tags
		charge float64 // charged after an admitted request
		admit  bool
		wait   time.Duration // expected RetryAfter when refused
	}
	v100 := []Verdict{{Tenant: "acme", For: time.Second, Rate: 0.5, Allowance: 100}}
	steps := []step{
		{ms: 0, tags: acme, charge: 50, admit: true},                                   // no verdict: default admit
		{ms: 1, apply: v100, tags: acme, charge: 50, admit: true},                      // empty bucket at 1 ms: admitted, 500 ms of debt
		{ms: 2, tags: acme, admit: false, wait: 499 * time.Millisecond},                // in debt until 501 ms
		{ms: 3, tags: shop, charge: 1000, admit: true},                                 // another tenant is not limited
		{ms: 400, apply: v100, tags: acme, admit: false, wait: 101 * time.Millisecond}, // renewal keeps the debt
		{ms: 501, tags: acme, charge: 200, admit: true},                                // debt paid: admitted, 2 s of debt
		{ms: 900, tags: acme, admit: false, wait: 1601 * time.Millisecond},
		{ms: 1400, tags: acme, admit: true},                     // the verdict (400 + 1000 ms) expired: default admit
		{ms: 1500, apply: []Verdict{}, tags: acme, admit: true}, // an answer without acme lifts it
	}
	for i, s := range steps {
		if s.apply != nil {
			g.Apply(at(s.ms), s.apply)
		}
		d := g.AllowAt(at(s.ms), s.tags)
		if d.Admit != s.admit {
			t.Fatalf("step %d (t=%d ms, %s): admit %v, want %v", i, s.ms, s.tags.Tenant, d.Admit, s.admit)
		}
		if !s.admit && d.RetryAfter != s.wait {
			t.Fatalf("step %d: retry after %v, want %v", i, d.RetryAfter, s.wait)
		}
		if d.Admit && s.charge > 0 {
			g.ChargeAt(at(s.ms), s.tags, s.charge)
		}
	}
	st := g.Stats()
	if st.Refused != 3 || st.Expired != 1 || st.Limited != 0 {
		t.Fatalf("stats %+v, want 3 refused, 1 expired, 0 limited", st)
	}
	// Usage: acme admitted 50+50+200 = 300 RU over 3 requests, refused 3
	// requests at the mean cost known then (the default 1 RU: no Cut yet).
	u := g.Cut()
	want := []Usage{{Tenant: "acme", Tier: tenant.T2, Admitted: 300, Refused: 3}, {Tenant: "shop", Tier: tenant.T2, Admitted: 1000}}
	if len(u) != len(want) || u[0] != want[0] || u[1] != want[1] {
		t.Fatalf("cut %+v, want %+v", u, want)
	}
	// After a cut, a refusal is estimated at the tenant's mean cost (100).
	g.Apply(at(2000), []Verdict{{Tenant: "acme", For: time.Second, Allowance: 0}})
	if d := g.AllowAt(at(2001), acme); d.Admit || d.RetryAfter != 999*time.Millisecond {
		t.Fatalf("allowance 0: %+v, want refused until the verdict ends", d)
	}
	if u := g.Cut(); len(u) != 1 || u[0].Refused != 100 || u[0].Admitted != 0 {
		t.Fatalf("cut %+v, want acme refused 100 RU", u)
	}
	if u := g.Cut(); len(u) != 0 {
		t.Fatalf("empty interval cut %+v", u)
	}
	// A refusal by another stage counts in the demand, at the mean cost.
	g.ChargeAt(at(3000), acme, 40)
	g.Cut()
	g.RefusedElsewhere(acme)
	if u := g.Cut(); len(u) != 1 || u[0].Refused != 40 || u[0].Admitted != 0 {
		t.Fatalf("cut %+v, want acme refused 40 RU elsewhere", u)
	}
}

// TestGateShadow: a shadow verdict admits, counts, and still mirrors the
// debt.
func TestGateShadow(t *testing.T) {
	g, _ := NewGate(WithBurst(0))
	acme := tenant.Tags{Tenant: "acme"}
	g.Apply(at(0), []Verdict{{Tenant: "acme", For: time.Second, Allowance: 10, Shadow: true}})
	for ms := range 5 {
		d := g.AllowAt(at(ms), acme)
		if !d.Admit {
			t.Fatalf("shadow refused at %d ms", ms)
		}
		if d.Shadow != (ms > 0) {
			t.Fatalf("t=%d ms: shadow %v", ms, d.Shadow)
		}
		g.ChargeAt(at(ms), acme, 10)
	}
	if st := g.Stats(); st.Refused != 0 || st.ShadowRefused != 4 {
		t.Fatalf("stats %+v", st)
	}
	if u := g.Cut(); u[0].Admitted != 50 || u[0].Refused != 0 {
		t.Fatalf("shadow usage %+v: all admitted, none refused", u)
	}
}

// TestGateClockBackwards: a clock that goes back never creates tokens.
func TestGateClockBackwards(t *testing.T) {
	g, _ := NewGate(WithBurst(0))
	acme := tenant.Tags{Tenant: "acme"}
	g.Apply(at(1000), []Verdict{{Tenant: "acme", For: time.Hour, Allowance: 1}})
	g.ChargeAt(at(1000), acme, 1) // debt until 2000 ms
	if d := g.AllowAt(at(500), acme); d.Admit {
		t.Fatal("admitted after the clock went back")
	}
	g.ChargeAt(at(500), acme, 1) // charged from the debt's end, not from 500 ms
	if d := g.AllowAt(at(2500), acme); d.Admit {
		t.Fatal("admitted at 2.5 s with debt until 3 s")
	}
	if d := g.AllowAt(at(3000), acme); !d.Admit {
		t.Fatal("refused once the debt was paid")
	}
}

// TestGateBounds: tenants beyond the limit are counted, not tracked; bad
// verdicts and costs are ignored; options are validated.
func TestGateBounds(t *testing.T) {
	g, _ := NewGate(WithMaxTenants(2))
	for _, name := range []string{"a", "b", "c", "d"} {
		g.ChargeAt(at(0), tenant.Tags{Tenant: name}, 1)
	}
	g.ChargeAt(at(0), tenant.Tags{Tenant: "a"}, math.NaN())
	g.ChargeAt(at(0), tenant.Tags{Tenant: "a"}, math.Inf(1))
	g.ChargeAt(at(0), tenant.Tags{Tenant: "a"}, -1)
	if u := g.Cut(); len(u) != 2 || u[0].Admitted != 1 {
		t.Fatalf("cut %+v", u)
	}
	if g.Stats().Untracked != 2 {
		t.Fatalf("untracked %d, want 2", g.Stats().Untracked)
	}
	g.Apply(at(0), []Verdict{{Tenant: "", For: time.Second}, {Tenant: "x", For: 0}, {Tenant: "y", For: time.Second, Allowance: math.NaN()},
		{Tenant: "z", For: time.Second, Allowance: -1}, {Tenant: "a", For: time.Second, Allowance: 1}, {Tenant: "b", For: time.Second, Allowance: 1}, {Tenant: "c", For: time.Second, Allowance: 1}})
	if g.Stats().Limited != 2 {
		t.Fatalf("limited %d, want 2 (bad verdicts and the third tenant ignored)", g.Stats().Limited)
	}
	for _, o := range []GateOption{WithMaxTenants(0), WithBurst(-2), WithBurst(2 * time.Minute), WithDefaultCost(0), WithDefaultCost(math.Inf(1))} {
		if _, err := NewGate(o); err == nil {
			t.Fatal("bad option accepted")
		}
	}
}

func TestGateMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	g, err := NewGate(WithRegisterer(reg), WithBurst(0))
	if err != nil {
		t.Fatal(err)
	}
	acme := tenant.Tags{Tenant: "acme"}
	g.Apply(at(0), []Verdict{{Tenant: "acme", For: time.Second, Allowance: 1}})
	g.ChargeAt(at(0), acme, 10)
	g.AllowAt(at(1), acme)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP qtop_quota_limited_tenants Tenants with a live fleet-wide quota verdict in this process.
# TYPE qtop_quota_limited_tenants gauge
qtop_quota_limited_tenants 1
# HELP qtop_quota_refused_total Requests the fleet-wide quota refused (mode applied) or would have refused (mode shadow).
# TYPE qtop_quota_refused_total counter
qtop_quota_refused_total{mode="applied"} 1
qtop_quota_refused_total{mode="shadow"} 0
`), "qtop_quota_limited_tenants", "qtop_quota_refused_total"); err != nil {
		t.Fatal(err)
	}
	if probs, err := testutil.GatherAndLint(reg); err != nil || len(probs) > 0 {
		t.Fatalf("lint: %v %v", err, probs)
	}
}

func BenchmarkGateAllowCharge(b *testing.B) {
	g, _ := NewGate()
	tags := tenant.Tags{Tenant: "acme", Tier: tenant.T2}
	other := tenant.Tags{Tenant: "shop", Tier: tenant.T2}
	g.Apply(t0, []Verdict{{Tenant: "acme", For: time.Hour, Allowance: 1e9}})
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		now := t0.Add(time.Duration(i) * time.Microsecond)
		tg := tags
		if i&1 == 1 {
			tg = other
		}
		if g.AllowAt(now, tg).Admit {
			g.ChargeAt(now, tg, 1)
		}
	}
}

func BenchmarkGateParallel(b *testing.B) {
	g, _ := NewGate()
	g.Apply(t0, []Verdict{{Tenant: "acme", For: time.Hour, Allowance: 1e9}})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		tags := tenant.Tags{Tenant: "acme", Tier: tenant.T2}
		i := 0
		for pb.Next() {
			now := t0.Add(time.Duration(i) * time.Microsecond)
			if g.AllowAt(now, tags).Admit {
				g.ChargeAt(now, tags, 1)
			}
			i++
		}
	})
}

// TestGateConcurrent: the request path, Apply and Cut at once (run with
// -race); every charged RU is reported exactly once.
func TestGateConcurrent(t *testing.T) {
	g, _ := NewGate()
	var wg sync.WaitGroup
	const workers, per = 4, 2000
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tags := tenant.Tags{Tenant: fmt.Sprint("t", w%3)}
			for i := range per {
				now := t0.Add(time.Duration(i) * time.Millisecond)
				if g.AllowAt(now, tags).Admit {
					g.ChargeAt(now, tags, 1)
				}
			}
		}()
	}
	var total float64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 50; i++ {
			g.Apply(t0, []Verdict{{Tenant: "t1", For: time.Hour, Allowance: 1e9}})
			for _, u := range g.Cut() {
				total += u.Admitted
			}
		}
	}()
	wg.Wait()
	<-done
	for _, u := range g.Cut() {
		total += u.Admitted
	}
	if total != workers*per {
		t.Fatalf("reported %v RU, charged %d", total, workers*per)
	}
}
