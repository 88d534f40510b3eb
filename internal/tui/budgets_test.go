package tui

import (
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/teatest"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/policy"
)

// budgetIncident is the incident with database budgets and a runaway
// rule in the policy, and what they did in the window.
func budgetIncident() api.Snapshot {
	s := incident()
	s.Policy.Budgets = []policy.Budget{
		{ID: "analytics", Match: []map[string]string{{"tenant": "analytics"}}, Concurrency: 1, Mode: policy.Enforce, Reason: "vacuum"},
		{ID: "per-tenant", Each: "tenant", Share: 0.5, CapacitySeconds: 2, MaxStatementSeconds: 5, Reason: "fair share"},
	}
	s.Policy.Runaway = []policy.Runaway{{ID: "long", Match: []map[string]string{{"tenant": "analytics", "route": "report"}, {"tier": "T3"}},
		AfterSeconds: 30, Action: policy.Cancel, CooldownSeconds: 60, Reason: "runaway reports"}}
	s.Budgets = []api.BudgetRow{
		{ID: "analytics", Mode: "enforce", Enforce: true, Admitted: 12, Refused: 304},
		{ID: "per-tenant", Mode: "warn", Admitted: 98000},
		{ID: "long", Runaway: true, Mode: "cancel", Cancelled: 2, WatchRefused: 5},
		{ID: "old", Admitted: 3},
	}
	return s
}

// TestGoldenBudgets: the Enforcement view's section of database budgets
// and runaway rules (refresh with -update, as TestGolden).
func TestGoldenBudgets(t *testing.T) {
	src := newFake(Features{Throttle: true})
	defer src.Close()
	m := New(src, WithRenderer(asciiRenderer()), WithClock(func() time.Time { return t0 }), WithLocation(time.UTC))
	m.Update(tea.WindowSizeMsg{Width: 140, Height: 24})
	m.Update(snapshotMsg{budgetIncident()})
	m.Update(keyOf("5"))
	screen := m.View()
	for _, want := range []string{"Database budgets — 2 budgets, 1 runaway rules", "tenant=analytics", "conc 1",
		"refused 304", "share 0.5/2s, stmt 5s", "each tenant", "after 30s, watch 1m", "route=report tenant=ana", "cancelled 2", "(not in policy)"} {
		if !strings.Contains(screen, want) {
			t.Errorf("screen lacks %q:\n%s", want, screen)
		}
	}
	teatest.RequireEqualOutput(t, []byte(screen+"\n"))
}

// TestBudgetsSectionAbsent: without budgets the view is as before.
func TestBudgetsSectionAbsent(t *testing.T) {
	c := &common{width: 100}
	if l := budgetLines(c, policy.Policy{}, nil); l != nil {
		t.Fatalf("lines without budgets: %q", l)
	}
}

// TestBudgetsNoProcessApplies: with agents reporting and none applying
// database budgets, the Enforcement view says so; with one that does,
// nothing is said.
func TestBudgetsNoProcessApplies(t *testing.T) {
	src := newFake(Features{Throttle: true})
	defer src.Close()
	m := New(src, WithRenderer(asciiRenderer()), WithClock(func() time.Time { return t0 }), WithLocation(time.UTC))
	m.Update(tea.WindowSizeMsg{Width: 160, Height: 30})
	s := budgetIncident()
	s.AppliedBy = &api.AppliedBy{Agents: 3}
	m.Update(snapshotMsg{s})
	m.Update(keyOf("5"))
	const note = "no process applies the database budgets (3 agents, none with budgets"
	if screen := m.View(); !strings.Contains(screen, note) {
		t.Errorf("screen lacks the note:\n%s", screen)
	}
	s.AppliedBy = &api.AppliedBy{Agents: 3, Budgets: 1}
	m.Update(snapshotMsg{s})
	if screen := m.View(); strings.Contains(screen, "no process applies") {
		t.Errorf("a note with an agent applying budgets:\n%s", screen)
	}
}

// TestBudgetsNamedOther: a budget and a runaway rule really named "other"
// are listed by their id with the counters of their stand-in
// (api.BudgetName); the row "other" (ids not in the policy) is listed
// apart, as not in the policy.
func TestBudgetsNamedOther(t *testing.T) {
	c := &common{width: 140, st: newStyles(asciiRenderer())}
	pol := policy.Policy{Budgets: []policy.Budget{{ID: "other", Concurrency: 1, Reason: "r"}},
		Runaway: []policy.Runaway{{ID: "other", AfterSeconds: 30, Action: policy.Report, Reason: "r"}}}
	own := api.BudgetName("other")
	rows := []api.BudgetRow{{ID: own, Mode: "warn", Admitted: 7}, {ID: own, Runaway: true, Mode: "report", Reported: 2},
		{ID: "other", Admitted: 5}, {ID: "other", Runaway: true, Reported: 3}}
	lines := budgetLines(c, pol, rows)
	var rule, ruleRunaway, notIn []string
	for _, l := range lines {
		switch {
		case strings.Contains(l, "(not in policy)"):
			notIn = append(notIn, l)
		case strings.Contains(l, "concurrency") || strings.Contains(l, "conc 1"):
			rule = append(rule, l)
		case strings.Contains(l, "after 30s"):
			ruleRunaway = append(ruleRunaway, l)
		}
	}
	if len(rule) != 1 || !strings.Contains(rule[0], "sent 7 ") {
		t.Errorf("budget other: %q, want its own 7 statements", rule)
	}
	if len(ruleRunaway) != 1 || !strings.Contains(ruleRunaway[0], "reported 2 ") {
		t.Errorf("runaway rule other: %q, want its own 2 reports", ruleRunaway)
	}
	if len(notIn) != 2 || !strings.Contains(strings.Join(notIn, "\n"), "sent 5 ") || !strings.Contains(strings.Join(notIn, "\n"), "reported 3 ") {
		t.Errorf("ids not in the policy: %q, want the budgets' 5 and the rules' 3", notIn)
	}
}
