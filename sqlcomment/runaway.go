package sqlcomment

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/qtop-dev/qtop/policy"
)

// maxWatch bounds the runaway watch list.
const maxWatch = 4096

// rule is a compiled policy.Runaway.
type rule struct {
	id       string
	alts     []alt
	after    time.Duration
	action   policy.RunawayAction
	cooldown time.Duration
	expires  int64 // unix ns; 0: never
	stats    *ruleStats
}

// ruleStats are a runaway rule's counters, kept across policy updates.
type ruleStats struct {
	cancelled atomic.Uint64 // statements stopped by the rule's deadline
	reported  atomic.Uint64 // statements that ran past it under a report rule
	refused   atomic.Uint64 // statements refused by the watch list
	watched   atomic.Uint64 // would have been refused (report rules)
}

type watchKey struct {
	rule  string
	shape uint64
}

// watched returns the refusal of a statement of shape h matched by r when
// the shape is on r's watch list at ns; a report rule only counts it.
func (b *Budgets) watched(r *rule, h uint64, ns int64) error {
	b.mu.Lock()
	exp, ok := b.watch[watchKey{r.id, h}]
	if ok && exp <= ns {
		delete(b.watch, watchKey{r.id, h})
		b.nwatch.Store(int32(len(b.watch)))
		ok = false
	}
	b.mu.Unlock()
	if !ok {
		return nil
	}
	if r.action == policy.Report {
		r.stats.watched.Add(1)
		return nil
	}
	r.stats.refused.Add(1)
	e := &BudgetError{Budget: r.id, Limit: LimitWatch, RetryAfter: time.Duration(exp - ns)}
	b.ev.add(BudgetEvent{Time: time.Unix(0, ns), Budget: r.id, Limit: LimitWatch, Handled: "refused",
		RetryAfter: e.RetryAfter, Shape: h, Runaway: string(r.action)})
	return e
}

// runaway acts on a statement of shape h matched by r that ran for d (and
// was cancelled by r's deadline, when cancelled): counted, audited in
// Events, logged, and put on the watch list for r's cool-down.
func (b *Budgets) runaway(r *rule, h uint64, ns int64, d time.Duration, cancelled bool) {
	what := "reported"
	if cancelled && r.action != policy.Report {
		what = "cancelled"
		r.stats.cancelled.Add(1)
	} else {
		r.stats.reported.Add(1)
	}
	if r.cooldown > 0 {
		b.mu.Lock()
		k := watchKey{r.id, h}
		if _, ok := b.watch[k]; !ok && len(b.watch) >= maxWatch {
			var soon watchKey
			first := true
			for wk, exp := range b.watch {
				if first || exp < b.watch[soon] {
					soon, first = wk, false
				}
			}
			delete(b.watch, soon)
		}
		b.watch[k] = ns + int64(r.cooldown)
		b.nwatch.Store(int32(len(b.watch)))
		b.mu.Unlock()
	}
	e := BudgetEvent{Time: time.Unix(0, ns), Budget: r.id, Handled: what, Duration: d, Shape: h,
		Runaway: string(r.action)}
	b.ev.add(e)
	if l := b.cfg.log; l != nil {
		l.Warn("sqlcomment: runaway statement", "rule", r.id, "action", string(r.action), "done", what,
			"duration", d, "shape", h, "cooldown", r.cooldown)
	}
}

// ErrRunaway is the error of a statement that a runaway rule's deadline
// ended (Action cancel or terminate): the error is a *RunawayError, which
// names the rule.
var ErrRunaway = errors.New("sqlcomment: cancelled by a runaway rule")

// RunawayError is the error of a statement that a runaway rule's deadline
// ended: the driver's error, with the rule that set the deadline.
// errors.Is(err, ErrRunaway) and errors.Is(err, context.DeadlineExceeded)
// hold, and errors.Is and errors.As reach the driver's error.
type RunawayError struct {
	// Rule is the id of the runaway rule.
	Rule string
	// After is the rule's after_seconds: the deadline the statement ran under.
	After time.Duration
	// Err is the driver's error (context.DeadlineExceeded for the context's
	// own cause).
	Err error
}

// Error says which rule cancelled the statement, and the driver's error.
func (e *RunawayError) Error() string {
	return fmt.Sprintf("sqlcomment: cancelled by runaway rule %q after %v: %v", e.Rule, e.After, e.Err)
}

// Unwrap returns the driver's error.
func (e *RunawayError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrRunaway) and errors.Is(err,
// context.DeadlineExceeded) true, whatever error the driver returned.
func (e *RunawayError) Is(target error) bool {
	return target == ErrRunaway || target == context.DeadlineExceeded
}

// Context returns the context to send the statement of t under: with the
// deadline of the runaway rule that matched it (Runaway), whose
// context.Cause is a *RunawayError when it expires, and its cancel func;
// parent and a nil cancel func when the statement has no runaway deadline.
// Pass the statement's errors through RunawayErr with the returned
// context.
func (t *Ticket) Context(parent context.Context) (context.Context, context.CancelFunc) {
	d := t.Runaway()
	if d <= 0 {
		return parent, nil
	}
	return context.WithTimeoutCause(parent, d, &RunawayError{Rule: t.rule.id, After: d, Err: context.DeadlineExceeded})
}

// RunawayErr returns err as a *RunawayError that names the rule when ctx
// (from Ticket.Context) ended because the rule's deadline expired, and err
// as it is otherwise: nil, or a statement ended by the caller's own
// deadline or cancel, which came first.
func RunawayErr(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil {
		return err
	}
	var cause *RunawayError
	if !errors.As(context.Cause(ctx), &cause) || errors.Is(err, ErrRunaway) {
		return err
	}
	return &RunawayError{Rule: cause.Rule, After: cause.After, Err: err}
}

// runawayCancelled reports whether ctx (from Ticket.Context) ended because
// its runaway rule's deadline expired.
func runawayCancelled(ctx context.Context) bool { return errors.Is(context.Cause(ctx), ErrRunaway) }
