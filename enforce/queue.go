package enforce

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/qtop-dev/qtop/tenant"
)

// Queue admits queued work into a fixed number of slots (work in flight)
// with CoDel: a waiter whose queueing delay stays above target is failed
// early with ErrQueueDelay instead of waiting for a slot it would get too
// late. Waiters are served by tier, T0 first, FIFO within a tier, and T0
// is never dropped: it only leaves when its own context ends.
//
// Two mechanisms fail work early, after "Fail at Scale" (Maurer, 2015):
// the RFC 8289 control law on each item handed a slot, and an adaptive
// wait limit: a waiter gives up after Interval when the queue has been
// empty in the last Interval, and after Target when it has not (a standing
// queue). Safe for concurrent use; make one with Enforcer.NewQueue.
type Queue struct {
	slots  int
	target time.Duration
	intv   time.Duration
	now    func() time.Time
	shadow bool
	onDrop func(tier tenant.Tier, shadow bool)

	mu        sync.Mutex
	codel     *CoDel
	inflight  int
	waiting   [tenant.NumTiers][]*waiter
	nwait     int
	lastEmpty time.Time
	closed    bool
}

type waiter struct {
	tier    tenant.Tier
	enq     time.Time
	ready   chan error // buffered 1: nil = slot granted
	done    bool       // settled (granted, dropped or left), under q.mu
	dropped bool       // shadow-dropped once already
}

type queueConfig struct {
	target, interval time.Duration
	now              func() time.Time
	shadow           bool
	onDrop           func(tenant.Tier, bool)
}

// QueueOption configures Enforcer.NewQueue.
type QueueOption func(*queueConfig)

// WithCoDel sets the target and interval (defaults 5 ms and 100 ms).
func WithCoDel(target, interval time.Duration) QueueOption {
	return func(c *queueConfig) { c.target, c.interval = target, interval }
}

// WithQueueClock sets the clock (default time.Now).
func WithQueueClock(now func() time.Time) QueueOption { return func(c *queueConfig) { c.now = now } }

// withQueueShadow runs the queue in shadow mode: drops are decided and
// reported to the drop hook but the waiter keeps waiting for its slot.
func withQueueShadow(on bool) QueueOption { return func(c *queueConfig) { c.shadow = on } }

// withDropHook sets a function called (under no lock of the caller's) for
// every drop, real or shadow, for counting.
func withDropHook(f func(tier tenant.Tier, shadow bool)) QueueOption {
	return func(c *queueConfig) { c.onDrop = f }
}

// newQueue returns a queue with slots places for work in flight.
func newQueue(slots int, opts ...QueueOption) (*Queue, error) {
	c := queueConfig{target: 5 * time.Millisecond, interval: 100 * time.Millisecond, now: time.Now}
	for _, o := range opts {
		o(&c)
	}
	if slots < 1 {
		return nil, fmt.Errorf("%w: queue slots %d (want ≥ 1)", ErrConfig, slots)
	}
	if c.target <= 0 || c.interval < c.target {
		return nil, fmt.Errorf("%w: codel target %v, interval %v (want 0 < target ≤ interval)", ErrConfig, c.target, c.interval)
	}
	q := &Queue{slots: slots, target: c.target, intv: c.interval, now: c.now, shadow: c.shadow,
		onDrop: c.onDrop, codel: NewCoDel(c.target, c.interval)}
	q.lastEmpty = q.now()
	return q, nil
}

// InFlight returns the work holding a slot; Waiting the work queued.
func (q *Queue) InFlight() int { q.mu.Lock(); defer q.mu.Unlock(); return q.inflight }

// Waiting returns the number of waiters.
func (q *Queue) Waiting() int { q.mu.Lock(); defer q.mu.Unlock(); return q.nwait }

// Acquire waits for a slot for work of the given tier (unset counts as
// T3). It returns a release function to call exactly once when the work
// is done, or ErrQueueDelay (dropped by CoDel), the context's error, or
// ErrClosed.
func (q *Queue) Acquire(ctx context.Context, tier tenant.Tier) (release func(), err error) {
	if err := q.WaitAt(ctx, q.now(), tier); err != nil {
		return nil, err
	}
	return q.releaser(), nil
}

// WaitAt is Acquire at now, for a caller that reads the clock once per
// request: it returns once a slot is taken (nil), and the caller must
// then call Release exactly once. It allocates nothing when a slot is
// free.
func (q *Queue) WaitAt(ctx context.Context, now time.Time, tier tenant.Tier) error {
	if !tier.Valid() {
		tier = tenant.T3
	}
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return ErrClosed
	}
	if q.inflight < q.slots && q.nwait == 0 {
		q.inflight++
		q.lastEmpty = now
		q.mu.Unlock()
		return nil
	}
	w := &waiter{tier: tier, enq: now, ready: make(chan error, 1)}
	i := tier.Index()
	q.waiting[i] = append(q.waiting[i], w)
	q.nwait++
	// Adaptive wait limit: short when a queue has been standing.
	limit := q.intv
	if now.Sub(q.lastEmpty) > q.intv {
		limit = q.target
	}
	q.mu.Unlock()

	var timeout <-chan time.Time
	if tier != tenant.T0 && !q.shadow {
		t := time.NewTimer(limit)
		defer t.Stop()
		timeout = t.C
	}
	for {
		select {
		case err := <-w.ready:
			return err
		case <-ctx.Done():
			if q.leave(w) {
				return ctx.Err()
			}
		case <-timeout:
			timeout = nil
			if q.leave(w) {
				q.report(tier, false)
				return fmt.Errorf("%w: waited %v for a slot", ErrQueueDelay, limit)
			}
		}
		// Settled meanwhile: the answer is in ready.
	}
}

// leave removes w from the queue; false when it was already settled.
func (q *Queue) leave(w *waiter) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if w.done {
		return false
	}
	w.done = true
	list := q.waiting[w.tier.Index()]
	for i, x := range list {
		if x == w {
			copy(list[i:], list[i+1:])
			list[len(list)-1] = nil
			q.waiting[w.tier.Index()] = list[:len(list)-1]
			break
		}
	}
	q.nwait--
	if q.nwait == 0 {
		q.lastEmpty = q.now()
	}
	return true
}

func (q *Queue) report(tier tenant.Tier, shadow bool) {
	if q.onDrop != nil {
		q.onDrop(tier, shadow)
	}
}

// Release frees the slot of a successful WaitAt.
func (q *Queue) Release() { q.release() }

func (q *Queue) releaser() func() {
	var once sync.Once
	return func() { once.Do(q.release) }
}

// release frees a slot and hands it to the next waiter CoDel keeps.
func (q *Queue) release() {
	type drop struct {
		w      *waiter
		tier   tenant.Tier
		shadow bool
		err    error
	}
	var drops []drop
	q.mu.Lock()
	q.inflight--
	for q.inflight < q.slots && q.nwait > 0 {
		w := q.popLocked()
		now := q.now()
		if q.nwait == 0 {
			q.lastEmpty = now
		}
		if w.tier != tenant.T0 && q.codel.DropAt(now, now.Sub(w.enq), q.nwait == 0) {
			if !q.shadow {
				w.done = true
				drops = append(drops, drop{w, w.tier, false,
					fmt.Errorf("%w: queued %v, above the %v target for over %v", ErrQueueDelay, now.Sub(w.enq), q.target, q.intv)})
				continue
			}
			if !w.dropped {
				w.dropped = true
				drops = append(drops, drop{nil, w.tier, true, nil})
			}
		} else if w.tier == tenant.T0 {
			// T0 keeps CoDel's view of the delay up to date without drops.
			q.codel.okToDrop(now.UnixNano(), int64(now.Sub(w.enq)), q.nwait == 0)
		}
		w.done = true
		q.inflight++
		w.ready <- nil
	}
	if q.nwait == 0 && q.inflight < q.slots {
		q.lastEmpty = q.now()
	}
	q.mu.Unlock()
	// Count first, then tell the waiter, so a caller that sees the error
	// also sees the count.
	for _, d := range drops {
		q.report(d.tier, d.shadow)
		if d.w != nil {
			d.w.ready <- d.err
		}
	}
}

func (q *Queue) popLocked() *waiter {
	for i := range q.waiting {
		if l := q.waiting[i]; len(l) > 0 {
			w := l[0]
			l[0] = nil
			q.waiting[i] = l[1:]
			q.nwait--
			return w
		}
	}
	return nil
}

// Close fails every waiter and later Acquire calls with ErrClosed. Work
// in flight finishes normally.
func (q *Queue) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	for i := range q.waiting {
		for _, w := range q.waiting[i] {
			w.done = true
			w.ready <- ErrClosed
		}
		q.waiting[i] = nil
	}
	q.nwait = 0
}
