package api

import "time"

// RunawayAudit is the Rule of an audit row (AuditRow) whose action is
// "runaway-" and what was done (cancelled, terminated, reported, refused,
// gone, failed): a runaway rule acted on one statement. The collector's
// pg_stat_activity sampler (Who "sampler") records the backend, its tags
// and its query; a process's driver wrapper (Who
// "wrapper:SERVICE/INSTANCE") the statement's shape and its host. The
// collector writes it and collector audit reads it through this one type.
type RunawayAudit struct {
	Rule string `json:"rule"`
	// Action is the rule's action (cancel, terminate, report); the
	// sampler's rows only.
	Action string `json:"action,omitempty"`
	// Done is what came of it, as in the row's action.
	Done     string        `json:"done"`
	Duration time.Duration `json:"duration_ns"`
	// The sampler's: the backend and the statement it ran.
	PID        int32     `json:"pid,omitempty"`
	QueryStart time.Time `json:"query_start,omitzero"`
	Tenant     string    `json:"tenant,omitempty"`
	Route      string    `json:"route,omitempty"`
	Query      string    `json:"query,omitempty"`
	// Watched: the statement's shape was on the rule's watch list.
	Watched bool `json:"watched,omitempty"`
	// The wrapper's: the statement's shape (a hash of its text without
	// literals and comment) and the process's host.
	Shape uint64 `json:"shape,omitempty"`
	Host  string `json:"host,omitempty"`
}
