package enforce

import "time"

// OverloadedAt reports whether the queue says the process is overloaded
// at now: CoDel is in its dropping state, or a queue has stood (waiters
// and no moment without any) for longer than the CoDel interval.
func (q *Queue) OverloadedAt(now time.Time) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.codel.Dropping() || (q.nwait > 0 && now.Sub(q.lastEmpty) > q.intv)
}

// Overloaded is OverloadedAt on the queue's clock.
func (q *Queue) Overloaded() bool { return q.OverloadedAt(q.now()) }
