package tui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
)

// TestTabsFitEveryWidth: views 7–9 have their tabs like 1–6, and at any
// width from 60 columns the tab bar fits with every tab's key in it and
// the tab shown named whole; the other tabs give way, their whole names
// at 105 columns and more (107 without colour, where the tab shown is in
// brackets), at least three letters of them at 80.
func TestTabsFitEveryWidth(t *testing.T) {
	m, _ := newTestModel(t, Features{Throttle: true})
	names := []string{"Tenants", "Hot keys", "Statements", "Latency", "Enforcement", "Locks", "Freshness", "Victims", "Top SQL"}
	if m.nav.tabs != len(names) {
		t.Fatalf("%d tabs, want %d", m.nav.tabs, len(names))
	}
	for w := 60; w <= 140; w++ {
		m.Update(tea.WindowSizeMsg{Width: w, Height: 24})
		for i, name := range names {
			press(m, fmt.Sprint(i+1))
			if m.nav.cur.name() != name {
				t.Fatalf("key %d shows %s, want %s", i+1, m.nav.cur.name(), name)
			}
			bar := strings.Split(m.View(), "\n")[1]
			if ansi.StringWidth(bar) > w {
				t.Fatalf("%d columns, tab %d: the bar is %d wide: %q", w, i+1, ansi.StringWidth(bar), bar)
			}
			if !strings.Contains(bar, "["+fmt.Sprint(i+1)+" ") {
				t.Fatalf("%d columns, tab %d: not marked in %q", w, i+1, bar)
			}
			labels := tabLabels(bar)
			if len(labels) != len(names) {
				t.Fatalf("%d columns, tab %d: %d tabs in %q", w, i+1, len(labels), bar)
			}
			for j, l := range labels {
				key, label, _ := strings.Cut(l, " ")
				switch {
				case key != fmt.Sprint(j+1):
					t.Fatalf("%d columns, tab %d: tab %d is %q in %q", w, i+1, j+1, l, bar)
				case j == i && label != name:
					t.Fatalf("%d columns: the tab shown is %q in %q, want %q", w, l, bar, name)
				case w >= 105+2 && label != names[j]: // 2: the brackets of the tab shown, without colour
					t.Fatalf("%d columns: tab %q cut in %q", w, l, bar)
				case w >= 80 && len([]rune(label)) < 3:
					t.Fatalf("%d columns, tab %d: tab %q without its name in %q", w, i+1, l, bar)
				}
			}
		}
	}
}

// tabLabels splits a tab bar ("1 Tenants 2 Keys …") into its labels.
func tabLabels(bar string) []string {
	var out []string
	// Without colour (the tests' ASCII renderer) the active tab is in
	// brackets.
	bar = strings.NewReplacer("[", "", "]", "").Replace(bar)
	for _, f := range strings.Fields(bar) {
		if len(f) == 1 && f[0] >= '1' && f[0] <= '9' {
			out = append(out, f)
		} else if len(out) > 0 {
			out[len(out)-1] += " " + f
		}
	}
	return out
}

// TestVictimsTabDrillsIn: Victims is a tab: enter drills into the victim
// selected, and esc comes back to it.
func TestVictimsTabDrillsIn(t *testing.T) {
	src := newFake(Features{Throttle: true})
	m := New(src, WithRenderer(asciiRenderer()), WithLocation(time.UTC))
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 30})
	m.Update(snapshotMsg{withBaselines(incident())})
	press(m, "8", "enter")
	if m.nav.cur.name() != "Tenant" {
		t.Fatalf("enter on a victim: view %s", m.nav.cur.name())
	}
	mustContain(t, m.View(), "Tenant globex")
	press(m, "esc")
	if m.nav.cur.name() != "Victims" {
		t.Fatalf("esc went to view %s", m.nav.cur.name())
	}
	// t there would throttle the victim selected: it says so instead.
	press(m, "t")
	if m.state == statePrompt {
		t.Fatalf("t on a victim opened the throttle prompt: %+v", m.prompt)
	}
	mustContain(t, m.View(), "globex is a victim, not an offender")
}

// TestLiftRule: x on a policy rule in the Enforcement view asks, then
// posts the rule again expiring now (before, x there spoke of the
// autopilot's rules and a throttle had to be lifted with curl).
func TestLiftRule(t *testing.T) {
	src := newFake(Features{Throttle: true})
	m := New(src, WithRenderer(asciiRenderer()), WithLocation(time.UTC), WithClock(func() time.Time { return t0 }))
	m.Update(tea.WindowSizeMsg{Width: 140, Height: 40})
	m.Update(snapshotMsg{incident()})
	press(m, "5", "x")
	if m.state != statePrompt || m.prompt.kind != promptLift || m.prompt.lifted.ID != "a1b2c3d4e5f6" {
		t.Fatalf("x on the first rule: state %v, prompt %+v", m.state, m.prompt)
	}
	mustContain(t, m.View(), "Lift rule a1b2c3d4e5f6 (throttle on globex)")
	runCmd(t, m, press(m, "y"))
	src.mu.Lock()
	defer src.mu.Unlock()
	if len(src.throttles) != 1 || src.throttles[0].ID != "a1b2c3d4e5f6" || !src.throttles[0].Expires.Equal(t0.Add(time.Second)) {
		t.Fatalf("posted %+v, want the rule again, expiring a second from now", src.throttles)
	}
}
