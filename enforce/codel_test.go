package enforce

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/qtop-dev/qtop/tenant"
)

func TestCoDelSteps(t *testing.T) {
	c := NewCoDel(0, 0) // 5 ms, 100 ms
	ms := time.Millisecond
	steps := []struct {
		at       time.Duration
		sojourn  time.Duration
		empty    bool
		drop     bool
		dropping bool
	}{
		{0, 2 * ms, false, false, false},       // below target
		{10 * ms, 8 * ms, false, false, false}, // above: first_above = 110 ms
		{50 * ms, 9 * ms, false, false, false},
		{109 * ms, 9 * ms, false, false, false},
		{110 * ms, 9 * ms, false, true, true},  // above for an interval: drop, count 1, next 210
		{150 * ms, 9 * ms, false, false, true}, // before drop_next
		{210 * ms, 9 * ms, false, true, true},  // count 2, next 210+70.7
		{280 * ms, 9 * ms, false, false, true},
		{281 * ms, 9 * ms, false, true, true},   // count 3, next 281+57.7
		{300 * ms, 3 * ms, false, false, false}, // below target: leave dropping
		{310 * ms, 9 * ms, false, false, false}, // first_above = 410
		{410 * ms, 9 * ms, false, true, true},   // re-enter within 16 intervals: count = delta (3-1=2)
		{420 * ms, 9 * ms, true, false, false},  // queue empty: never drop
	}
	for i, s := range steps {
		if got := c.DropAt(at(s.at), s.sojourn, s.empty); got != s.drop || c.Dropping() != s.dropping {
			t.Errorf("step %d at %v: drop %v dropping %v, want %v %v", i, s.at, got, c.Dropping(), s.drop, s.dropping)
		}
	}
	if c.count != 2 {
		t.Errorf("count after re-entry = %d, want 2", c.count)
	}
}

type manualClock struct{ n atomic.Int64 }

func (m *manualClock) now() time.Time          { return at(time.Duration(m.n.Load())) }
func (m *manualClock) advance(d time.Duration) { m.n.Add(int64(d)) }

// The queue tests run in a synctest bubble: a waiter is queued once
// synctest.Wait returns, and the wait limit's timer runs on fake time.

func TestQueueT0NeverDropped(t *testing.T) { synctest.Test(t, testQueueT0NeverDropped) }

func testQueueT0NeverDropped(t *testing.T) {
	clk := &manualClock{}
	var drops [tenant.NumTiers]atomic.Int64
	q, err := newQueue(1, WithQueueClock(clk.now), WithCoDel(5*time.Millisecond, 100*time.Millisecond),
		withDropHook(func(tier tenant.Tier, shadow bool) { drops[tier.Index()].Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rel, err := q.Acquire(ctx, tenant.T2)
	if err != nil {
		t.Fatal(err)
	}
	// Queue a T3, a T1 and a T0, in that order; T0 waits without a timer.
	type res struct {
		tier tenant.Tier
		rel  func()
		err  error
	}
	out := make(chan res, 3)
	start := func(tier tenant.Tier) {
		go func() {
			ctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			r, err := q.Acquire(ctx, tier)
			out <- res{tier, r, err}
		}()
		synctest.Wait()
		if !waitingHas(q, tier) {
			t.Fatal("waiter not queued")
		}
	}
	start(tenant.T0)
	// The standing queue makes CoDel drop once the delay has been above
	// target for an interval: advance the clock past it.
	clk.advance(200 * time.Millisecond)
	rel()
	r := <-out
	if r.tier != tenant.T0 || r.err != nil {
		t.Fatalf("first served %+v, want T0", r)
	}
	r.rel()
	r.rel() // a second release is ignored
	if q.InFlight() != 0 {
		t.Errorf("in flight %d", q.InFlight())
	}
	if drops[0].Load() != 0 {
		t.Error("T0 dropped")
	}
	q.Close()
	if _, err := q.Acquire(ctx, tenant.T1); !errors.Is(err, ErrClosed) {
		t.Errorf("after close: %v", err)
	}
}

func waitingHas(q *Queue, tier tenant.Tier) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.waiting[tier.Index()]) > 0
}

func TestQueueCoDelDropsLowTiersKeepsT0(t *testing.T) {
	synctest.Test(t, testQueueCoDelDropsLowTiersKeepsT0)
}

func testQueueCoDelDropsLowTiersKeepsT0(t *testing.T) {
	clk := &manualClock{}
	var dropped atomic.Int64
	q, _ := newQueue(1, WithQueueClock(clk.now), withDropHook(func(tenant.Tier, bool) { dropped.Add(1) }))
	// Hold the slot; queue T3 waiters under T0 ones, with contexts long
	// enough that only CoDel or the wait limit can fail them.
	hold, _ := q.Acquire(context.Background(), tenant.T1)
	var wg sync.WaitGroup
	var t0ok, t3err atomic.Int64
	for i := 0; i < 4; i++ {
		for _, tier := range []tenant.Tier{tenant.T0, tenant.T3} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rel, err := q.Acquire(context.Background(), tier)
				if err != nil {
					if tier == tenant.T0 || !errors.Is(err, ErrQueueDelay) {
						t.Errorf("%v: %v", tier, err)
					}
					t3err.Add(1)
					return
				}
				if tier == tenant.T0 {
					t0ok.Add(1)
				}
				clk.advance(50 * time.Millisecond)
				rel()
			}()
		}
	}
	synctest.Wait()
	if n := q.Waiting(); n != 8 || t3err.Load() != 0 {
		t.Fatalf("%d waiting, %d failed before the slot was freed; want 8 and 0", n, t3err.Load())
	}
	clk.advance(time.Second)
	hold()
	wg.Wait()
	if t0ok.Load() != 4 {
		t.Errorf("T0 served %d of 4", t0ok.Load())
	}
	// On fake time the outcome is exact: CoDel drops one T3 waiter.
	if t3err.Load() != 1 {
		t.Errorf("%d T3 waiters failed early under a standing queue, want 1", t3err.Load())
	}
	if dropped.Load() != t3err.Load() {
		t.Errorf("drop hook %d, errors %d", dropped.Load(), t3err.Load())
	}
}

func TestQueueWaitLimitAndContext(t *testing.T) {
	q, _ := newQueue(1, WithCoDel(time.Millisecond, 2*time.Millisecond))
	hold, _ := q.Acquire(context.Background(), tenant.T2)
	defer hold()
	if _, err := q.Acquire(context.Background(), tenant.T2); !errors.Is(err, ErrQueueDelay) {
		t.Errorf("wait limit: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := q.Acquire(ctx, tenant.T0); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled T0: %v", err)
	}
	if q.Waiting() != 0 {
		t.Errorf("%d left waiting", q.Waiting())
	}
}

func TestQueueShadow(t *testing.T) { synctest.Test(t, testQueueShadow) }

func testQueueShadow(t *testing.T) {
	clk := &manualClock{}
	var shadowDrops atomic.Int64
	q, _ := newQueue(1, WithQueueClock(clk.now), withQueueShadow(true),
		WithCoDel(time.Millisecond, 2*time.Millisecond),
		withDropHook(func(_ tenant.Tier, shadow bool) {
			if shadow {
				shadowDrops.Add(1)
			}
		}))
	hold, _ := q.Acquire(context.Background(), tenant.T2)
	done := make(chan error, 3)
	for i := 0; i < 3; i++ {
		go func() {
			rel, err := q.Acquire(context.Background(), tenant.T3)
			if err == nil {
				clk.advance(10 * time.Millisecond)
				rel()
			}
			done <- err
		}()
	}
	synctest.Wait()
	if n := q.Waiting(); n != 3 {
		t.Fatalf("%d waiting, want 3", n)
	}
	clk.advance(50 * time.Millisecond)
	hold()
	for i := 0; i < 3; i++ {
		if err := <-done; err != nil {
			t.Errorf("shadow queue failed work: %v", err)
		}
	}
	if shadowDrops.Load() != 1 {
		t.Errorf("%d shadow drops counted, want 1", shadowDrops.Load())
	}
}

func TestQueueConfigErrors(t *testing.T) {
	if _, err := newQueue(0); !errors.Is(err, ErrConfig) {
		t.Error(err)
	}
	if _, err := newQueue(1, WithCoDel(time.Second, time.Millisecond)); !errors.Is(err, ErrConfig) {
		t.Error(err)
	}
}

func TestQueueConcurrent(t *testing.T) {
	q, _ := newQueue(3, WithCoDel(time.Millisecond, 5*time.Millisecond))
	var wg sync.WaitGroup
	var inside, maxInside atomic.Int64
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%3)*time.Millisecond)
				rel, err := q.Acquire(ctx, tenant.Tier(1+(g+i)%4))
				cancel()
				if err != nil {
					continue
				}
				n := inside.Add(1)
				for {
					m := maxInside.Load()
					if n <= m || maxInside.CompareAndSwap(m, n) {
						break
					}
				}
				inside.Add(-1)
				rel()
			}
		}()
	}
	wg.Wait()
	if maxInside.Load() > 3 {
		t.Errorf("%d in flight, slots 3", maxInside.Load())
	}
	if q.InFlight() != 0 || q.Waiting() != 0 {
		t.Errorf("left: %d in flight, %d waiting", q.InFlight(), q.Waiting())
	}
}
