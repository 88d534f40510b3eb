package collector

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/autopilot"
	"github.com/qtop-dev/qtop/policy"
)

// heldBook feeds a baseline book one snapshot a second of 20 tenants at
// 10 RU/s and bigcorp, whose load is ru(sec), while pol (at that second)
// may hold it.
type heldBook struct {
	start time.Time
	hist  map[string][]float64
}

func (h *heldBook) feed(b *baselineBook, from, to int, ru func(sec int) float64, pol func(sec int) *policy.Policy) {
	if h.hist == nil {
		h.hist = map[string][]float64{}
	}
	for sec := from; sec < to; sec++ {
		now := h.start.Add(time.Duration(sec) * time.Second)
		s := api.Snapshot{Time: now, Window: 10 * time.Second, Collector: api.CollectorStatus{Uptime: time.Hour}}
		row := func(name string, ru, p95 float64) {
			h.hist[name] = append(h.hist[name], ru)
			hs := make([]float64, api.HistoryLen)
			all := h.hist[name]
			copy(hs[max(api.HistoryLen-len(all), 0):], all[max(len(all)-api.HistoryLen, 0):])
			s.Tenants = append(s.Tenants, api.TenantRow{Tenant: name, RUPerSec: ru, P95Seconds: p95, History: hs})
		}
		row("bigcorp", ru(sec), 0.2)
		for k := range 20 {
			row(fmt.Sprintf("t%02d", k), 10, 0.02)
		}
		b.snapshot(&s, now) // the baselines served, as the live view carries them
		b.add(&s, nil, heldTenants(pol(sec), now))
	}
}

// TestBaselinesNotLearntWhileHeld: bigcorp (10 RU/s for six minutes)
// imports at 800 RU/s from 6:00; at 6:20 the autopilot's quota holds it
// to 10, then 20 and 40 RU/s (its relax steps) until 12:00. Its load then
// is the quota's, not its own: no second of it is learnt, by a book that
// runs through or by one restarted at 8:00 from the file the first saved
// — whose fresh detector never saw the incident. The other tenants are
// learnt all along. Before, the held-down load was learnt, restart or
// not: at its baseline the offender is no longer flagged, and the
// restarted book never flagged it.
func TestBaselinesNotLearntWhileHeld(t *testing.T) {
	const importAt, heldAt, restartAt, liftAt, end = 360, 380, 480, 720, 780
	ru := func(sec int) float64 {
		switch {
		case sec < importAt || sec >= end:
			return 10
		case sec < heldAt:
			return 800
		case sec >= liftAt:
			return 800
		}
		return 10 * float64(int(1)<<min((sec-heldAt)/60, 2)) // 10, 20, 40
	}
	quota := policy.Rule{ID: "autopilot-noisy-1", Tenant: "bigcorp", Action: policy.Quota, RUPerSecond: 10,
		Expires: time.Time{}, CreatedBy: autopilot.CreatedByPrefix + "noisy"}
	pol := func(sec int) *policy.Policy {
		if sec < heldAt || sec >= liftAt {
			return &policy.Policy{}
		}
		r := quota
		r.Expires = time.Date(2026, 12, 4, 5, 0, 0, 0, time.UTC)
		return &policy.Policy{Rules: []policy.Rule{r}}
	}
	start := time.Date(2026, 12, 4, 4, 0, 0, 0, time.UTC)
	heldMinutes := func(b *baselineBook) (held []int64, others int) {
		b.mu.Lock()
		defer b.mu.Unlock()
		m0 := start.Unix() / 60
		if tm := b.tenants["bigcorp"]; tm != nil {
			for i := range baselineSlots {
				if m := tm.at[i] - m0; tm.n[i] > 0 && m >= heldAt/60 && m < liftAt/60 {
					held = append(held, m)
				}
			}
		}
		if tm := b.tenants["t00"]; tm != nil {
			for i := range baselineSlots {
				if m := tm.at[i] - m0; tm.n[i] >= minuteSeconds && m >= heldAt/60+1 && m < liftAt/60 {
					others++
				}
			}
		}
		slices.Sort(held)
		return held, others
	}
	dir := t.TempDir()
	file := filepath.Join(dir, baselinesFile)
	h := &heldBook{start: start}
	through := newBaselineBook()
	if err := through.load(file); err != nil {
		t.Fatal(err)
	}
	h.feed(through, 0, restartAt, ru, pol)
	restarted := newBaselineBook()
	if err := restarted.load(file); err != nil {
		t.Fatal(err)
	}
	h2 := &heldBook{start: start, hist: map[string][]float64{}}
	for k, v := range h.hist {
		h2.hist[k] = slices.Clone(v)
	}
	through.file = "" // the restarted book's file from now on
	h.feed(through, restartAt, end, ru, pol)
	h2.feed(restarted, restartAt, end, ru, pol)
	for name, b := range map[string]*baselineBook{"run through": through, "restarted at 8:00": restarted} {
		held, others := heldMinutes(b)
		if len(held) > 0 {
			t.Errorf("%s: bigcorp's minutes %v (from the start) learnt while the quota held it", name, held)
		}
		if others < 3 {
			t.Errorf("%s: t00 learnt in %d of the held minutes: the test shows nothing", name, others)
		}
	}
}

// TestHeldTenants: a temporary limit in force holds a tenant — a quota,
// a throttle or an enforced budget that the autopilot wrote or that
// expires, by hand too; not a price rule, a shadow rule, a warn budget,
// an expired limit, or a standing budget written by hand (no expiry).
func TestHeldTenants(t *testing.T) {
	now := time.Date(2026, 12, 4, 4, 0, 0, 0, time.UTC)
	later := now.Add(time.Minute)
	by := autopilot.CreatedByPrefix + "noisy"
	pol := &policy.Policy{Rules: []policy.Rule{
		{ID: "1", Tenant: "quota", Action: policy.Quota, Expires: later, CreatedBy: by},
		{ID: "2", Tenant: "throttle", Action: policy.Throttle, Expires: later, CreatedBy: by},
		{ID: "3", Tenant: "price", Action: policy.Price, Expires: later, CreatedBy: by},
		{ID: "4", Tenant: "shadow", Action: policy.Quota, Shadow: true, Expires: later, CreatedBy: by},
		{ID: "5", Tenant: "expired", Action: policy.Quota, Expires: now, CreatedBy: by},
		{ID: "6", Tenant: "by-hand", Action: policy.Quota, Expires: later, CreatedBy: "ops@10.0.0.1"},
		{ID: "6b", Tenant: "by-hand-throttle", Action: policy.Throttle, Expires: later, CreatedBy: "qtop (ops)"},
		{ID: "6c", Tenant: "by-hand-expired", Action: policy.Throttle, Expires: now, CreatedBy: "qtop (ops)"},
	}, Budgets: []policy.Budget{
		{ID: "7", Match: []map[string]string{{"tenant": "budget"}}, Mode: policy.Enforce, Expires: later, CreatedBy: by},
		{ID: "8", Match: []map[string]string{{"tenant": "warn"}}, Mode: policy.Warn, Expires: later, CreatedBy: by},
		{ID: "9", Match: []map[string]string{{"tenant": "budget-expired"}}, Mode: policy.Enforce, Expires: now, CreatedBy: by},
		{ID: "10", Match: []map[string]string{{"tenant": "budget-by-hand"}}, Mode: policy.Enforce, Expires: later, CreatedBy: "ops"},
		{ID: "11", Match: []map[string]string{{"tenant": "standing"}}, Mode: policy.Enforce, CreatedBy: "ops"},
		{ID: "12", Match: []map[string]string{{"tenant": "budget-no-expiry"}}, Mode: policy.Enforce, CreatedBy: by},
	}}
	got := heldTenants(pol, now)
	var names []string
	for n := range got {
		names = append(names, n)
	}
	slices.Sort(names)
	// "by-hand" is a quota written by hand: the tenant's plan, not a hold.
	if want := []string{"budget", "budget-by-hand", "budget-no-expiry", "by-hand-throttle", "quota", "throttle"}; !slices.Equal(names, want) {
		t.Fatalf("held %v, want %v", names, want)
	}
	if heldTenants(&policy.Policy{}, now) != nil {
		t.Fatal("an empty policy holds tenants")
	}
}

// TestBaselinesNotLearntUnderAThrottleByHand: an admin throttles
// bigcorp's import from qtop (t: 15 minutes, at its usual 10 RU/s) at
// 6:20; none of its seconds under the throttle are learnt, as under the
// autopilot's quota. Before, they were (only the autopilot's limits
// held), and its usual load, once the throttle expired, looked like a
// new incident. Under a standing budget written by hand (no expiry: the
// tenant's plan) it keeps teaching.
func TestBaselinesNotLearntUnderAThrottleByHand(t *testing.T) {
	const importAt, heldAt, end = 360, 380, 600
	start := time.Date(2026, 12, 4, 4, 0, 0, 0, time.UTC)
	ru := func(sec int) float64 {
		switch {
		case sec < importAt:
			return 10
		case sec < heldAt:
			return 800
		}
		return 10
	}
	learnt := func(pol func(sec int) *policy.Policy) int {
		b := newBaselineBook()
		(&heldBook{start: start}).feed(b, 0, end, ru, pol)
		b.mu.Lock()
		defer b.mu.Unlock()
		n := 0
		if tm := b.tenants["bigcorp"]; tm != nil {
			for i := range baselineSlots {
				if m := tm.at[i] - start.Unix()/60; m > heldAt/60 {
					n += tm.n[i]
				}
			}
		}
		return n
	}
	throttle := func(sec int) *policy.Policy {
		if sec < heldAt {
			return &policy.Policy{}
		}
		return &policy.Policy{Rules: []policy.Rule{{ID: "r1", Tenant: "bigcorp", Action: policy.Throttle, RUPerSecond: 10,
			Expires: start.Add(heldAt*time.Second + 15*time.Minute), Reason: "throttled from qtop (ops) for 15m0s", CreatedBy: "qtop (ops)"}}}
	}
	if n := learnt(throttle); n != 0 {
		t.Errorf("bigcorp's seconds learnt under the throttle by hand: %d", n)
	}
	standing := func(int) *policy.Policy {
		return &policy.Policy{Budgets: []policy.Budget{{ID: "plan", Match: []map[string]string{{"tenant": "bigcorp"}},
			Concurrency: 4, Mode: policy.Enforce, Reason: "plan", CreatedBy: "ops"}}}
	}
	if n := learnt(standing); n < 3*minuteSeconds {
		t.Errorf("under a standing budget by hand, bigcorp's seconds learnt after the import: %d, want its usual minutes", n)
	}
}

// TestBaselinesNotLearntUnderTheDemoQuota: the demo's import, limited by
// the autopilot's quota, on a collector restarted two minutes into the
// quota, on the same data dir: the restarted collector follows the
// action, and its book learns none of bigcorp's seconds while the quota
// holds it. Before, it learnt 43 s and 31 s of the quota's first two
// minutes (bigcorp, held near its baseline, was no longer flagged) and,
// after the restart, every second (the fresh detector saw no incident).
func TestBaselinesNotLearntUnderTheDemoQuota(t *testing.T) {
	demo := func(c *Config) { c.Demo = true } // the store keeps the policy across the restart
	f := newFixture(t, demo)
	ctx := context.Background()
	short := func() { f.s.feat.base.gap, f.s.feat.base.need = 1, 2 }
	short()
	if err := f.s.feat.pilot.setAutopilot(ctx, f.clk.Now(), "ops", auditAutopilotSet, func(a *policy.Autopilot) bool {
		*a = pilotRule(policy.AutopilotEnforce)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	fleet, err := newDemoFleet(f.s, f.clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	fleet.importAfter = 4 * time.Minute
	fleet.warm(f.clk.Now())
	held := map[int64]bool{} // the minutes with a second bigcorp was held
	var applied time.Time
	for sec := 1; sec <= 9*60; sec++ {
		now := f.clk.Add(time.Second)
		fleet.step(now)
		f.s.Tick(ctx, now)
		httpAPI{f.s}.stepAutopilot(ctx)
		if a := f.s.feat.pilot.eng.Active(); len(a) == 1 && a[0].Tenant == DemoImportTenant && !a[0].Shadow {
			if applied.IsZero() {
				applied = now
			}
			held[now.Unix()/60] = true
		}
		if !applied.IsZero() && now.Sub(applied) == 2*time.Minute {
			f.stop()
			f.start(demo)
			short()
			fleet.s = f.s
		}
	}
	defer f.stop()
	if applied.IsZero() || len(held) < 4 {
		t.Fatalf("bigcorp held in %d minutes: the test shows nothing", len(held))
	}
	b := f.s.feat.base
	b.mu.Lock()
	defer b.mu.Unlock()
	tm := b.tenants[DemoImportTenant]
	if tm == nil {
		t.Fatal("no minutes of bigcorp in the book")
	}
	learnt := map[int64]int{}
	for i := range baselineSlots {
		if m := tm.at[i]; tm.n[i] > 0 && held[m] && held[m-1] && held[m+1] {
			learnt[m-applied.Unix()/60] = tm.n[i]
		}
	}
	if len(learnt) > 0 {
		t.Fatalf("bigcorp's seconds learnt while the quota held it, by minute from the apply's: %v", learnt)
	}
}

// TestHeldLoadNotInTheShares: while the autopilot's quota holds bigcorp
// (200 RU/s, the limit's), the other tenants' shares are learnt against
// the load that is theirs, not against a total half of which is the
// limit's: t00's share (10 of the 200 RU/s of 20 tenants) is 5%, as it
// is without bigcorp. Before, it was learnt as 2.5%, and a victim's
// share, judged against that, looked doubled once the limit lifted.
func TestHeldLoadNotInTheShares(t *testing.T) {
	start := time.Date(2026, 12, 4, 4, 0, 0, 0, time.UTC)
	by := autopilot.CreatedByPrefix + "noisy"
	pol := func(int) *policy.Policy {
		return &policy.Policy{Rules: []policy.Rule{{ID: "autopilot-noisy-1", Tenant: "bigcorp", Action: policy.Quota,
			RUPerSecond: 200, Expires: start.Add(time.Hour), CreatedBy: by}}}
	}
	b := newBaselineBook()
	(&heldBook{start: start}).feed(b, 0, 180, func(int) float64 { return 200 }, pol)
	b.mu.Lock()
	defer b.mu.Unlock()
	tm := b.tenants["t00"]
	slot := (start.Unix()/60 + 1) % baselineSlots
	if tm == nil || tm.n[slot] != 60 {
		t.Fatalf("t00's second minute not learnt whole: %+v", tm)
	}
	if got := tm.share[slot] / float64(tm.n[slot]); math.Abs(got-0.05) > 1e-12 {
		t.Fatalf("t00's share learnt %v, want 0.05 (10 of the 200 RU/s not held)", got)
	}
	if _, ok := b.tenants["bigcorp"]; ok {
		t.Fatal("bigcorp learnt while held")
	}
}
