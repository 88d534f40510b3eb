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
	// p1's share is 150 (300 × 200/400), but p2 has no allowance yet and
	// may admit its demand of 200 until its reply: the two would hold 47
	// above the limit and its 1 % slack, and p1 gives back half of it.
	if len(v) != 1 || v[0].Tenant != "bigco" || math.Abs(v[0].Allowance-126.5) > 1e-9 || v[0].Rate != 0.25 || v[0].For != 3*sec {
		t.Fatalf("p1 verdicts %+v, want bigco allowance 126.5, rate 0.25, for 3 s", v)
	}
	// p2's share is 150; with p1's 126.5 that leaves 26.5 of the limit
	// and the slack: p2 takes half of it.
	if v := f.Verdicts(at(10), "p2", nil); len(v) != 1 || v[0].Allowance != 163.25 {
		t.Fatalf("p2 verdicts %+v, want allowance 163.25", v)
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
	f.SetRemote(at(1000), []Remote{{Rates: map[string]Rates{"bigco": {Demand: 100, Admitted: 100}}}})
	if r := f.Rates("bigco"); r.Demand != 600 || r.Admitted != 450 {
		t.Fatalf("with remote: %+v", r)
	}
	var local Rates
	f.Local(at(1000), func(name string, r Rates) {
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
	// Its share is 50 (150 × 100/300); p3 still holds an allowance under
	// the old limit, counted at its share under the new one (100), which
	// leaves 51.5 with the slack: 50 and half of the 1.5 above it.
	if len(v) != 1 || math.Abs(v[0].Allowance-50.75) > 1e-9 || !v[0].Shadow {
		t.Fatalf("after the limit change: %+v, want shadow allowance 50.75", v)
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

// TestFleetDebt: once a tenant is listed, RU admitted above its limit is
// debt that lowers the fleet's allowance until it is paid back (over the
// longer of WithRepay and the window, here 1 s; at most WithMaxCut of the
// limit at once), on fixed instants. Each report's rate is charged until
// the next report (the balance lags one window), except the windows that
// began before the tenant was listed, which are forgiven; the balance
// banks at most 5 % of a second of the limit. One process alone gets the
// fleet's allowance and half of the 1 % slack.
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
			{0, 200, 0, 100.5},    // first listed: the balance starts at 0
			{1000, 250, 0, 100.5}, // the window before listing is forgiven: + 100, banked 5
			{2000, 250, 0, 0},     // 5 + 100 − 250: 145 RU of debt, more than a second's worth
			{3000, 0, 200, 0},     // − 145 more: 295
			{4000, 0, 200, 0},     // + 100: 195
			{5000, 0, 200, 5.025}, // + 100: 95 RU of debt, paid back over a second
			{6000, 5, 200, 100.5}, // + 100: banked 5
		}},
		{0.2, []step{
			{0, 200, 0, 100.5},
			{1000, 250, 0, 100.5},
			{2000, 250, 0, 80.4},  // 145 RU of debt, but at most 20 % of the limit withheld
			{3000, 80, 120, 80.4}, // + 100 − 250: 295
			{4000, 80, 120, 80.4}, // + 100 − 80: 275
			{5000, 0, 200, 80.4},  // 255
		}},
	} {
		f, _ := NewFleet(limits(map[string]Limit{"bigco": {RUPerSecond: 100}}), WithMaxCut(c.maxCut))
		for i, s := range c.steps {
			f.Observe(at(s.ms), "p1", time.Second, []Usage{{Tenant: "bigco", Admitted: s.admitted, Refused: s.refused}})
			v := f.Verdicts(at(s.ms), "p1", nil)
			if len(v) != 1 || math.Abs(v[0].Allowance-s.allowance) > 1e-9 {
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
	if v := f.Verdicts(at(2000), "p1", nil); len(v) != 1 || v[0].Allowance != 0 {
		t.Fatalf("in debt: %+v, want allowance 0", v)
	}
	f.SetLimits(limits(map[string]Limit{"bigco": {RUPerSecond: 50}}))
	if v := f.Verdicts(at(2000), "p1", nil); len(v) != 1 || v[0].Allowance != 50.25 {
		t.Fatalf("after a limit change: %+v, want allowance 50.25 (no debt)", v)
	}
}

// TestFleetGrants: each allowance is the process's share, less half of
// what the sources would then hold above the collector's part of the
// limit and its 1 % slack (or, over the limit, plus half of what they
// leave, up to 1.5 × its share), though each share is reported at its own
// time: a process whose demand grew first gets part of its share until
// the others give back theirs at their next reports, and the allowances
// converge to the shares, their sum to the limit. Under its limit, a
// process gets its share, and never less than an equal part of the
// headroom.
func TestFleetGrants(t *testing.T) {
	f, _ := NewFleet(limits(map[string]Limit{"bigco": {RUPerSecond: 300}, "calm": {RUPerSecond: 1000}}))
	for i, s := range []struct {
		src, tenant string
		demand      float64
		allowance   float64 // -1: no verdict
	}{
		{"p1", "bigco", 200, 300},        // listed (200 ≥ half of 300), alone and under the limit: all of it
		{"p2", "bigco", 200, 76.5},       // over the limit now: share 150, but p1 holds 300 until its next report: 150 − (300 + 150 − 303)/2
		{"p1", "bigco", 200, 188.25},     // share 150, and half of the 76.5 that p2 leaves above it
		{"p2", "bigco", 200, 132.375},    // 150 − (188.25 + 150 − 303)/2
		{"p1", "bigco", 200, 160.3125},   // each report halves the difference
		{"p2", "bigco", 200, 146.34375},  //
		{"p1", "bigco", 200, 153.328125}, // towards 151 each
		{"q1", "calm", 300, -1},          // under half its limit: not listed
		{"q2", "calm", 300, 500},         // share 500 (1000 × 300/600), q1 may admit its 300: under the limit, no more than the share
		{"q1", "calm", 300, 500},         // the same
		{"q3", "calm", 100, 100},         // share 143, less half of the 133 above the limit; but under it: a third of the headroom of 300
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
	given := map[string]float64{}
	for i := range 20 {
		for _, src := range []string{"p2", "p1"} {
			f.Observe(at(100+i), src, time.Second, []Usage{{Tenant: "bigco", Admitted: 200}})
			given[src] = f.Verdicts(at(100+i), src, nil)[0].Allowance
		}
	}
	// a = 150 − (a + 150 − 303)/2: 151 each, the sum 302.
	if math.Abs(given["p1"]-151) > 0.01 || math.Abs(given["p2"]-151) > 0.01 {
		t.Fatalf("after 20 rounds: %v, want both at 151", given)
	}
}

// TestFleetIdleWindow: a process with no traffic of a listed tenant in one
// window keeps its allowance (as its share) (for up to hold windows), so that it does not
// come back unlimited.
func TestFleetIdleWindow(t *testing.T) {
	f, _ := NewFleet(limits(map[string]Limit{"bigco": {RUPerSecond: 300}}))
	f.Observe(at(0), "p1", time.Second, []Usage{{Tenant: "bigco", Admitted: 300, Refused: 300}})
	f.Observe(at(1), "p2", time.Second, []Usage{{Tenant: "bigco", Admitted: 300, Refused: 300}})
	f.Verdicts(at(1), "p1", nil)
	v := f.Verdicts(at(1), "p2", nil)
	if len(v) != 1 || v[0].Allowance == 0 {
		t.Fatalf("p2: %+v", v)
	}
	kept := v[0].Allowance
	for i := range DefaultHold {
		f.Observe(at(2+i), "p2", time.Second, nil)
		// Kept, and (p1 holding nothing) half of what is left added.
		if v := f.Verdicts(at(2+i), "p2", nil); len(v) != 1 || v[0].Allowance < kept {
			t.Fatalf("idle window %d: %+v, want at least the allowance of %v kept", i+1, v, kept)
		}
	}
	f.Observe(at(9), "p2", time.Second, nil)
	if v := f.Verdicts(at(9), "p2", nil); len(v) != 0 {
		t.Fatalf("after %d idle windows: %+v, want none", DefaultHold+1, v)
	}
}

// TestFleetRemote: the other collectors' demand follows this collector's
// own between exchanges (a multiple of its demand when they wrote it),
// and without another exchange (Redis unreachable) it counts for hold
// exchanges, then no more.
func TestFleetRemote(t *testing.T) {
	f, _ := NewFleet(limits(map[string]Limit{"bigco": {RUPerSecond: 1000}}))
	u := []Usage{{Tenant: "bigco", Admitted: 100}}
	exchange := func(ms int, age time.Duration, other float64) {
		f.Local(at(ms), func(string, Rates) {})
		f.SetRemote(at(ms), []Remote{{Age: age, Rates: map[string]Rates{"bigco": {Demand: other, Admitted: other}}}})
	}
	f.Observe(at(0), "p1", time.Second, u)
	exchange(0, 0, 200)
	f.Observe(at(1000), "p1", time.Second, u)
	exchange(1000, 0, 200)
	if r := f.Rates("bigco"); r.Demand != 300 {
		t.Fatalf("after two exchanges: %+v, want 100 + 200", r)
	}
	// This collector's demand doubles: the others' is taken to double too.
	f.Observe(at(1500), "p1", time.Second, []Usage{{Tenant: "bigco", Admitted: 200}})
	if r := f.Rates("bigco"); r.Demand != 600 {
		t.Fatalf("local demand doubled: %+v, want 200 + 400", r)
	}
	// An exchange whose other side wrote half an exchange ago, when this
	// collector's demand was between 100 and 200: lined up with that.
	exchange(2000, 500*time.Millisecond, 300)
	if r := f.Rates("bigco"); math.Abs(r.Demand-(200+300*200/150.0)) > 1e-9 {
		t.Fatalf("lined up: %+v, want 200 + 300 × 200/150", r)
	}
	// No exchange for more than 3 exchanges: the others no longer count.
	f.Observe(at(5100), "p1", time.Second, []Usage{{Tenant: "bigco", Admitted: 200}})
	if r := f.Rates("bigco"); r.Demand != 200 {
		t.Fatalf("others' sums expired: %+v, want 200", r)
	}
}
