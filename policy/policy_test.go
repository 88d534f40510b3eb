package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/tenant"
)

var t0 = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

func TestValidate(t *testing.T) {
	ok := Rule{ID: "r1", Tenant: "acme", Action: Throttle, RUPerSecond: 100, Expires: t0.Add(time.Hour), Reason: "import"}
	cases := []struct {
		name string
		mod  func(*Rule)
		bad  bool
	}{
		{"ok", func(*Rule) {}, false},
		{"tier rule", func(r *Rule) { r.Tenant = ""; r.Tier = tenant.T3 }, false},
		{"no target", func(r *Rule) { r.Tenant = "" }, true},
		{"hostile tenant", func(r *Rule) { r.Tenant = "a\x00b" }, true},
		{"no expiry", func(r *Rule) { r.Expires = time.Time{} }, true},
		{"no reason", func(r *Rule) { r.Reason = "" }, true},
		{"negative rate", func(r *Rule) { r.RUPerSecond = -1 }, true},
		{"unknown action", func(r *Rule) { r.Action = "ban" }, true},
		{"price below 1", func(r *Rule) { r.Action = Price; r.Multiplier = 0.5 }, true},
		{"price ok", func(r *Rule) { r.Action = Price; r.Multiplier = 4 }, false},
	}
	for _, c := range cases {
		r := ok
		c.mod(&r)
		err := r.Validate()
		if (err != nil) != c.bad {
			t.Errorf("%s: Validate() = %v, want error %v", c.name, err, c.bad)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: error %v is not ErrInvalid", c.name, err)
		}
	}
}

func TestForAndActive(t *testing.T) {
	p := Policy{Version: 3, Rules: []Rule{
		{ID: "a", Tenant: "acme", Action: Throttle, RUPerSecond: 50, Expires: t0.Add(time.Minute), Reason: "x"},
		{ID: "b", Tier: tenant.T3, Action: Price, Multiplier: 4, Expires: t0.Add(time.Hour), Reason: "ratio"},
		{ID: "c", Tier: tenant.T3, Action: Price, Multiplier: 2, Expires: t0.Add(time.Hour), Reason: "ratio"},
		{ID: "d", Tenant: "acme", Action: Throttle, RUPerSecond: 10, Shadow: true, Expires: t0.Add(time.Hour), Reason: "try"},
	}}
	steps := []struct {
		at    time.Time
		tags  tenant.Tags
		want  Effect
		nLive int
	}{
		{t0, tenant.Tags{Tenant: "acme", Tier: tenant.T3}, Effect{Multiplier: 8, Throttled: true, RUPerSecond: 50, Shadow: true}, 4},
		{t0, tenant.Tags{Tenant: "beta", Tier: tenant.T0}, Effect{Multiplier: 1}, 4},
		{t0.Add(time.Minute), tenant.Tags{Tenant: "acme", Tier: tenant.T1}, Effect{Multiplier: 1, Shadow: true}, 3},
		{t0.Add(2 * time.Hour), tenant.Tags{Tenant: "acme", Tier: tenant.T3}, Effect{Multiplier: 1}, 0},
	}
	for i, s := range steps {
		if got := p.For(s.tags, s.at); got != s.want {
			t.Errorf("step %d: For = %+v, want %+v", i, got, s.want)
		}
		if got := len(p.Active(s.at)); got != s.nLive {
			t.Errorf("step %d: %d active rules, want %d", i, got, s.nLive)
		}
	}
	if a := p.Active(t0); a[0].Tenant == "" {
		t.Errorf("tenant rules should come first: %+v", a)
	}
}

func TestJSONRoundTrip(t *testing.T) {
	p := Policy{Version: 1, Updated: t0, Rules: []Rule{{ID: "a", Tier: tenant.T2, Action: Price, Multiplier: 2, Expires: t0, Reason: "r", Created: t0}}}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var q Policy
	if err := json.Unmarshal(b, &q); err != nil {
		t.Fatal(err)
	}
	if q.Rules[0].Tier != tenant.T2 || !q.Updated.Equal(t0) {
		t.Fatalf("round trip lost data: %s -> %+v", b, q)
	}
	if err := json.Unmarshal([]byte(`{"rules":[{"tier":"T9"}]}`), &q); err == nil {
		t.Fatal("a tier T9 must not decode")
	}
}

func ExamplePolicy_For() {
	now := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	p := Policy{Rules: []Rule{
		{ID: "import", Tenant: "acme", Action: Throttle, RUPerSecond: 200, Expires: now.Add(15 * time.Minute), Reason: "catalog import"},
		{ID: "shed-t3", Tier: tenant.T3, Action: Price, Multiplier: 4, Expires: now.Add(time.Minute), Reason: "latency ratio 0.4"},
	}}
	e := p.For(tenant.Tags{Tenant: "acme", Tier: tenant.T3}, now)
	fmt.Println(e.Throttled, e.RUPerSecond, e.Multiplier)
	// Output: true 200 4
}

// TestValidateEncodedSize: a policy whose rules each pass but that would
// not fit a reply as JSON is refused, saying how large it would be; the
// same rules with short reasons fit.
func TestValidateEncodedSize(t *testing.T) {
	long := strings.Repeat("r", 1000)
	var p Policy
	for i := range 9000 {
		p.Rules = append(p.Rules, Rule{ID: fmt.Sprintf("rule-%d", i), Tenant: fmt.Sprintf("tenant-%d", i), Action: Throttle,
			RUPerSecond: 100, Expires: t0.Add(time.Hour), Reason: long})
	}
	err := p.Validate()
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), fmt.Sprintf("at most %d", MaxEncodedBytes)) {
		t.Fatalf("9,000 rules with 1,000-byte reasons: %v", err)
	}
	if err := p.ValidateContent(); err != nil {
		t.Fatalf("ValidateContent, which leaves the size to the reply's bound: %v", err)
	}
	for i := range p.Rules {
		p.Rules[i].Reason = "import"
	}
	if err := p.Validate(); err != nil {
		t.Fatalf("the same rules with short reasons: %v", err)
	}
}

// A rule for a tenant named like the overflow row is a rule for that
// tenant, which qtop shows under its stand-in: both names find it.
func TestRuleForTenantNamedOther(t *testing.T) {
	p := Policy{Version: 1, Rules: []Rule{
		{ID: "a", Tenant: tenant.Other, Action: Throttle, RUPerSecond: 5, Expires: t0.Add(time.Hour), Reason: "x"},
		{ID: "q", Tenant: tenant.Escape(tenant.Other), Action: Quota, RUPerSecond: 7, Expires: t0.Add(time.Hour), Reason: "x"},
	}}
	quotas := p.Quotas(t0)
	for _, name := range []string{tenant.Other, tenant.Escape(tenant.Other)} {
		if got, want := p.For(tenant.Tags{Tenant: name}, t0), (Effect{Multiplier: 1, Throttled: true, RUPerSecond: 5}); got != want {
			t.Errorf("For(%q) = %+v, want %+v", name, got, want)
		}
		if l, ok := quotas(name, tenant.TierUnset); !ok || l.RUPerSecond != 7 {
			t.Errorf("quota of %q: %+v, %v; want 7 RU/s", name, l, ok)
		}
	}
}

// TestVersionString: a collector's own versions as they are; a shared
// policy's by its log's changes and the expiries since.
func TestVersionString(t *testing.T) {
	for v, want := range map[uint64]string{
		0: "0", 42: "42", SharedVersionBase - 1: "1099511627775",
		SharedVersionBase: "0 (shared)", SharedVersionBase + 5<<16: "5 (shared)", SharedVersionBase + 5<<16 + 2: "5+2 (shared)",
	} {
		if got := VersionString(v); got != want {
			t.Errorf("VersionString(%d) = %q, want %q", v, got, want)
		}
	}
}
