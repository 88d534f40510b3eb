package fairqueue

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// slots is a Limiter of n slots per tenant, in process: what the queue
// does with a refusal is under test here, not the lease store.
type slots struct {
	mu    sync.Mutex
	n     int
	inUse map[string]int
}

func (s *slots) Acquire(_ context.Context, tenant string) (bool, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inUse[tenant] >= s.n {
		return false, 10 * time.Millisecond
	}
	s.inUse[tenant]++
	return true, 0
}

func (s *slots) Release(tenant string) { s.mu.Lock(); s.inUse[tenant]--; s.mu.Unlock() }

// TestFairQueueLimiterSteps: a refused item goes back to the head of its
// tenant's queue, its tenant is skipped until the delay passes, other
// tenants are served meanwhile, and nothing is lost.
func TestLimiterSteps(t *testing.T) {
	now := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	lim := &slots{n: 1, inUse: map[string]int{}}
	q, err := New[string](WithLimiter(lim))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"a1", "a2", "a3"} {
		q.Push(context.Background(), "A", v)
	}
	q.Push(context.Background(), "B", "b1")
	type step struct {
		advance time.Duration
		done    string // Done(tenant) before popping
		want    string // "" when nothing can be popped
		pending int
	}
	for i, s := range []step{
		{want: "a1", pending: 3},
		{want: "b1", pending: 2}, // a2 refused (A at 1) and held; B served
		{want: "", pending: 2},   // A held for 10 ms
		{advance: 5 * time.Millisecond, want: "", pending: 2},
		{advance: 5 * time.Millisecond, want: "", pending: 2}, // hold over, A still at its limit: held again
		{done: "A", advance: 10 * time.Millisecond, want: "a2", pending: 1},
		{done: "A", want: "a3", pending: 0},
	} {
		now = now.Add(s.advance)
		if s.done != "" {
			q.Done(s.done)
		}
		it, ok := q.PopItemAt(now)
		got := ""
		if ok {
			got = it.Value
		}
		if got != s.want || q.Len() != s.pending {
			t.Fatalf("step %d: popped %q with %d pending, want %q with %d", i, got, q.Len(), s.want, s.pending)
		}
	}
	q.Done("A")
	q.Done("B")
	if lim.inUse["A"] != 0 || lim.inUse["B"] != 0 {
		t.Fatalf("slots left in use: %v", lim.inUse)
	}
}

// TestFairQueueLimiterPopWait: PopWait retries when a hold ends, though
// nothing in the queue changed (the slot was freed in another process).
func TestLimiterPopWait(t *testing.T) { synctest.Test(t, testLimiterPopWait) }

func testLimiterPopWait(t *testing.T) {
	lim := &slots{n: 1, inUse: map[string]int{"A": 1}} // A's slot is held elsewhere
	q, _ := New[string](WithLimiter(lim))
	q.Push(context.Background(), "A", "a1")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if _, err := q.PopWait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("PopWait with A at its limit: %v", err)
	}
	if q.Len() != 1 {
		t.Fatal("the refused item was lost")
	}
	type popped struct {
		it  Item[string]
		err error
	}
	got := make(chan popped, 1)
	go func() {
		it, err := q.PopWait(context.Background())
		got <- popped{it, err}
	}()
	synctest.Wait() // PopWait waits: A is at its limit
	lim.Release("A")
	if p := <-got; p.err != nil || p.it.Value != "a1" {
		t.Fatalf("PopWait: %v %v", p.it, p.err)
	}
	q.Close()
	q.Done("A")
	if _, err := q.PopWait(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatal(err)
	}
}

// TestFairQueueLimiterNoneLost: workers draining a closed queue whose
// limiter refuses often all keep going until every item ran; none leaves
// early while a refused item is on its way back.
func TestLimiterNoneLost(t *testing.T) {
	lim := &slots{n: 1, inUse: map[string]int{}}
	q, _ := New[int](WithLimiter(lim))
	const n = 200
	for i := range n {
		q.Push(context.Background(), string(rune('A'+i%3)), i)
	}
	q.Close()
	var mu sync.Mutex
	ran := 0
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				it, err := q.PopWait(context.Background())
				if err != nil {
					return
				}
				mu.Lock()
				ran++
				mu.Unlock()
				q.Done(it.Tenant)
			}
		}()
	}
	wg.Wait()
	if ran != n || q.Len() != 0 {
		t.Fatalf("ran %d of %d, %d left", ran, n, q.Len())
	}
}

// TestLimiterDoneTwice: a Done called twice for one item (a worker's
// deferred Done and an explicit one) gives back that item's slot only,
// never the Limiter's slot of another running job of the tenant.
func TestLimiterDoneTwice(t *testing.T) {
	now := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	lim := &slots{n: 2, inUse: map[string]int{}}
	q, err := New[string](WithLimiter(lim))
	if err != nil {
		t.Fatal(err)
	}
	q.Push(context.Background(), "A", "a1")
	q.Push(context.Background(), "A", "a2")
	for _, want := range []string{"a1", "a2"} {
		if it, ok := q.PopItemAt(now); !ok || it.Value != want {
			t.Fatalf("popped %q, %v; want %q", it.Value, ok, want)
		}
	}
	q.Done("A") // a1 ends
	q.Done("A") // a2 ends
	q.Done("A") // one too many
	q.Done("B") // a tenant with nothing popped
	if lim.inUse["A"] != 0 || lim.inUse["B"] != 0 {
		t.Fatalf("slots in use %v, want 0 each: a Done without work in flight released a slot", lim.inUse)
	}
}
