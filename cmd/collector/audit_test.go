package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/autopilot"
	"github.com/qtop-dev/qtop/policy"
)

// TestPrintAuditRows: the audit table reads each kind of row as what it
// is — a quota rule with its RU/s, an autopilot decision with its limit,
// rule and why, the autopilot's rules — never as an empty rule of year 1.
func TestPrintAuditRows(t *testing.T) {
	at := time.Date(2026, 12, 4, 4, 14, 37, 0, time.UTC)
	js := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	rule := policy.Rule{ID: "q1", Tenant: "bigcorp", Action: policy.Quota, RUPerSecond: 30, Expires: at.Add(time.Hour), Reason: "import"}
	d := autopilot.Decision{Time: at, Rule: "noisy-neighbour", Tenant: "bigcorp", Kind: autopilot.KindApply, Action: policy.AutopilotQuota,
		Limit: 101, Why: "37 victims", PolicyRule: &policy.Rule{Expires: at.Add(15 * time.Minute)}}
	rows := []api.AuditRow{
		{Time: at, Who: "qtop/ops", Action: "add", PolicyVersion: 5, Rule: js(rule)},
		{Time: at, Who: "autopilot/noisy-neighbour", Action: "autopilot-apply", PolicyVersion: 6, Rule: js(d)},
		{Time: at, Who: "qtop/ops", Action: "autopilot-resume", PolicyVersion: 7, Rule: js(policy.Autopilot{Rules: []policy.AutopilotRule{{Name: "noisy-neighbour"}}})},
	}
	var out bytes.Buffer
	if err := printAudit(&out, rows); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"quota 30 RU/s", "quota 101 RU/s (rule noisy-neighbour)", "37 victims", "2026-12-04T04:29:37Z", "1 rules"} {
		if !strings.Contains(s, want) {
			t.Errorf("table lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "0001-01-01") {
		t.Errorf("a zero time in the table:\n%s", s)
	}
}

// TestPrintAuditPolicyLists: budgets, runaway rules, freshness rules,
// runaway actions and pg signals are read as what they are, not as a
// throttle rule without a tenant ("tier " and nothing).
func TestPrintAuditPolicyLists(t *testing.T) {
	at := time.Date(2026, 12, 4, 4, 14, 37, 0, time.UTC)
	js := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	rows := []api.AuditRow{
		{Time: at, Who: "admin@10.0.0.1", Action: "budget-set", PolicyVersion: 1, Rule: js(policy.Budget{ID: "analytics",
			Match: []map[string]string{{"tenant": "analytics"}}, Concurrency: 1, Mode: policy.Enforce, Reason: "vacuum"})},
		{Time: at, Who: "admin@10.0.0.1", Action: "runaway-rule-delete", PolicyVersion: 2, Rule: js(policy.Runaway{ID: "long-reports",
			AfterSeconds: 120, Action: policy.Cancel, Expires: at.Add(time.Hour), Reason: "runaway reports"})},
		{Time: at, Who: "admin@10.0.0.1", Action: "freshness", PolicyVersion: 3, Rule: js(policy.Freshness{
			Rules: policy.MonzoRules(), Batch: 1, Reason: "payday"})},
		{Time: at, Who: "sampler", Action: "runaway-cancelled", PolicyVersion: 3, Rule: json.RawMessage(
			`{"rule":"long-reports","action":"cancel","done":"cancelled","pid":4242,"duration_ns":121000000000,"tenant":"analytics","query":"SELECT 1"}`)},
		{Time: at, Who: "admin@10.0.0.1", Action: "pg-terminate", PolicyVersion: 3, Rule: js(api.PGSignal{Action: "terminate", PID: 4343, Actor: "ops"})},
		{Time: at, Who: "wrapper:reports/i1", Action: "runaway-reported", PolicyVersion: 3, Rule: js(api.RunawayAudit{Rule: "slow",
			Done: "reported", Duration: 2 * time.Second, Shape: 7, Host: "h1"})},
	}
	var out bytes.Buffer
	if err := printAudit(&out, rows); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"budget analytics", "enforce, conc 1", "vacuum",
		"runaway long-reports", "cancel after 2m", "2026-12-04T05:14:37Z", "runaway reports",
		"freshness", "batch 1 of 3 rules", "payday",
		"analytics", "cancelled pid 4242 after 2m1s (rule long-reports)",
		"pid 4343", "terminate", "for ops", "reported after 2s (rule slow)"} {
		if !strings.Contains(s, want) {
			t.Errorf("table lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "tier ") {
		t.Errorf("a list's row read as a tier rule:\n%s", s)
	}
}

// TestAuditBudgetReadsAsTUI: collector audit says a budget's and a
// runaway rule's limits in the words of qtop's Enforcement view (the
// policy's Limits), not in words of its own: a budget's capacity is
// shown, seconds read "2m", not "120s".
func TestAuditBudgetReadsAsTUI(t *testing.T) {
	at := time.Date(2026, 12, 4, 4, 14, 37, 0, time.UTC)
	js := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	rows := []api.AuditRow{
		{Time: at, Who: "admin@10.0.0.1", Action: "budget-set", PolicyVersion: 1, Rule: js(policy.Budget{ID: "per-tenant", Each: "tenant",
			Share: 0.5, CapacitySeconds: 2, MaxStatementSeconds: 5, Concurrency: 4, Reason: "fair"})},
		{Time: at, Who: "admin@10.0.0.1", Action: "runaway-rule-set", PolicyVersion: 2, Rule: js(policy.Runaway{ID: "long",
			AfterSeconds: 120, CooldownSeconds: 60, Action: policy.Cancel, Reason: "runaway reports"})},
	}
	var out bytes.Buffer
	if err := printAudit(&out, rows); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"warn, share 0.5/2s, stmt 5s, conc 4, each tenant", "cancel after 2m, watch 1m"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q (the Enforcement view's words):\n%s", want, out.String())
		}
	}
}
