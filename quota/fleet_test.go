package quota

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/tenant"
)

func limits(m map[string]Limit) func(string, tenant.Tier) (Limit, bool) {
	return func(t string, _ tenant.Tier) (Limit, bool) { l, ok := m[t]; return l, ok }
}

func TestDecide(t *testing.T) {
	lim := Limit{RUPerSecond: 1000}
	cases := []struct {
		own, fleet      float64
		listed          bool
		rate, allowance float64
	}{
		{0, 0, false, 0, 0},
		{100, 800, false, 0, 0},         // under 0.9 of the limit
		{100, 900, true, 0, 1000.0 / 9}, // near: listed, allowance above its demand
		{500, 2000, true, 0.5, 250},     // twice the limit: half refused
		{1000, 10000, true, 0.9, 100},   // a 10× burst
		{0, 2000, true, 0.5, 0},         // a process with no demand gets no share
	}
	for _, c := range cases {
		v, ok := Decide(lim, lim.RUPerSecond, c.own, c.fleet, 0.9)
		if ok != c.listed || v.Rate != c.rate || v.Allowance != c.allowance {
			t.Errorf("Decide(own %v, fleet %v) = %+v, %v; want rate %v allowance %v listed %v", c.own, c.fleet, v, ok, c.rate, c.allowance, c.listed)
		}
	}
	if v, ok := Decide(Limit{RUPerSecond: 0, Shadow: true}, 0, 1, 1, DefaultNear); !ok || v.Rate != 1 || v.Allowance != 0 || !v.Shadow {
		t.Errorf("zero limit: %+v %v", v, ok)
	}
}

// TestFleetSteps: three processes report on fixed instants; the sums, the
// verdicts and the expiry of a silent process follow.
func TestFleetSteps(t *testing.T) {
	f, err := NewFleet(limits(map[string]Limit{"bigco": {RUPerSecond: 300}, "calm": {RUPerSecond: 1e6}}))
	if err != nil {
		t.Fatal(err)
	}
	sec := time.Second
	u := func(name string, adm, ref float64) Usage { return Usage{Tenant: name, Admitted: adm, Refused: ref} }
	// t0: p1 and p2 report 200 RU/s each of bigco; p3 nothing yet.
	f.Observe(at(0), "p1", sec, []Usage{u("bigco", 200, 0), u("calm", 5, 0), u("nolimit", 1e9, 0)})
	f.Observe(at(10), "p2", sec, []Usage{u("bigco", 150, 50)})
	if r := f.Rates("bigco"); r.Demand != 400 || r.Admitted != 350 {
		t.Fatalf("bigco %+v, want demand 400, admitted 350", r)
	}
	if r := f.Rates("nolimit"); r.Demand != 0 {
		t.Fatalf("a tenant without a limit is not summed: %+v", r)
	}
	v := f.Verdicts(at(10), "p1", nil)
	// What was admitted before bigco was first listed is forgiven.
	if len(v) != 1 || v[0].Tenant != "bigco" || v[0].Allowance != 150 || v[0].Rate != 0.25 || v[0].For != 3*sec {
		t.Fatalf("p1 verdicts %+v, want bigco allowance 150 (300 × 200/400), rate 0.25, for 3 s", v)
	}
	// p1's next report replaces its previous one.
	f.Observe(at(1000), "p1", sec, []Usage{u("bigco", 100, 0)})
	if r := f.Rates("bigco"); r.Demand != 300 {
		t.Fatalf("after p1's second report: %+v, want 300", r)
	}
	// 2 s windows count per second.
	f.Observe(at(1000), "p3", 2*sec, []Usage{u("bigco", 200, 200)})
	if r := f.Rates("bigco"); r.Demand != 500 {
		t.Fatalf("with p3: %+v, want 500", r)
	}
	// Other collectors' sums add up.
	f.SetRemote(at(1000), map[string]Rates{"bigco": {Demand: 100, Admitted: 100}})
	if r := f.Rates("bigco"); r.Demand != 600 || r.Admitted != 450 {
		t.Fatalf("with remote: %+v", r)
	}
	var local Rates
	f.Local(func(name string, r Rates) {
		if name == "bigco" {
			local = r
		}
	})
	if local.Demand != 500 {
		t.Fatalf("local %+v, want 500 (remote not included)", local)
	}
	f.SetRemote(at(1000), nil)
	// p2 (last seen at 10 ms, 1 s windows) is forgotten after 3 s.
	f.Observe(at(3010), "p1", sec, []Usage{u("bigco", 100, 0)})
	if r := f.Rates("bigco"); r.Demand != 300 {
		t.Fatalf("after p2 expired: %+v, want p1 100 + p3 200", r)
	}
	if v := f.Verdicts(at(3010), "p2", nil); len(v) != 0 {
		t.Fatalf("verdicts for a forgotten source: %+v", v)
	}
	// A new policy changes the answer at the next report.
	f.SetLimits(limits(map[string]Limit{"bigco": {RUPerSecond: 150, Shadow: true}}))
	v = f.Verdicts(at(3010), "p1", nil)
	if len(v) != 1 || v[0].Allowance != 50 || !v[0].Shadow {
		t.Fatalf("after the limit change: %+v, want shadow allowance 50 (150 × 100/300)", v)
	}
}

func TestFleetBounds(t *testing.T) {
	f, _ := NewFleet(limits(map[string]Limit{"a": {RUPerSecond: 1}, "b": {RUPerSecond: 1}}), WithMaxSources(2), WithFleetTenants(1))
	for i := range 4 {
		f.Observe(at(0), fmt.Sprint("p", i), time.Second, []Usage{{Tenant: "a", Admitted: 1}, {Tenant: "b", Admitted: 1}})
	}
	if r := f.Rates("a"); r.Demand != 2 {
		t.Fatalf("a %+v, want 2 sources", r)
	}
	if r := f.Rates("b"); r.Demand != 0 {
		t.Fatalf("b %+v: beyond the tenant bound", r)
	}
	for _, o := range []FleetOption{WithMaxSources(0), WithNear(0), WithNear(1.5), WithHold(0)} {
		if _, err := NewFleet(limits(nil), o); err == nil {
			t.Fatal("bad option accepted")
		}
	}
	if _, err := NewFleet(nil); err == nil {
		t.Fatal("nil limit accepted")
	}
}

func BenchmarkFleetObserve(b *testing.B) {
	lim := map[string]Limit{}
	usage := make([]Usage, 100)
	for i := range usage {
		usage[i] = Usage{Tenant: fmt.Sprint("t", i), Admitted: 10, Refused: 1}
		lim[usage[i].Tenant] = Limit{RUPerSecond: 50}
	}
	f, _ := NewFleet(limits(lim))
	var dst []Verdict
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		src := fmt.Sprint("p", i%100)
		f.Observe(t0, src, time.Second, usage)
		dst = f.Verdicts(t0, src, dst[:0])
	}
}

// TestFleetDebt: once a tenant is listed, RU admitted above its limit
// from one window later on (what comes before is forgiven) is debt that
// lowers the fleet's allowance until it is paid back (over the
// longer of WithRepay and the window, here 1 s; at most WithMaxCut of
// the limit at once), on fixed instants.
func TestFleetDebt(t *testing.T) {
	type step struct {
		ms                int
		admitted, refused float64
		allowance         float64
	}
	for _, c := range []struct {
		maxCut float64
		steps  []step
	}{
		{1, []step{
			{0, 200, 0, 100},     // first listed: the balance starts at 0
			{1000, 250, 0, 100},  // the window after listing is forgiven: + 100 refilled
			{2000, 250, 0, 0},    // 100 − 250: 150 RU of debt, more than a second's worth
			{3000, 0, 200, 50},   // + 100 refilled: 50 RU of debt left, paid back over a second
			{4000, 50, 150, 100}, // + 100 − 50: balance 0, no debt
			{5000, 100, 100, 100},
		}},
		{0.2, []step{
			{0, 200, 0, 100},
			{1000, 250, 0, 100},
			{2000, 250, 0, 80},  // 150 RU of debt, but at most 20 % of the limit withheld
			{3000, 80, 120, 80}, // admitting 80 of 100 pays back 20 RU a second: −130
			{4000, 80, 120, 80}, // −110
			{5000, 0, 200, 90},  // −10: 10 RU/s withheld
			{6000, 0, 200, 100}, // paid back
		}},
	} {
		f, _ := NewFleet(limits(map[string]Limit{"bigco": {RUPerSecond: 100}}), WithMaxCut(c.maxCut))
		for i, s := range c.steps {
			f.Observe(at(s.ms), "p1", time.Second, []Usage{{Tenant: "bigco", Admitted: s.admitted, Refused: s.refused}})
			v := f.Verdicts(at(s.ms), "p1", nil)
			if len(v) != 1 || v[0].Allowance != s.allowance {
				t.Fatalf("max cut %v, step %d (t=%d ms): %+v, want allowance %v", c.maxCut, i, s.ms, v, s.allowance)
			}
		}
	}
	// A new limit starts a new balance: the old debt is forgiven.
	f, _ := NewFleet(limits(map[string]Limit{"bigco": {RUPerSecond: 100}}), WithMaxCut(1))
	f.Observe(at(0), "p1", time.Second, []Usage{{Tenant: "bigco", Admitted: 200}})
	f.Verdicts(at(0), "p1", nil)
	f.Observe(at(1000), "p1", time.Second, []Usage{{Tenant: "bigco", Admitted: 300}})
	f.Observe(at(2000), "p1", time.Second, []Usage{{Tenant: "bigco", Admitted: 300}})
	f.SetLimits(limits(map[string]Limit{"bigco": {RUPerSecond: 50}}))
	if v := f.Verdicts(at(2000), "p1", nil); len(v) != 1 || v[0].Allowance != 50 {
		t.Fatalf("after a limit change: %+v, want allowance 50 (no debt)", v)
	}
}

// TestFleetGrants: the allowances a collector has handed out never sum
// above the limit, though each is computed from shares reported at
// different times: a process whose demand grew first waits for the
// others' next reports to get its full share. Under its limit a tenant
// gets its share and all the fleet's headroom besides.
func TestFleetGrants(t *testing.T) {
	f, _ := NewFleet(limits(map[string]Limit{"bigco": {RUPerSecond: 300}, "calm": {RUPerSecond: 1000}}))
	for i, s := range []struct {
		src, tenant string
		demand      float64
		allowance   float64 // -1: no verdict
	}{
		{"p1", "bigco", 200, 400}, // listed (200 ≥ half of 300), under the limit: its share (all of it) and the headroom
		{"p2", "bigco", 200, 0},   // over the limit now: fair 150, but p1 holds 400 until its next report
		{"p1", "bigco", 200, 150},
		{"p2", "bigco", 200, 150},
		{"p1", "bigco", 400, 159}, // p1 grew: fair 200 (300 × 400/600), but p2 holds 150 (of 300 + 3 % slack)
		{"p2", "bigco", 200, 100},
		{"p1", "bigco", 400, 200}, // now it gets its share
		{"q1", "calm", 300, -1},   // under half its limit: not listed
		{"q2", "calm", 300, 900},  // share 500 (1000 × 300/600) + headroom 400
		{"q1", "calm", 300, 900},
		{"q3", "calm", 100, 1000.0/7 + 300}, // the grants exceed the limit, but the fleet is under it
	} {
		f.Observe(at(i), s.src, time.Second, []Usage{{Tenant: s.tenant, Admitted: s.demand}})
		v := f.Verdicts(at(i), s.src, nil)
		got := -1.0
		if len(v) == 1 {
			got = v[0].Allowance
		}
		if math.Abs(got-s.allowance) > 1e-9 {
			t.Fatalf("step %d (%s %s): allowance %v, want %v", i, s.src, s.tenant, got, s.allowance)
		}
	}
}

// TestFleetIdleWindow: a process with no traffic of a listed tenant in one
// window keeps its allowance (for up to hold windows), so that it does not
// come back unlimited.
func TestFleetIdleWindow(t *testing.T) {
	f, _ := NewFleet(limits(map[string]Limit{"bigco": {RUPerSecond: 300}}))
	f.Observe(at(0), "p1", time.Second, []Usage{{Tenant: "bigco", Admitted: 300, Refused: 300}})
	f.Observe(at(1), "p2", time.Second, []Usage{{Tenant: "bigco", Admitted: 300, Refused: 300}})
	f.Verdicts(at(1), "p1", nil)
	v := f.Verdicts(at(1), "p2", nil)
	if len(v) != 1 || v[0].Allowance != 150 {
		t.Fatalf("p2: %+v", v)
	}
	for i := range DefaultHold {
		f.Observe(at(2+i), "p2", time.Second, nil)
		if v := f.Verdicts(at(2+i), "p2", nil); len(v) != 1 || v[0].Allowance != 150 {
			t.Fatalf("idle window %d: %+v, want the allowance of 150 kept", i+1, v)
		}
	}
	f.Observe(at(9), "p2", time.Second, nil)
	if v := f.Verdicts(at(9), "p2", nil); len(v) != 0 {
		t.Fatalf("after %d idle windows: %+v, want none", DefaultHold+1, v)
	}
}
