package api

import (
	"fmt"

	"github.com/qtop-dev/qtop/policy"
)

// AppliedBy counts the processes reporting to the collector that could
// apply its policy: OTLP services (whose spans the collector receives;
// they apply nothing), agents (qtop's reporter inside a service) and
// gates. A budget or rule with no agent and no gate to apply it only
// describes: Note says so where the policy is shown.
type AppliedBy struct {
	OTLPServices int `json:"otlp_services"`
	Agents       int `json:"agents"`
	Gates        int `json:"gates"`
	// Budgets counts the processes that apply database budgets: agents
	// whose database wrapper has them (agent.WithBudgets; each says so in
	// its reports at least every 30 s). Gates and gateways apply none.
	Budgets int `json:"database_budgets"`
	// RateLimitService: a gateway (Envoy, Istio, …) asked the collector's
	// rate-limit service lately, so throttles, prices and quotas are
	// applied there (database budgets are not).
	RateLimitService bool `json:"rate_limit_service,omitempty"`
}

// Applies reports whether some process applies the policy.
func (a AppliedBy) Applies() bool { return a.Agents > 0 || a.Gates > 0 || a.RateLimitService }

// Note is "no process applies this (N OTLP services, 0 agents, 0 gates)"
// when no agent or gate reports and no gateway asks the rate-limit
// service, else "".
func (a AppliedBy) Note() string {
	if a.Applies() {
		return ""
	}
	return fmt.Sprintf("no process applies this (%d OTLP services, %d agents, %d gates)", a.OTLPServices, a.Agents, a.Gates)
}

// BudgetNote is "no process applies the database budgets (N agents, none
// with budgets)" when p has budgets and no process applies them, else "".
// Note, when it says something, says it of budgets too.
func (a AppliedBy) BudgetNote(p policy.Policy) string {
	if len(p.Budgets) == 0 || a.Budgets > 0 || !a.Applies() {
		return ""
	}
	return fmt.Sprintf("no process applies the database budgets (%d agents, none with budgets: agent.WithBudgets)", a.Agents)
}

// PolicyNote is the note of a policy shown with a: Note, else BudgetNote.
func (a AppliedBy) PolicyNote(p policy.Policy) string {
	if n := a.Note(); n != "" {
		return n
	}
	return a.BudgetNote(p)
}

// Unapplied is a tenant rule that no process applies to the tenant's load
// as it is now: the tenant's database sessions (DBLoad, sampled from
// PostgreSQL) come with no request that an agent or gate reports, so the
// limit slows nothing (a batch job or a script that connects to the
// database itself, say). Its Note says so where the rule is shown.
type Unapplied struct {
	Rule   string  `json:"rule"`
	Tenant string  `json:"tenant"`
	DBLoad float64 `json:"db_load"`
}

// Note is what is shown beside the rule.
func (u Unapplied) Note() string {
	return fmt.Sprintf("no process applies rule %s to %s: its database sessions (%.2f DB) come with no request an agent or gate reports, "+
		"so the limit slows none of them (find them in the Statements view)", u.Rule, u.Tenant, u.DBLoad)
}

// PolicyStatus is the answer of GET /v1/policy: the policy (its fields at
// the top level, as before) with who applies it and, when nobody does
// (or nobody applies its database budgets), the note.
type PolicyStatus struct {
	policy.Policy
	AppliedBy AppliedBy `json:"applied_by"`
	Note      string    `json:"note,omitempty"`
	// Unapplied are the tenant rules in force that no process applies to
	// their tenant's load as it is now.
	Unapplied []Unapplied `json:"unapplied,omitempty"`
}
