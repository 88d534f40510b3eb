package enforce

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
)

func popAll[T any](q *FairQueue[T]) []Item[T] {
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

func TestFairQueueWeightedOrder(t *testing.T) {
	q, err := NewFairQueue[int](WithWeights(func(t string) int {
		if t == "B" {
			return 2
		}
		return 1
	}))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 6; i++ {
		if err := q.Push("A", i); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 4; i++ {
		_ = q.Push("B", i)
	}
	_ = q.Push("C", 0)
	// A, then B twice (weight 2), then C, round after round.
	if got, want := tenantsOf(popAll(q)), "ABBCABBAAAA"; got != want {
		t.Errorf("order %s, want %s", got, want)
	}
	if _, ok := q.Pop(); ok || q.Len() != 0 {
		t.Error("pop from empty queue")
	}
}

func TestFairQueueFIFOWithinTenant(t *testing.T) {
	q, _ := NewFairQueue[int]()
	for i := 0; i < 100; i++ {
		_ = q.Push(fmt.Sprint(i%3), i)
	}
	last := map[string]int{"0": -1, "1": -1, "2": -1}
	for _, it := range popAll(q) {
		if it.Value <= last[it.Tenant] {
			t.Fatalf("tenant %s out of order: %d after %d", it.Tenant, it.Value, last[it.Tenant])
		}
		last[it.Tenant] = it.Value
	}
}

func TestFairQueueCosts(t *testing.T) {
	q, _ := NewFairQueue[string](WithQuantum(4))
	ctx := context.Background()
	// scan costs 10, reads cost 1: the scan waits 3 rounds of credit.
	_ = q.PushCost(ctx, "S", "scan", 10)
	for i := 0; i < 12; i++ {
		_ = q.PushCost(ctx, "R", "read", 1)
	}
	got := tenantsOf(popAll(q))
	if got != "RRRRRRRRSRRRR" {
		t.Errorf("order %s", got)
	}
	if err := q.PushCost(ctx, "S", "x", 0); !errors.Is(err, ErrConfig) {
		t.Errorf("zero cost: %v", err)
	}
}

// TestFairQueueStarvationBound checks the documented bound on random
// weights, costs and arrivals: between two services of a backlogged
// tenant i, the others get at most Σ (R × w × quantum + max cost), where
// R = ⌈max cost / (w_i × quantum)⌉ rounds let i's credit reach its item.
func TestFairQueueStarvationBound(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	weights := map[string]int{"a": 1, "b": 3, "c": 7, "d": 1, "e": 2}
	const quantum, maxCost = 2.0, 5.0
	q, _ := NewFairQueue[int](WithWeights(func(t string) int { return weights[t] }), WithQuantum(quantum), WithMaxPending(1<<20))
	names := []string{"a", "b", "c", "d", "e"}
	for i := 0; i < 3000; i++ {
		_ = q.PushCost(context.Background(), names[r.IntN(5)], i, 1+float64(r.IntN(int(maxCost))))
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

func TestFairQueueConcurrencyCap(t *testing.T) {
	q, _ := NewFairQueue[int](WithConcurrency(func(t string) int {
		if t == "big" {
			return 2
		}
		return 0
	}))
	for i := 0; i < 5; i++ {
		_ = q.Push("big", i)
	}
	_ = q.Push("small", 0)
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

func TestFairQueueBackpressure(t *testing.T) {
	q, _ := NewFairQueue[int](WithMaxPending(2))
	_ = q.Push("a", 1)
	_ = q.Push("a", 2)
	_ = q.Push("b", 1) // other tenants are not held up
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := q.PushCtx(ctx, "a", 3); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("push over the cap: %v", err)
	}
	pushed := make(chan error)
	go func() { pushed <- q.Push("a", 3) }()
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
	go func() { pushed <- q.Push("a", 4) }()
	time.Sleep(time.Millisecond)
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

func TestFairQueueConfigErrors(t *testing.T) {
	if _, err := NewFairQueue[int](WithQuantum(0)); !errors.Is(err, ErrConfig) {
		t.Error(err)
	}
	if _, err := NewFairQueue[int](WithMaxPending(0)); !errors.Is(err, ErrConfig) {
		t.Error(err)
	}
}

func TestFairQueueConcurrent(t *testing.T) {
	e := newTestEnforcer(t)
	q, _ := NewFairQueue[int](WithPlanFairness(e), WithMaxPending(8))
	const producers, per = 6, 300
	var wg sync.WaitGroup
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				if err := q.Push([]string{"bigco", "a", "b"}[(p+i)%3], i); err != nil {
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
