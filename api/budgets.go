package api

import "github.com/qtop-dev/qtop/tenant"

// BudgetRow is one database budget or runaway rule of the policy (or one
// that processes still report), with what it did over the snapshot's
// window, summed over the reporting processes and the collector's
// sampler.
type BudgetRow struct {
	// ID is the rule's id as its counters name it (BudgetName): a rule
	// really named "other" is other#d9298a10d1b07358; "other" is the row
	// of the ids beyond the live view's bound.
	ID string `json:"id"`
	// Runaway marks a runaway rule; Mode is then its action (cancel,
	// terminate, report), else the budget's mode (enforce, warn, off).
	Runaway bool   `json:"runaway,omitempty"`
	Mode    string `json:"mode,omitempty"`
	Enforce bool   `json:"enforce,omitempty"`
	// Budgets: statements admitted, and violations refused, warned or
	// inside a transaction (sent).
	Admitted uint64 `json:"admitted,omitempty"`
	Refused  uint64 `json:"refused,omitempty"`
	Warned   uint64 `json:"warned,omitempty"`
	InTx     uint64 `json:"in_tx,omitempty"`
	// Runaway rules: statements cancelled (by the wrapper's deadline or
	// the sampler), terminated (sampler), reported only, and refused by
	// the watch list (wrapper) or cancelled at sight while watched
	// (sampler).
	Cancelled    uint64 `json:"cancelled,omitempty"`
	Terminated   uint64 `json:"terminated,omitempty"`
	Reported     uint64 `json:"reported,omitempty"`
	WatchRefused uint64 `json:"watch_refused,omitempty"`
}

// Add adds the counters of o to r.
func (r *BudgetRow) Add(o *BudgetRow) {
	r.Admitted += o.Admitted
	r.Refused += o.Refused
	r.Warned += o.Warned
	r.InTx += o.InTx
	r.Cancelled += o.Cancelled
	r.Terminated += o.Terminated
	r.Reported += o.Reported
	r.WatchRefused += o.WatchRefused
}

// BudgetName is the name the counters of database budget or runaway rule
// id go by, in a snapshot's Budgets and the collector's metrics: id
// itself, except that a rule really named like the overflow row
// ("other", which sums the ids the policy does not have) is its stand-in
// (tenant.EscapeValue, other#d9298a10d1b07358), as a tenant or a route of
// that name is, so that its counters are never summed with those. The
// policy, the audit and qtop's list of rules keep the id as given.
func BudgetName(id string) string { return tenant.EscapeValue(id) }
