package fairqueue

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Queue holds work per tenant and hands it out by deficit round-robin
// weighted by plan, so a tenant that enqueues 2,000 jobs does not make a
// small tenant wait behind all of them.
//
// Starvation bound: a tenant i with pending work that is not at its
// concurrency cap is served within R = ⌈largest cost / (wᵢ × quantum)⌉
// rounds, that is after at most Σ over the other active tenants j of
// (R × wⱼ × quantum + largest cost) cost units of their work; with unit
// costs, one round: Σ wⱼ items.
//
// Per-tenant concurrency caps: a tenant with cap items popped and not yet
// Done is skipped until one is. Backpressure: a tenant with MaxPending
// items waiting makes its producers wait in Push (delay rather than
// reject). Time is an argument (PushAt); Push reads the clock once. Safe
// for concurrent use; make one with New.
type Queue[T any] struct {
	cfg config

	mu      sync.Mutex
	flows   map[string]*flow[T]
	active  []*flow[T] // round-robin order; the head is being served
	pending int
	changed chan struct{} // closed and replaced on every change
	closed  bool

	// admitting counts items popped and not yet granted or refused by
	// the Limiter (limiter.go): they are not pending, but not gone.
	admitting int
}

// Item is one unit of queued work.
type Item[T any] struct {
	Tenant   string
	Value    T
	Cost     float64
	Enqueued time.Time
}

type flow[T any] struct {
	name     string
	items    []Item[T]
	head     int
	deficit  float64
	inflight int
	active   bool
	hold     time.Time // a Limiter refused its head until then (limiter.go)
}

func (f *flow[T]) len() int { return len(f.items) - f.head }

type config struct {
	weight     func(tenant string) int
	cap        func(tenant string) int
	quantum    float64
	maxPending int
	limiter    Limiter // limiter.go
}

// Option configures New.
type Option func(*config)

// WithWeights sets each tenant's weight (default 1; values < 1 count as 1).
func WithWeights(f func(tenant string) int) Option { return func(c *config) { c.weight = f } }

// WithConcurrency sets each tenant's cap on work popped and not yet Done
// (≤ 0: no cap).
func WithConcurrency(f func(tenant string) int) Option { return func(c *config) { c.cap = f } }

// WithQuantum sets the cost credited per unit of weight each round
// (default 1, one unit-cost item per unit of weight).
func WithQuantum(q float64) Option { return func(c *config) { c.quantum = q } }

// WithMaxPending sets how many items one tenant may have waiting before
// Push delays its producer (default 1,000).
func WithMaxPending(n int) Option { return func(c *config) { c.maxPending = n } }

// New returns an empty fair queue.
func New[T any](opts ...Option) (*Queue[T], error) {
	c := config{quantum: 1, maxPending: 1000}
	for _, o := range opts {
		o(&c)
	}
	if !(c.quantum > 0) {
		return nil, fmt.Errorf("%w: quantum %v (want > 0)", ErrConfig, c.quantum)
	}
	if c.maxPending < 1 {
		return nil, fmt.Errorf("%w: max pending %d (want ≥ 1)", ErrConfig, c.maxPending)
	}
	return &Queue[T]{cfg: c, flows: make(map[string]*flow[T]), changed: make(chan struct{})}, nil
}

func (q *Queue[T]) notifyLocked() {
	close(q.changed)
	q.changed = make(chan struct{})
}

func (q *Queue[T]) flowLocked(t string) *flow[T] {
	f := q.flows[t]
	if f == nil {
		f = &flow[T]{name: t}
		q.flows[t] = f
	}
	return f
}

func (q *Queue[T]) weight(t string) float64 {
	w := 1
	if q.cfg.weight != nil {
		w = max(q.cfg.weight(t), 1)
	}
	return float64(w) * q.cfg.quantum
}

func (q *Queue[T]) capOf(t string) int {
	if q.cfg.cap == nil {
		return 0
	}
	return q.cfg.cap(t)
}

// Push queues item for tenant at unit cost, enqueued now (it reads the
// clock once); see PushAt.
func (q *Queue[T]) Push(ctx context.Context, tenant string, item T) error {
	return q.PushAt(ctx, time.Now(), tenant, item, 1)
}

// PushAt queues item for tenant, stamped as enqueued at now, with a cost
// (its RU estimate, > 0) that the deficit round-robin charges against the
// tenant's share. While the tenant has MaxPending items queued it waits;
// it gives up when ctx ends (its error) or the queue is closed
// (ErrClosed).
func (q *Queue[T]) PushAt(ctx context.Context, now time.Time, tenant string, item T, cost float64) error {
	if !(cost > 0) {
		return fmt.Errorf("%w: item cost %v (want > 0)", ErrConfig, cost)
	}
	q.mu.Lock()
	for {
		if q.closed {
			q.mu.Unlock()
			return ErrClosed
		}
		f := q.flowLocked(tenant)
		if f.len() < q.cfg.maxPending {
			if f.head > 0 && f.head*2 >= len(f.items) {
				n := copy(f.items, f.items[f.head:])
				clear(f.items[n:])
				f.items, f.head = f.items[:n], 0
			}
			f.items = append(f.items, Item[T]{Tenant: tenant, Value: item, Cost: cost, Enqueued: now})
			q.pending++
			if !f.active {
				f.active = true
				f.deficit = 0
				q.active = append(q.active, f)
			}
			q.notifyLocked()
			q.mu.Unlock()
			return nil
		}
		ch := q.changed
		q.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		q.mu.Lock()
	}
}

// Pop returns the next item by weighted deficit round-robin, or false
// when nothing can be popped (empty, or every tenant with work at its
// concurrency cap). It does not wait; see PopWait.
func (q *Queue[T]) Pop() (T, bool) {
	it, ok := q.PopItem()
	return it.Value, ok
}

// PopItem is Pop that also returns the item's tenant, cost and enqueue
// time. Call Done(item.Tenant) when the work ends if concurrency caps are
// set.
func (q *Queue[T]) PopItem() (Item[T], bool) { return q.PopItemAt(time.Now()) }

// PopItemAt is PopItem at now, the time a Limiter's holds (WithLimiter)
// are compared with.
func (q *Queue[T]) PopItemAt(now time.Time) (Item[T], bool) {
	for {
		q.mu.Lock()
		it, ok := q.popLocked(now)
		q.mu.Unlock()
		if !ok || q.admit(context.Background(), it, now) {
			return it, ok
		}
	}
}

func (q *Queue[T]) popLocked(now time.Time) (Item[T], bool) {
	var zero Item[T]
	// Each visit to a flow either serves it or credits it one quantum and
	// moves on, so the loop ends: a flow whose deficit is short gets
	// enough after a bounded number of rounds. skipped counts flows that
	// cannot be served (at their cap) in a row.
	skipped := 0
	for len(q.active) > 0 && skipped < len(q.active) {
		f := q.active[0]
		if c := q.capOf(f.name); (c > 0 && f.inflight >= c) || f.hold.After(now) {
			q.rotateLocked()
			skipped++
			continue
		}
		it := f.items[f.head]
		if f.deficit < it.Cost {
			f.deficit += q.weight(f.name)
			if f.deficit < it.Cost {
				q.rotateLocked()
				skipped = 0
				continue
			}
		}
		f.deficit -= it.Cost
		var zeroItem Item[T]
		f.items[f.head] = zeroItem
		f.head++
		q.pending--
		f.inflight++
		if f.len() == 0 {
			f.items, f.head = f.items[:0], 0
			f.active = false
			f.deficit = 0
			q.active[0] = nil
			q.active = q.active[1:]
			if f.inflight == 0 {
				delete(q.flows, f.name)
			}
		} else if f.deficit < f.items[f.head].Cost {
			q.rotateLocked()
		}
		if q.cfg.limiter != nil {
			q.admitting++
		}
		q.notifyLocked()
		return it, true
	}
	return zero, false
}

func (q *Queue[T]) rotateLocked() {
	f := q.active[0]
	copy(q.active, q.active[1:])
	q.active[len(q.active)-1] = f
}

// PopWait waits until an item can be popped, ctx ends (its error) or the
// queue is closed and drained (ErrClosed).
func (q *Queue[T]) PopWait(ctx context.Context) (Item[T], error) {
	for {
		q.mu.Lock()
		now := time.Now()
		it, ok := q.popLocked(now)
		if ok {
			q.mu.Unlock()
			if q.admit(ctx, it, now) {
				return it, nil
			}
			continue
		}
		if q.closed && q.pending == 0 && q.admitting == 0 {
			q.mu.Unlock()
			return it, ErrClosed
		}
		ch := q.changed
		wake := q.nextHoldLocked(now)
		var err error
		q.mu.Unlock()
		var timer *time.Timer
		var fired <-chan time.Time
		if wake > 0 {
			timer = time.NewTimer(wake)
			fired = timer.C
		}
		select {
		case <-ch:
		case <-fired:
		case <-ctx.Done():
			err = ctx.Err()
		}
		if timer != nil {
			timer.Stop()
		}
		if err != nil {
			return it, err
		}
	}
}

// Done releases one unit of tenant's concurrency after popped work ends.
// A Done without work of tenant in flight (called twice for one item)
// does nothing: it must not give back the Limiter's slot of another job.
func (q *Queue[T]) Done(tenant string) {
	q.mu.Lock()
	f := q.flows[tenant]
	if f == nil || f.inflight == 0 {
		q.mu.Unlock()
		return
	}
	f.inflight--
	if f.inflight == 0 && f.len() == 0 {
		delete(q.flows, tenant)
	}
	q.notifyLocked()
	q.mu.Unlock()
	if q.cfg.limiter != nil {
		q.cfg.limiter.Release(tenant)
	}
}

// Len returns the items queued; PendingOf those of one tenant.
func (q *Queue[T]) Len() int { q.mu.Lock(); defer q.mu.Unlock(); return q.pending }

// PendingOf returns the items tenant has queued.
func (q *Queue[T]) PendingOf(tenant string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	if f := q.flows[tenant]; f != nil {
		return f.len()
	}
	return 0
}

// Close stops new pushes (ErrClosed) and wakes waiting producers; items
// already queued can still be popped.
func (q *Queue[T]) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.notifyLocked()
}
