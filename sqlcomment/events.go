package sqlcomment

import (
	"sync"
	"time"
)

// maxEvents is how many recent events a Budgets keeps.
const maxEvents = 256

// BudgetEvent is one budget violation or runaway action, as Events keeps
// it (the audit trail of the wrapper; the counters are in Stats).
type BudgetEvent struct {
	Time time.Time
	// Budget is the budget's id, or the runaway rule's.
	Budget string
	Key    string
	// Limit is the limit hit (0 for a runaway action).
	Limit Limit
	// Handled is "refused", "warned", "in_tx" or "refused_begin" for a
	// violation; "cancelled" or "reported" for a runaway action, "refused"
	// for a statement refused by a watch.
	Handled string
	// Runaway is the runaway rule's action ("" for a budget).
	Runaway    string
	Estimate   time.Duration
	RetryAfter time.Duration
	// Duration is how long a runaway statement ran.
	Duration time.Duration
	// Shape is the statement's Shape, where known.
	Shape uint64
}

// events is a ring of the last maxEvents events.
type events struct {
	mu  sync.Mutex
	buf [maxEvents]BudgetEvent
	n   uint64
}

func (r *events) add(e BudgetEvent) {
	r.mu.Lock()
	r.buf[r.n%maxEvents] = e
	r.n++
	r.mu.Unlock()
}

// Events returns the last violations and runaway actions (at most 256),
// oldest first.
func (b *Budgets) Events() []BudgetEvent {
	r := &b.ev
	r.mu.Lock()
	defer r.mu.Unlock()
	n := min(r.n, maxEvents)
	out := make([]BudgetEvent, 0, n)
	for i := r.n - n; i < r.n; i++ {
		out = append(out, r.buf[i%maxEvents])
	}
	return out
}

// RunawayEventsSince returns the runaway actions (a statement cancelled
// or reported by a runaway rule, or refused by its watch list) kept since
// seq, the value this method returned last (0 the first time), oldest
// first, and the seq to pass next. Events that the ring of 256 dropped
// before they were asked for are lost (the counters in Stats are not).
func (b *Budgets) RunawayEventsSince(seq uint64) ([]BudgetEvent, uint64) {
	r := &b.ev
	r.mu.Lock()
	defer r.mu.Unlock()
	from := seq
	if r.n > maxEvents && from < r.n-maxEvents {
		from = r.n - maxEvents
	}
	var out []BudgetEvent
	for i := from; i < r.n; i++ {
		if e := &r.buf[i%maxEvents]; e.Runaway != "" || e.Limit == LimitWatch {
			out = append(out, *e)
		}
	}
	return out, r.n
}

// note keeps e and logs it, at most once a second per budget (with the
// count of violations since the last line).
func (b *Budgets) note(bu *budget, e BudgetEvent) {
	b.ev.add(e)
	l := b.cfg.log
	if l == nil {
		return
	}
	ns := e.Time.UnixNano()
	last := bu.lastLog.Load()
	if ns-last < int64(time.Second) || !bu.lastLog.CompareAndSwap(last, ns) {
		return
	}
	total := bu.st.stats.violations()
	since := total - bu.logged.Swap(total)
	l.Warn("sqlcomment: over database budget", "budget", e.Budget, "key", e.Key, "limit", e.Limit.String(),
		"handled", e.Handled, "estimate", e.Estimate, "retry_after", e.RetryAfter, "violations_since_last_log", since)
}

func (s *budgetStats) violations() uint64 {
	var n uint64
	for i := range s.viol {
		for j := range s.viol[i] {
			n += s.viol[i][j].Load()
		}
	}
	return n
}
