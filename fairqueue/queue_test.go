package fairqueue

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

var (
	ctx0 = context.Background()
	t0   = time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
)

func popAll[T any](q *Queue[T]) []Item[T] {
	var out []Item[T]
	for {
		it, ok := q.PopItem()
		if !ok {
			return out
		}
		out = append(out, it)
	}
}

func tenantsOf[T any](items []Item[T]) string {
	var b strings.Builder
	for _, it := range items {
		b.WriteString(it.Tenant)
	}
	return b.String()
}

func TestQueueWeightedOrder(t *testing.T) {
	q, err := New[int](WithWeights(func(t string) int {
		if t == "B" {
			return 2
		}
		return 1
	}))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 6; i++ {
		if err := q.Push(ctx0, "A", i); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 4; i++ {
		_ = q.Push(ctx0, "B", i)
	}
	_ = q.Push(ctx0, "C", 0)
	// A, then B twice (weight 2), then C, round after round.
	if got, want := tenantsOf(popAll(q)), "ABBCABBAAAA"; got != want {
		t.Errorf("order %s, want %s", got, want)
	}
	if _, ok := q.Pop(); ok || q.Len() != 0 {
		t.Error("pop from empty queue")
	}
}

func TestQueueFIFOWithinTenant(t *testing.T) {
	q, _ := New[int]()
	for i := 0; i < 100; i++ {
		_ = q.Push(ctx0, fmt.Sprint(i%3), i)
	}
	last := map[string]int{"0": -1, "1": -1, "2": -1}
	for _, it := range popAll(q) {
		if it.Value <= last[it.Tenant] {
			t.Fatalf("tenant %s out of order: %d after %d", it.Tenant, it.Value, last[it.Tenant])
		}
		last[it.Tenant] = it.Value
	}
}

func TestQueueCosts(t *testing.T) {
	q, _ := New[string](WithQuantum(4))
	ctx := context.Background()
	// scan costs 10, reads cost 1: the scan waits 3 rounds of credit.
	_ = q.PushAt(ctx, t0, "S", "scan", 10)
	for i := 0; i < 12; i++ {
		_ = q.PushAt(ctx, t0, "R", "read", 1)
	}
	got := tenantsOf(popAll(q))
	if got != "RRRRRRRRSRRRR" {
		t.Errorf("order %s", got)
	}
	if err := q.PushAt(ctx, t0, "S", "x", 0); !errors.Is(err, ErrConfig) {
		t.Errorf("zero cost: %v", err)
	}
}

// TestQueueStarvationBound checks the documented bound on random
// weights, costs and arrivals: between two services of a backlogged
// tenant i, the others get at most Σ (R × w × quantum + max cost), where
// R = ⌈max cost / (w_i × quantum)⌉ rounds let i's credit reach its item.
func TestQueueStarvationBound(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	weights := map[string]int{"a": 1, "b": 3, "c": 7, "d": 1, "e": 2}
	const quantum, maxCost = 2.0, 5.0
	q, _ := New[int](WithWeights(func(t string) int { return weights[t] }), WithQuantum(quantum), WithMaxPending(1<<20))
	names := []string{"a", "b", "c", "d", "e"}
	for i := 0; i < 3000; i++ {
		_ = q.PushAt(context.Background(), t0, names[r.IntN(5)], i, 1+float64(r.IntN(int(maxCost))))
	}
	served := map[string]float64{} // cost served to others since a tenant's last service
	for {
		it, ok := q.PopItem()
		if !ok {
			break
		}
		for _, n := range names {
			if n == it.Tenant {
				continue
			}
			served[n] += it.Cost
		}
		rounds := math.Ceil(maxCost / (float64(weights[it.Tenant]) * quantum))
		bound := 0.0
		for _, n := range names {
			if n != it.Tenant {
				bound += rounds*float64(weights[n])*quantum + maxCost
			}
		}
		if served[it.Tenant] > bound {
			t.Fatalf("%s waited behind %v cost units, bound %v", it.Tenant, served[it.Tenant], bound)
		}
		served[it.Tenant] = 0
	}
}

func TestQueueConcurrencyCap(t *testing.T) {
	q, _ := New[int](WithConcurrency(func(t string) int {
		if t == "big" {
			return 2
		}
		return 0
	}))
	for i := 0; i < 5; i++ {
		_ = q.Push(ctx0, "big", i)
	}
	_ = q.Push(ctx0, "small", 0)
	got := tenantsOf(popAll(q))
	if got != "bigsmallbig" {
		t.Errorf("order %q: big must stop at its cap of 2", got)
	}
	q.Done("big")
	q.Done("nobody")
	if it, ok := q.PopItem(); !ok || it.Tenant != "big" {
		t.Errorf("after Done: %+v %v", it, ok)
	}
	if _, ok := q.Pop(); ok {
		t.Error("cap ignored")
	}
}

// TestQueueBackpressure runs in a synctest bubble: the producer is
// waiting when synctest.Wait returns, and the deadline is fake time.
func TestQueueBackpressure(t *testing.T) { synctest.Test(t, testQueueBackpressure) }

func testQueueBackpressure(t *testing.T) {
	q, _ := New[int](WithMaxPending(2))
	_ = q.Push(ctx0, "a", 1)
	_ = q.Push(ctx0, "a", 2)
	_ = q.Push(ctx0, "b", 1) // other tenants are not held up
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := q.Push(ctx, "a", 3); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("push over the cap: %v", err)
	}
	pushed := make(chan error)
	go func() { pushed <- q.Push(ctx0, "a", 3) }()
	if it, _ := q.PopItem(); it.Tenant != "a" {
		t.Fatalf("popped %+v", it)
	}
	if err := <-pushed; err != nil {
		t.Fatal(err)
	}
	if q.PendingOf("a") != 2 {
		t.Errorf("a pending %d", q.PendingOf("a"))
	}
	// Close wakes a waiting producer with ErrClosed; queued items drain.
	go func() { pushed <- q.Push(ctx0, "a", 4) }()
	synctest.Wait() // the producer waits for room
	q.Close()
	if err := <-pushed; !errors.Is(err, ErrClosed) {
		t.Errorf("push after close: %v", err)
	}
	n := 0
	for {
		_, err := q.PopWait(context.Background())
		if errors.Is(err, ErrClosed) {
			break
		}
		n++
	}
	if n != 3 {
		t.Errorf("drained %d, want 3", n)
	}
}

func TestQueueConfigErrors(t *testing.T) {
	if _, err := New[int](WithQuantum(0)); !errors.Is(err, ErrConfig) {
		t.Error(err)
	}
	if _, err := New[int](WithMaxPending(0)); !errors.Is(err, ErrConfig) {
		t.Error(err)
	}
}

func TestQueueConcurrent(t *testing.T) {
	plans := map[string][2]int{"bigco": {4, 16}, "a": {1, 4}, "b": {1, 4}} // weight, concurrency
	q, _ := New[int](WithWeights(func(t string) int { return plans[t][0] }),
		WithConcurrency(func(t string) int { return plans[t][1] }), WithMaxPending(8))
	const producers, per = 6, 300
	var wg sync.WaitGroup
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				if err := q.Push(ctx0, []string{"bigco", "a", "b"}[(p+i)%3], i); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	got := make(chan int, 4)
	for c := 0; c < 4; c++ {
		go func() {
			n := 0
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for {
				it, err := q.PopWait(ctx)
				if err != nil {
					got <- n
					return
				}
				n++
				q.Done(it.Tenant)
			}
		}()
	}
	wg.Wait()
	q.Close()
	total := 0
	for c := 0; c < 4; c++ {
		total += <-got
	}
	if total != producers*per {
		t.Errorf("popped %d, pushed %d", total, producers*per)
	}
}

func BenchmarkQueuePushPop(b *testing.B) {
	q, _ := New[int](WithMaxPending(1 << 20))
	tenants := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	for i := range 64 {
		_ = q.PushAt(ctx0, t0, tenants[i&7], i, 1)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_ = q.PushAt(ctx0, t0, tenants[i&7], i, 1)
		if it, ok := q.PopItem(); ok {
			q.Done(it.Tenant)
		}
	}
}
