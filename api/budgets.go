package api

// BudgetRow is one database budget or runaway rule of the policy (or one
// that processes still report), with what it did over the snapshot's
// window, summed over the reporting processes and the collector's
// sampler.
type BudgetRow struct {
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
