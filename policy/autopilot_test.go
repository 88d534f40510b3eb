package policy

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestAutopilotValidate(t *testing.T) {
	ok := AutopilotRule{Name: "import", VictimsMin: 3}
	if err := (&Autopilot{Allow: []string{"trust-safety"}, Rules: []AutopilotRule{ok}}).Validate(); err != nil {
		t.Fatal(err)
	}
	var none *Autopilot
	if err := none.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		r    AutopilotRule
		want string
	}{
		{AutopilotRule{VictimsMin: 3}, "name"},
		{AutopilotRule{Name: "a b", VictimsMin: 3}, "letters, digits"},
		{AutopilotRule{Name: "x"}, "condition on victims"},
		{AutopilotRule{Name: "x", VictimsMin: 3, Mode: "on"}, "mode"},
		{AutopilotRule{Name: "x", VictimsMin: 3, Resource: "cpu"}, "resource"},
		{AutopilotRule{Name: "x", VictimsMin: 3, Action: "kill"}, "action"},
		{AutopilotRule{Name: "x", VictimsMin: -1}, "victims_min"},
		{AutopilotRule{Name: "x", VictimsMin: 3, VictimP95Factor: 1.2}, "victim_p95_factor"},
		{AutopilotRule{Name: "x", VictimsMin: 3, VictimP95Factor: 2, RecoverP95Factor: 3}, "recover_p95_factor"},
		{AutopilotRule{Name: "x", RatioBelow: 1.5}, "ratio_below"},
		{AutopilotRule{Name: "x", RatioBelow: 0.7, RatioRecover: 0.5}, "ratio_recover"},
		{AutopilotRule{Name: "x", VictimsMin: 3, MinShare: 2}, "min_share"},
		{AutopilotRule{Name: "x", VictimsMin: 3, MinFactor: math.NaN()}, "min_factor"},
		{AutopilotRule{Name: "x", VictimsMin: 3, Factor: math.Inf(1)}, "factor"},
		{AutopilotRule{Name: "x", VictimsMin: 3, Multiplier: 1000}, "multiplier"},
		{AutopilotRule{Name: "x", VictimsMin: 3, ForSeconds: 2 * MaxAutopilotSeconds}, "for_seconds"},
		{AutopilotRule{Name: "x", VictimsMin: 3, IntervalSeconds: 0.5}, "interval_seconds"},
		{AutopilotRule{Name: "x", VictimsMin: 3, ForSeconds: 10, HoldSeconds: 20}, "hold_seconds"},
		{AutopilotRule{Name: "x", VictimsMin: 3, RelaxSteps: 11}, "relax_steps"},
		{AutopilotRule{Name: "x", VictimsMin: 3, RelaxFactor: 1}, "relax_factor"},
		{AutopilotRule{Name: "x", VictimsMin: 3, LiftFactor: 0.5}, "lift_factor"},
		{AutopilotRule{Name: "x", VictimsMin: 3, Concurrency: 2}, "concurrency"},
	} {
		err := c.r.Validate()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v (want %q)", c.r, err, c.want)
		}
	}
	many := &Autopilot{Rules: make([]AutopilotRule, MaxAutopilotRules+1)}
	if err := many.Validate(); !errors.Is(err, ErrInvalid) {
		t.Fatal(err)
	}
	if err := (&Autopilot{Rules: []AutopilotRule{ok, ok}}).Validate(); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatal(err)
	}
	if err := (&Autopilot{Allow: []string{"(untagged)"}}).Validate(); !errors.Is(err, ErrInvalid) {
		t.Fatal(err)
	}
	if err := (Policy{Autopilot: &Autopilot{Rules: []AutopilotRule{{Name: "x"}}}}).Validate(); !errors.Is(err, ErrInvalid) {
		t.Fatal(err)
	}
}

// TestAutopilotDefaults: every rule starts in shadow, on RU, with a
// quota; the hysteresis band and the ratio margin follow the factors.
func TestAutopilotDefaults(t *testing.T) {
	d := AutopilotRule{Name: "x", VictimsMin: 3, RatioBelow: 0.6}.Defaults()
	if !d.Shadow() || d.Resource != ResourceRU || d.Action != AutopilotQuota || d.VictimP95Factor != 2 || d.RecoverP95Factor != 1.5 ||
		d.RatioRecover != 0.7 || d.For().Minutes() != 15 || d.Interval().Seconds() != 30 || d.Hold().Seconds() != 30 || d.RelaxSteps != 2 {
		t.Fatalf("%+v", d)
	}
	var p Policy
	if err := json.Unmarshal([]byte(`{"version":1,"rules":[],"autopilot":{"paused":true,"allow":["a"],"rules":[{"name":"r","ratio_below":0.5,"mode":"enforce"}]}}`), &p); err != nil {
		t.Fatal(err)
	}
	if err := p.Validate(); err != nil || !p.Autopilot.Paused || p.Autopilot.Rules[0].Shadow() {
		t.Fatalf("%v %+v", err, p.Autopilot)
	}
	_, b, err := p.ViewFor([]string{"a"}, "", time.Unix(0, 0), DefaultMaxViewBytes)
	if err != nil || strings.Contains(string(b), "autopilot") {
		t.Fatalf("a process's view holds the autopilot: %v %s", err, b)
	}
}

func TestAutopilotSanitize(t *testing.T) {
	p := Policy{Autopilot: &Autopilot{Allow: []string{"a\x1b[31m"}, Rules: []AutopilotRule{{Name: "r\x1b]8;;x\x1b\\"}}}}
	if n := p.Sanitize(); n != 2 || p.Autopilot.Allow[0] != "a" || p.Autopilot.Rules[0].Name != "r" {
		t.Fatalf("%d %+v", n, p.Autopilot)
	}
}
