package sqlcomment

import (
	"errors"
	"fmt"
	"time"
)

// ErrBudget is the error of a statement that a budget in Enforce mode, or a
// runaway rule's cool-down, refused before it was sent. The error is a
// *BudgetError, which says which budget, which limit and when to retry:
//
//	var be *sqlcomment.BudgetError
//	if errors.As(err, &be) { w.Header().Set("Retry-After", …be.RetryAfter…) }
var ErrBudget = errors.New("sqlcomment: over database budget")

// Limit names the limit of a budget that a statement hit.
type Limit uint8

// The limits.
const (
	LimitShare       Limit = iota + 1 // the bucket of database time is spent
	LimitStatement                    // the statement's estimate alone exceeds the per-statement cap
	LimitConcurrency                  // as many statements as allowed are in flight
	LimitWatch                        // the shape is on a runaway rule's watch list
)

var limitNames = [...]string{"", "share", "statement", "concurrency", "watch"}

// String returns "share", "statement", "concurrency" or "watch".
func (l Limit) String() string {
	if int(l) < len(limitNames) && l != 0 {
		return limitNames[l]
	}
	return "unknown"
}

// BudgetError is a refused statement: errors.Is(err, ErrBudget) holds.
type BudgetError struct {
	// Budget is the id of the budget (or of the runaway rule, for
	// LimitWatch) that refused the statement.
	Budget string
	// Key is the value of the budget's Each tag ("" for a shared budget).
	Key   string
	Limit Limit
	// RetryAfter is when the statement would likely be admitted: for the
	// share, when the bucket holds its estimate again; for concurrency,
	// the estimate of a statement in flight; for a watch, the cool-down
	// left. 0 for LimitStatement: the same statement will be refused
	// again.
	RetryAfter time.Duration
	// Estimate is the statement's estimated database time.
	Estimate time.Duration
}

// Error says which budget refused the statement and what to do: retry
// after RetryAfter, or, for LimitStatement, not at all (the same statement
// is refused again until the budget's max_statement_seconds is raised).
func (e *BudgetError) Error() string {
	key := ""
	if e.Key != "" {
		key = fmt.Sprintf(" (%s)", e.Key)
	}
	switch e.Limit {
	case LimitStatement:
		return fmt.Sprintf("sqlcomment: over database budget %q%s: statement limit, estimate %v exceeds its max_statement_seconds; "+
			"retrying will not help: raise the limit or make the statement cheaper", e.Budget, key, e.Estimate)
	case LimitWatch:
		return fmt.Sprintf("sqlcomment: runaway rule %q refuses statements of this shape for its cool-down (one ran too long); retry after %v",
			e.Budget, e.RetryAfter)
	}
	return fmt.Sprintf("sqlcomment: over database budget %q%s: %s limit, estimate %v, retry after %v",
		e.Budget, key, e.Limit, e.Estimate, e.RetryAfter)
}

// Is makes errors.Is(err, ErrBudget) true.
func (e *BudgetError) Is(target error) bool { return target == ErrBudget }
