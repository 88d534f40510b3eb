package policy

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseCause(t *testing.T) {
	for in, want := range map[string]Cause{
		"push-notification": CausePush, "PUSH-NOTIFICATION": CausePush, " App-Open ": CauseAppOpen,
		"generic-reload": CauseReload, "interactive": CauseInteractive, "": CauseInteractive,
		"push": CauseInteractive, "reload": CauseInteractive, strings.Repeat("a", 100): CauseInteractive,
		"push-notification\x00": CauseInteractive,
	} {
		if got := ParseCause(in); got != want {
			t.Errorf("ParseCause(%q) = %q, want %q", in, got, want)
		}
	}
	if CauseInteractive.Sheddable() || Cause("bogus").Sheddable() || !CausePush.Sheddable() {
		t.Error("Sheddable")
	}
}

func TestFreshnessValidate(t *testing.T) {
	ok := Freshness{Rules: MonzoRules(), Batch: 2}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := ok.Armed(); len(got) != 2 || got[1].ID != "app-open-1h" {
		t.Errorf("Armed = %+v", got)
	}
	bad := func(mut func(f *Freshness)) Freshness {
		f := Freshness{Rules: MonzoRules(), Batch: 3}
		mut(&f)
		return f
	}
	for name, f := range map[string]Freshness{
		"interactive cause": bad(func(f *Freshness) { f.Rules[0].Cause = CauseInteractive }),
		"unknown cause":     bad(func(f *Freshness) { f.Rules[0].Cause = "push" }),
		"no bound":          bad(func(f *Freshness) { f.Rules[2].MaxAppAgeSeconds = 0 }),
		"negative bound":    bad(func(f *Freshness) { f.Rules[0].MaxAgeSeconds = -1 }),
		"duplicate id":      bad(func(f *Freshness) { f.Rules[1].ID = f.Rules[0].ID }),
		"empty id":          bad(func(f *Freshness) { f.Rules[1].ID = "" }),
		"batch too big":     bad(func(f *Freshness) { f.Batch = 4 }),
		"negative batch":    bad(func(f *Freshness) { f.Batch = -1 }),
		"force for ever":    bad(func(f *Freshness) { f.Force = true }),
		"too many rules": bad(func(f *Freshness) {
			for i := range MaxFreshnessRules {
				f.Rules = append(f.Rules, FreshnessRule{ID: strings.Repeat("x", i+1), Cause: CausePush, MaxAgeSeconds: 1})
			}
		}),
	} {
		if err := f.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
		p := Policy{Freshness: &f}
		if err := p.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: policy: %v", name, err)
		}
	}
}

func TestFreshnessForcedAndJSON(t *testing.T) {
	now := time.Unix(1000, 0).UTC()
	f := &Freshness{Rules: MonzoRules(), Batch: 1, Force: true, ForceUntil: now.Add(time.Minute)}
	if !f.Forced(now) || f.Forced(now.Add(time.Minute)) || (*Freshness)(nil).Forced(now) {
		t.Error("Forced")
	}
	b, err := json.Marshal(Policy{Version: 3, Freshness: f})
	if err != nil {
		t.Fatal(err)
	}
	var back Policy
	if err := json.Unmarshal(b, &back); err != nil || back.Freshness == nil || back.Freshness.Rules[2].MaxAppAgeSeconds != 10 || !back.Freshness.ForceUntil.Equal(f.ForceUntil) {
		t.Fatalf("round trip: %s → %+v %v", b, back.Freshness, err)
	}
	// A policy without freshness keeps its old encoding.
	if b, _ := json.Marshal(Policy{Version: 1}); strings.Contains(string(b), "freshness") {
		t.Errorf("empty freshness encoded: %s", b)
	}
}
