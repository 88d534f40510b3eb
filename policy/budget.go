package policy

import (
	"fmt"
	"math"
	"time"
)

// Budget is a database budget that the driver wrapper (sqlcomment,
// pgxcomment) applies before a statement leaves the process: statements
// whose tags match spend database time from a bucket, and may run only so
// many at a time. It follows PlanetScale Traffic Control's model, on any
// PostgreSQL.
//
// As JSON:
//
//	{"id":"analytics","match":[{"tenant":"analytics"}],"concurrency":1,"mode":"enforce","reason":"reports hold back vacuum"}
type Budget struct {
	ID string `json:"id"`
	// Match lists alternatives (OR); each alternative is a set of tags that
	// must all be equal (AND). Keys are tenant, route, tier, application,
	// db_driver or any static tag of the wrapper (sqlcomment.WithTag).
	// An empty Match matches every statement, tagged or not.
	Match []map[string]string `json:"match,omitempty"`
	// Each, when set to a tag key (usually "tenant"), gives every distinct
	// value of that tag a bucket of its own; empty: one bucket shared by
	// every statement that matches.
	Each string `json:"each,omitempty"`
	// Share is database time per second, refilled continuously (0.5 = half
	// a session on average); 0: no share limit.
	Share float64 `json:"share,omitempty"`
	// CapacitySeconds is how much unused share may be banked for bursts;
	// 0 with a Share: one second's worth of share.
	CapacitySeconds float64 `json:"capacity_seconds,omitempty"`
	// MaxStatementSeconds refuses a statement whose estimated cost alone
	// exceeds it; 0: no cap.
	MaxStatementSeconds float64 `json:"max_statement_seconds,omitempty"`
	// Concurrency caps the statements in flight for a bucket, per process;
	// 0: no cap.
	Concurrency int `json:"concurrency,omitempty"`
	// ColdStartSeconds is the estimate of a statement whose shape has no
	// measured duration yet under this budget; 0: the wrapper's default
	// (sqlcomment.DefaultColdStart). Set it near the duration of the
	// statements a budget is for (long reports), so that the first ones
	// are estimated, and retried, as what they are.
	ColdStartSeconds float64 `json:"cold_start_seconds,omitempty"`
	// Mode is enforce, warn (the default when empty) or off.
	Mode BudgetMode `json:"mode,omitempty"`
	// Expires is optional for a budget: the zero time never expires.
	Expires time.Time `json:"expires,omitzero"`
	// ConfirmBroad must be set for an Enforce budget with no Match, which
	// may refuse every statement of every client.
	ConfirmBroad bool      `json:"confirm_broad,omitempty"`
	Reason       string    `json:"reason"`
	CreatedBy    string    `json:"created_by,omitempty"`
	Created      time.Time `json:"created,omitzero"`
}

// BudgetMode says what a budget does with a statement over one of its
// limits.
type BudgetMode string

// The budget modes.
const (
	// Enforce refuses the statement before it is sent.
	Enforce BudgetMode = "enforce"
	// Warn sends it, and counts and logs the violation (the default).
	Warn BudgetMode = "warn"
	// Off disables the budget without removing it.
	Off BudgetMode = "off"
)

// Bounds of a budget or runaway rule, so that a policy stays small and a
// statement's match stays cheap.
const (
	MaxBudgets      = 256
	MaxRunaway      = 256
	MaxAlternatives = 16
	MaxMatchKeys    = 8
	MaxTagLen       = 128
)

// Validate checks one budget.
func (b Budget) Validate() error {
	switch {
	case b.ID == "" || len(b.ID) > 128:
		return fmt.Errorf("%w: a budget needs an id of 1 to 128 bytes", ErrInvalid)
	case b.Reason == "":
		return fmt.Errorf("%w: reason is required", ErrInvalid)
	case len(b.Reason) > 1024:
		return fmt.Errorf("%w: reason longer than 1024 bytes", ErrInvalid)
	case len(b.Each) > MaxTagLen:
		return fmt.Errorf("%w: each: key longer than %d bytes", ErrInvalid, MaxTagLen)
	}
	if err := validateMatch(b.Match); err != nil {
		return err
	}
	switch b.Mode {
	case "", Enforce, Warn, Off:
	default:
		return fmt.Errorf("%w: mode %q (want %q, %q or %q)", ErrInvalid, b.Mode, Enforce, Warn, Off)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"share", b.Share}, {"capacity_seconds", b.CapacitySeconds}, {"max_statement_seconds", b.MaxStatementSeconds},
		{"cold_start_seconds", b.ColdStartSeconds}} {
		if f.v < 0 || math.IsNaN(f.v) || f.v > 1e6 {
			return fmt.Errorf("%w: %s must be a number from 0 to 1e6", ErrInvalid, f.name)
		}
	}
	if b.Concurrency < 0 || b.Concurrency > 1<<20 {
		return fmt.Errorf("%w: concurrency must be from 0 to %d", ErrInvalid, 1<<20)
	}
	if b.Share == 0 && b.CapacitySeconds > 0 {
		return fmt.Errorf("%w: capacity_seconds needs a share", ErrInvalid)
	}
	if b.Share == 0 && b.MaxStatementSeconds == 0 && b.Concurrency == 0 {
		return fmt.Errorf("%w: a budget needs at least one limit (share, max_statement_seconds, concurrency)", ErrInvalid)
	}
	if err := b.validateBroad(); err != nil {
		return err
	}
	return checkText("id", b.ID, "reason", b.Reason, "created_by", b.CreatedBy)
}

// ModeOrDefault returns the budget's mode, Warn when unset.
func (b Budget) ModeOrDefault() BudgetMode {
	if b.Mode == "" {
		return Warn
	}
	return b.Mode
}

func validateMatch(m []map[string]string) error {
	if len(m) > MaxAlternatives {
		return fmt.Errorf("%w: match: %d alternatives, at most %d", ErrInvalid, len(m), MaxAlternatives)
	}
	for i, alt := range m {
		if len(alt) == 0 || len(alt) > MaxMatchKeys {
			return fmt.Errorf("%w: match %d: 1 to %d tags", ErrInvalid, i, MaxMatchKeys)
		}
		for k, v := range alt {
			if k == "" || len(k) > MaxTagLen || len(v) > MaxTagLen || v == "" {
				return fmt.Errorf("%w: match %d: keys and values of 1 to %d bytes", ErrInvalid, i, MaxTagLen)
			}
		}
	}
	return nil
}

// RunawayAction is what a runaway rule does to a statement that runs too
// long.
type RunawayAction string

// The runaway actions.
const (
	// Cancel cancels the statement; the session stays.
	Cancel RunawayAction = "cancel"
	// Terminate ends the statement's session (in the sampler); in the
	// driver wrapper it cancels the statement, as a context deadline does.
	Terminate RunawayAction = "terminate"
	// Report only records it (shadow): audited and counted, not stopped.
	Report RunawayAction = "report"
)

// Runaway is a rule "statements matching Match running longer than
// AfterSeconds → Action", applied by the driver wrapper (through the
// statement's context deadline) and by the collector's pg_stat_activity
// sampler (for statements of any client). With CooldownSeconds, the
// statement's shape (its text without literals and comment) is then
// refused for that match for so long: a watch list with an expiry.
//
//	{"id":"long-reports","match":[{"tenant":"analytics"}],"after_seconds":30,"action":"cancel","cooldown_seconds":60,"reason":"…"}
type Runaway struct {
	ID              string              `json:"id"`
	Match           []map[string]string `json:"match,omitempty"`
	AfterSeconds    float64             `json:"after_seconds"`
	Action          RunawayAction       `json:"action"`
	CooldownSeconds float64             `json:"cooldown_seconds,omitempty"`
	Expires         time.Time           `json:"expires,omitzero"`
	// ConfirmBroad must be set for a rule that cancels or terminates
	// broadly: with no Match (every statement of every client) or an
	// AfterSeconds below MinBroadRunawaySeconds.
	ConfirmBroad bool      `json:"confirm_broad,omitempty"`
	Reason       string    `json:"reason"`
	CreatedBy    string    `json:"created_by,omitempty"`
	Created      time.Time `json:"created,omitzero"`
}

// Validate checks one runaway rule.
func (r Runaway) Validate() error {
	switch {
	case r.ID == "" || len(r.ID) > 128:
		return fmt.Errorf("%w: a runaway rule needs an id of 1 to 128 bytes", ErrInvalid)
	case r.Reason == "":
		return fmt.Errorf("%w: reason is required", ErrInvalid)
	case len(r.Reason) > 1024:
		return fmt.Errorf("%w: reason longer than 1024 bytes", ErrInvalid)
	case !(r.AfterSeconds > 0) || r.AfterSeconds > 1e6:
		return fmt.Errorf("%w: after_seconds must be from 0 (excluded) to 1e6", ErrInvalid)
	case r.CooldownSeconds < 0 || math.IsNaN(r.CooldownSeconds) || r.CooldownSeconds > 1e6:
		return fmt.Errorf("%w: cooldown_seconds must be from 0 to 1e6", ErrInvalid)
	}
	switch r.Action {
	case Cancel, Terminate, Report:
	default:
		return fmt.Errorf("%w: action %q (want %q, %q or %q)", ErrInvalid, r.Action, Cancel, Terminate, Report)
	}
	if err := r.validateBroad(); err != nil {
		return err
	}
	if err := checkText("id", r.ID, "reason", r.Reason, "created_by", r.CreatedBy); err != nil {
		return err
	}
	return validateMatch(r.Match)
}

// ValidateBudgets checks the budgets and runaway rules of p and their
// counts; Validate calls it.
func (p Policy) ValidateBudgets() error {
	if len(p.Budgets) > MaxBudgets {
		return fmt.Errorf(`%w: %d budgets, at most %d: remove budgets or merge them (one budget with "each":"tenant" `+
			`or several match alternatives instead of one per tenant); on the collector, delete one with `+
			`{"id":"…","delete":true} on /v1/policy/budgets`, ErrInvalid, len(p.Budgets), MaxBudgets)
	}
	if len(p.Runaway) > MaxRunaway {
		return fmt.Errorf(`%w: %d runaway rules, at most %d: remove runaway rules or merge them (several match `+
			`alternatives in one rule); on the collector, delete one with {"id":"…","delete":true} on /v1/policy/runaway`,
			ErrInvalid, len(p.Runaway), MaxRunaway)
	}
	ids := make(map[string]bool, len(p.Budgets))
	for i, b := range p.Budgets {
		if err := b.Validate(); err != nil {
			return fmt.Errorf("budget %d (%s): %w", i, b.ID, err)
		}
		if ids[b.ID] {
			return fmt.Errorf("%w: budget id %q twice", ErrInvalid, b.ID)
		}
		ids[b.ID] = true
	}
	clear(ids)
	for i, r := range p.Runaway {
		if err := r.Validate(); err != nil {
			return fmt.Errorf("runaway rule %d (%s): %w", i, r.ID, err)
		}
		if ids[r.ID] {
			return fmt.Errorf("%w: runaway rule id %q twice", ErrInvalid, r.ID)
		}
		ids[r.ID] = true
	}
	return nil
}

// ActiveBudgets returns the budgets and runaway rules of p that have not
// expired at now (a zero Expires never does).
func (p Policy) ActiveBudgets(now time.Time) ([]Budget, []Runaway) {
	var bs []Budget
	for _, b := range p.Budgets {
		if b.Expires.IsZero() || now.Before(b.Expires) {
			bs = append(bs, b)
		}
	}
	var rs []Runaway
	for _, r := range p.Runaway {
		if r.Expires.IsZero() || now.Before(r.Expires) {
			rs = append(rs, r)
		}
	}
	return bs, rs
}
