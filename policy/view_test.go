package policy

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/tenant"
)

// bigPolicy is the issue's policy: 10,000 rules, one per tenant, plus two
// tier rules.
func bigPolicy(now time.Time) Policy {
	p := Policy{Version: 7}
	for i := range 10000 {
		p.Rules = append(p.Rules, Rule{ID: fmt.Sprintf("r%05d", i), Tenant: fmt.Sprintf("tenant-%05d", i), Action: Throttle,
			RUPerSecond: 100, Expires: now.Add(time.Hour), Reason: "import storm, capped by the on-call"})
	}
	p.Rules = append(p.Rules,
		Rule{ID: "t3", Tier: tenant.T3, Action: Price, Multiplier: 2, Expires: now.Add(time.Hour), Reason: "shed T3"},
		Rule{ID: "old", Tier: tenant.T2, Action: Price, Multiplier: 2, Expires: now.Add(-time.Hour), Reason: "expired"})
	p.Budgets = []Budget{{ID: "analytics", Match: []map[string]string{{"tenant": "analytics"}}, Concurrency: 1, Reason: "vacuum"}}
	p.Freshness = &Freshness{Rules: MonzoRules(), Batch: 1}
	return p
}

func TestViewCarriesWhatAProcessNeeds(t *testing.T) {
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	p := bigPolicy(now)
	whole, _ := json.Marshal(p)
	var tenants []string
	for i := range 100 {
		tenants = append(tenants, fmt.Sprintf("tenant-%05d", i*50))
	}
	v, b, err := p.ViewFor(tenants, "", now, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Rules) != 101 || v.Truncated != 0 || v.Version != 7 || v.Tag == "" || v.Unchanged {
		t.Fatalf("view: %d rules, truncated %d, version %d, tag %q", len(v.Rules), v.Truncated, v.Version, v.Tag)
	}
	t.Logf("whole policy %d bytes; view of 100 tenants %d bytes", len(whole), len(b))
	var got View
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%v: %s", err, b[:200])
	}
	if got.Tag != v.Tag || len(got.Rules) != 101 || len(got.Budgets) != 1 || got.Freshness == nil || got.Rules[0].ID != "t3" || got.Rules[100].ID != "r04950" {
		t.Fatalf("decoded view: tag %q, %d rules, %d budgets", got.Tag, len(got.Rules), len(got.Budgets))
	}
	if len(b) > DefaultMaxViewBytes {
		t.Fatalf("view of %d bytes", len(b))
	}
	// The process's rules apply from the view as from the whole policy.
	pv := v.Policy()
	for _, tags := range []tenant.Tags{{Tenant: "tenant-00050", Tier: tenant.T3}, {Tenant: "tenant-00050"}, {Tenant: "x", Tier: tenant.T3}} {
		if got, want := pv.For(tags, now), p.For(tags, now); got != want {
			t.Errorf("%+v: view %+v, policy %+v", tags, got, want)
		}
	}

	// Held: nothing but the version and tag.
	v2, b2, _ := p.ViewFor(tenants, v.Tag, now, 0)
	if !v2.Unchanged || len(v2.Rules) != 0 || v2.Tag != v.Tag || len(b2) > 64 {
		t.Fatalf("unchanged view: %+v (%d bytes)", v2, len(b2))
	}
	// Another tenant's rule changes (a new version): still unchanged here.
	p.Version++
	p.Rules[1].RUPerSecond = 5
	if v3, _, _ := p.ViewFor(tenants, v.Tag, now, 0); !v3.Unchanged || v3.Version != 8 {
		t.Fatalf("another tenant's change: %+v", v3)
	}
	// One of its tenants' rules changes: the view again, with a new tag.
	p.Rules[50].RUPerSecond = 5
	v4, _, _ := p.ViewFor(tenants, v.Tag, now, 0)
	if v4.Unchanged || v4.Tag == v.Tag || len(v4.Rules) != 101 {
		t.Fatalf("its own change: unchanged %v, tag %q, %d rules", v4.Unchanged, v4.Tag, len(v4.Rules))
	}
}

// The byte bound leaves out the rules of the last tenants asked for,
// counted, never the tier rules.
func TestViewBounded(t *testing.T) {
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	p := bigPolicy(now)
	var tenants []string
	for i := range 1000 {
		tenants = append(tenants, fmt.Sprintf("tenant-%05d", i))
	}
	v, b, err := p.ViewFor(tenants, "", now, 16<<10)
	if err != nil {
		t.Fatal(err)
	}
	var got View
	if err := json.Unmarshal(b, &got); err != nil || got.Truncated != v.Truncated {
		t.Fatalf("decoded: %v, truncated %d", err, got.Truncated)
	}
	if len(b) > 16<<10 || v.Truncated == 0 || len(v.Rules)+v.Truncated != 1001 || v.Rules[0].ID != "t3" || v.Rules[1].Tenant != "tenant-00000" {
		t.Fatalf("%d bytes, %d rules, truncated %d, first %s %s", len(b), len(v.Rules), v.Truncated, v.Rules[0].ID, v.Rules[1].Tenant)
	}
}

func BenchmarkViewFor(b *testing.B) {
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	p := bigPolicy(now)
	var tenants []string
	for i := range 100 {
		tenants = append(tenants, fmt.Sprintf("tenant-%05d", i*50))
	}
	x, err := p.Index(now)
	if err != nil {
		b.Fatal(err)
	}
	v, _, _ := x.ViewFor(tenants, "", 0)
	b.Run("unchanged", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			x.ViewFor(tenants, v.Tag, 0)
		}
	})
	b.Run("changed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			x.ViewFor(tenants, "", 0)
		}
	})
}

func TestIndexValid(t *testing.T) {
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	p := Policy{Version: 3, Rules: []Rule{
		{ID: "a", Tenant: "a", Action: Throttle, RUPerSecond: 1, Expires: now.Add(time.Minute), Reason: "x"},
		{ID: "b", Tenant: "b", Action: Throttle, RUPerSecond: 1, Expires: now.Add(time.Hour), Reason: "x"},
	}}
	x, err := p.Index(now)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		version uint64
		at      time.Time
		valid   bool
	}{
		{3, now, true},
		{3, now.Add(time.Minute - 1), true},
		{3, now.Add(time.Minute), false}, // rule a expired: rebuild
		{4, now, false},                  // a new version
	} {
		if got := x.Valid(c.version, c.at); got != c.valid {
			t.Errorf("Valid(%d, %v) = %v", c.version, c.at.Sub(now), got)
		}
	}
}

func ExampleIndex_ViewFor() {
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	p := Policy{Version: 12, Rules: []Rule{
		{ID: "cap-bigco", Tenant: "bigco", Action: Throttle, RUPerSecond: 500, Expires: now.Add(time.Hour), Reason: "import storm"},
		{ID: "cap-other", Tenant: "other", Action: Throttle, RUPerSecond: 5, Expires: now.Add(time.Hour), Reason: "scraper"},
		{ID: "t3", Tier: tenant.T3, Action: Price, Multiplier: 2, Expires: now.Add(time.Hour), Reason: "shed T3"},
	}}
	x, _ := p.Index(now) // once per policy version, while x.Valid
	// A process that reports bigco and shop, holding no view yet:
	v, _, _ := x.ViewFor([]string{"bigco", "shop"}, "", 0)
	for _, r := range v.Rules {
		fmt.Println(r.ID)
	}
	// Its next report carries v.Tag: nothing changed for it.
	again, b, _ := x.ViewFor([]string{"bigco", "shop"}, v.Tag, 0)
	fmt.Println(again.Unchanged, len(b) < 64)
	// Output:
	// t3
	// cap-bigco
	// true true
}
