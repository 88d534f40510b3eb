package fairqueue

import (
	"context"
	"time"
)

// Limiter grants a tenant's popped work a slot beyond the queue's own
// concurrency caps, such as a lease that holds across worker processes
// (package lease). Acquire must not fail for an outage of its own (it
// falls back and says so); it returns false with a delay when the tenant
// is at its limit. Release gives back the slot of one finished job.
type Limiter interface {
	Acquire(ctx context.Context, tenant string) (ok bool, retry time.Duration)
	Release(tenant string)
}

// WithLimiter has the queue ask l for a slot before handing out each item
// (Pop, PopItem, PopWait) and release it in Done. An item whose tenant is
// refused goes back to the head of its tenant's queue, and the tenant is
// skipped until the retry delay passes: the job is delayed, never
// dropped, and other tenants are served meanwhile. Call Done for every
// item handed out.
func WithLimiter(l Limiter) Option { return func(c *config) { c.limiter = l } }

// admit asks the limiter for it's slot; when refused it puts it back at
// the head of its flow, held for the retry delay, and returns false.
func (q *Queue[T]) admit(ctx context.Context, it Item[T], now time.Time) bool {
	if q.cfg.limiter == nil {
		return true
	}
	ok, retry := q.cfg.limiter.Acquire(ctx, it.Tenant)
	q.mu.Lock()
	defer q.mu.Unlock()
	q.admitting--
	if ok {
		if q.admitting == 0 {
			q.notifyLocked() // PopWait may be waiting to report ErrClosed
		}
		return true
	}
	retry = max(retry, time.Millisecond)
	f := q.flowLocked(it.Tenant)
	if f.head > 0 {
		f.head--
		f.items[f.head] = it
	} else {
		f.items = append(f.items, Item[T]{})
		copy(f.items[1:], f.items)
		f.items[0] = it
	}
	q.pending++
	if f.inflight > 0 {
		f.inflight--
	}
	f.deficit += it.Cost
	f.hold = now.Add(retry)
	if !f.active {
		f.active = true
		q.active = append(q.active, f)
	}
	q.notifyLocked()
	return false
}

// nextHoldLocked returns how long until the earliest hold of a flow with
// work ends (0: none), so PopWait wakes for it.
func (q *Queue[T]) nextHoldLocked(now time.Time) time.Duration {
	if q.cfg.limiter == nil {
		return 0
	}
	var next time.Duration
	for _, f := range q.active {
		if d := f.hold.Sub(now); d > 0 && (next == 0 || d < next) {
			next = d
		}
	}
	return next
}
