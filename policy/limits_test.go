package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

func TestNumbersCapped(t *testing.T) {
	exp := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		r    Rule
		want string // "" : valid
	}{
		{Rule{Tenant: "a", Action: Quota, RUPerSecond: 1e308, Expires: exp, Reason: "x"}, "ru_per_second 1e+308, at most 1e+09"},
		{Rule{Tenant: "a", Action: Quota, RUPerSecond: math.Inf(1), Expires: exp, Reason: "x"}, "finite"},
		{Rule{Tenant: "a", Action: Throttle, RUPerSecond: 2e9, Expires: exp, Reason: "x"}, "at most 1e+09"},
		{Rule{Tenant: "a", Action: Price, Multiplier: 101, Expires: exp, Reason: "x"}, "multiplier 101, at most 100"},
		{Rule{Tenant: "a", Action: Quota, RUPerSecond: 1e9, Expires: exp, Reason: "x"}, ""},
		{Rule{Tenant: "a", Action: Price, Multiplier: 100, Expires: exp, Reason: "x"}, ""},
	} {
		err := c.r.Validate()
		if c.want == "" && err != nil || c.want != "" && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%+v: %v, want %q", c.r, err, c.want)
		}
	}
}

func TestControlTextRefusedAndStripped(t *testing.T) {
	exp := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	evil := "import\x1b[2J\x1b[31mred\x1b]0;title\x07 done\x9b1m\x00\tend\xff"
	r := Rule{ID: "r1", Tenant: "a", Action: Throttle, RUPerSecond: 5, Expires: exp, Reason: evil}
	if err := r.Validate(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "reason") {
		t.Fatalf("ANSI reason: %v", err)
	}
	if got, want := StripControl(evil), "importred done end"; got != want {
		t.Fatalf("StripControl = %q, want %q", got, want)
	}
	for _, s := range []string{"plain", "naïve — ok", "日本"} {
		if StripControl(s) != s {
			t.Errorf("%q changed", s)
		}
	}
	p := Policy{Rules: []Rule{r}, Runaway: []Runaway{{ID: "x\x1b[1m", Reason: "ok", CreatedBy: "a\x1b]8;;http://e\x1b\\b"}},
		Freshness: &Freshness{Reason: "\x1bcreset"}}
	if n := p.Sanitize(); n != 4 || p.Rules[0].Reason != "importred done end" || p.Runaway[0].ID != "x" ||
		p.Runaway[0].CreatedBy != "ab" || p.Freshness.Reason != "reset" {
		t.Fatalf("Sanitize: %d, %+v %+v %+v", n, p.Rules[0], p.Runaway[0], p.Freshness)
	}
	b := Budget{ID: "b", Concurrency: 1, Reason: "\x1b[5mblink"}
	if err := b.Validate(); !errors.Is(err, ErrInvalid) {
		t.Fatalf("budget reason: %v", err)
	}
}

func TestBroadRunawayNeedsConfirmation(t *testing.T) {
	for _, c := range []struct {
		r  Runaway
		ok bool
	}{
		{Runaway{ID: "all", AfterSeconds: 1e-9, Action: Terminate, Reason: "x"}, false},
		{Runaway{ID: "all", AfterSeconds: 30, Action: Cancel, Reason: "x"}, false},
		{Runaway{ID: "all", AfterSeconds: 30, Action: Cancel, ConfirmBroad: true, Reason: "x"}, true},
		{Runaway{ID: "all", AfterSeconds: 1e-9, Action: Report, Reason: "x"}, true},
		{Runaway{ID: "tier", Match: []map[string]string{{"tier": "T3"}}, AfterSeconds: 0.5, Action: Cancel, Reason: "x"}, false},
		{Runaway{ID: "tier", Match: []map[string]string{{"tier": "T3"}}, AfterSeconds: 5, Action: Cancel, Reason: "x"}, true},
		{Runaway{ID: "one", Match: []map[string]string{{"tenant": "bigco"}}, AfterSeconds: 0.1, Action: Terminate, Reason: "x"}, true},
		{Runaway{ID: "mix", Match: []map[string]string{{"tenant": "bigco"}, {"application": "batch"}}, AfterSeconds: 0.1, Action: Cancel, Reason: "x"}, false},
	} {
		err := c.r.Validate()
		if c.ok != (err == nil) || err != nil && !strings.Contains(err.Error(), "confirm_broad") {
			t.Errorf("%+v: %v", c.r, err)
		}
	}
}

// An Enforce budget with no match may refuse every statement of every
// client: it needs confirm_broad, and the error says what to send. Warn
// and off budgets, and budgets with a match, need none.
func TestBroadBudgetNeedsConfirmation(t *testing.T) {
	one := []map[string]string{{"tenant": "bigco"}}
	for _, c := range []struct {
		b  Budget
		ok bool
	}{
		{Budget{ID: "all", Concurrency: 1, Mode: Enforce, Reason: "x"}, false},
		{Budget{ID: "all", Match: []map[string]string{}, Share: 1, Mode: Enforce, Reason: "x"}, false},
		{Budget{ID: "all", Each: "tenant", Concurrency: 4, Mode: Enforce, Reason: "x"}, false},
		{Budget{ID: "all", Concurrency: 1, Mode: Enforce, ConfirmBroad: true, Reason: "x"}, true},
		{Budget{ID: "all", Concurrency: 1, Reason: "x"}, true},
		{Budget{ID: "all", Concurrency: 1, Mode: Warn, Reason: "x"}, true},
		{Budget{ID: "all", Concurrency: 1, Mode: Off, Reason: "x"}, true},
		{Budget{ID: "one", Match: one, Concurrency: 1, Mode: Enforce, Reason: "x"}, true},
		{Budget{ID: "tier", Match: []map[string]string{{"tier": "T3"}}, Concurrency: 1, Mode: Enforce, Reason: "x"}, true},
	} {
		err := c.b.Validate()
		if c.ok != (err == nil) {
			t.Errorf("%+v: %v", c.b, err)
		}
		if want := `budget all would refuse statements of every tenant and every client (mode enforce, no match): send "confirm_broad":true to mean it`; err != nil &&
			(!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want)) {
			t.Errorf("%+v: %v, want %q", c.b, err, want)
		}
	}
	// As JSON, as the collector takes it.
	var b Budget
	if err := json.Unmarshal([]byte(`{"id":"all","match":[],"concurrency":1,"mode":"enforce","confirm_broad":true,"reason":"x"}`), &b); err != nil {
		t.Fatal(err)
	}
	if err := b.Validate(); err != nil || !b.ConfirmBroad {
		t.Fatalf("confirmed: %v", err)
	}
}

// The error for one budget or runaway rule too many says what to do.
func TestTooManyBudgetsSaysWhatToDo(t *testing.T) {
	var p Policy
	for i := range MaxBudgets + 1 {
		p.Budgets = append(p.Budgets, Budget{ID: fmt.Sprintf("b%d", i), Match: []map[string]string{{"tenant": "t"}},
			Concurrency: 1, Reason: "x"})
		p.Runaway = append(p.Runaway, Runaway{ID: fmt.Sprintf("r%d", i), Match: []map[string]string{{"tenant": "t"}},
			AfterSeconds: 30, Action: Report, Reason: "x"})
	}
	err := p.ValidateBudgets()
	if want := `257 budgets, at most 256: remove budgets or merge them`; err == nil || !errors.Is(err, ErrInvalid) ||
		!strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), `{"id":"…","delete":true} on /v1/policy/budgets`) {
		t.Fatalf("budgets: %v, want %q and how to delete one", err, want)
	}
	p.Budgets = p.Budgets[:MaxBudgets]
	err = p.ValidateBudgets()
	if want := `257 runaway rules, at most 256: remove runaway rules or merge them`; err == nil ||
		!strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), `{"id":"…","delete":true} on /v1/policy/runaway`) {
		t.Fatalf("runaway rules: %v, want %q and how to delete one", err, want)
	}
	p.Runaway = p.Runaway[:MaxRunaway]
	if err := p.ValidateBudgets(); err != nil {
		t.Fatalf("at the bounds: %v", err)
	}
}

// A policy saved under the older checks passes Validate after Upgrade,
// doing what it did.
func TestUpgrade(t *testing.T) {
	exp := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	p := Policy{
		Rules: []Rule{
			{ID: "q", Tenant: "a", Action: Quota, RUPerSecond: 1e308, Expires: exp, Reason: "big\x1b[31m"},
			{ID: "p", Tenant: "a", Action: Price, Multiplier: 1000, Expires: exp, Reason: "x"},
		},
		Runaway: []Runaway{{ID: "all", AfterSeconds: 30, Action: Cancel, Reason: "x"}},
		Budgets: []Budget{{ID: "all", Concurrency: 4, Mode: Enforce, Reason: "x"}},
	}
	if p.Validate() == nil {
		t.Fatal("the old policy passes Validate")
	}
	changes := p.Upgrade()
	if len(changes) != 5 || !p.Budgets[0].ConfirmBroad {
		t.Errorf("changes %q", changes)
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	if p.Rules[0].RUPerSecond != MaxRUPerSecond || p.Rules[1].Multiplier != MaxMultiplier || !p.Runaway[0].ConfirmBroad || p.Rules[0].Reason != "big" {
		t.Fatalf("%+v", p)
	}
	if again := p.Upgrade(); len(again) != 0 {
		t.Fatalf("a second Upgrade changed %q", again)
	}
}
