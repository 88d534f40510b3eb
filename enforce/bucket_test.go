package enforce

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

func TestLimitValidate(t *testing.T) {
	for _, l := range []Limit{{0, 1}, {-1, 1}, {math.Inf(1), 1}, {math.NaN(), 1}, {1, -1}, {1, math.NaN()}} {
		if _, err := newBuckets(l); !errors.Is(err, ErrConfig) {
			t.Errorf("newBuckets(%+v) = %v", l, err)
		}
	}
	if _, err := newBuckets(Limit{1, 1}, withMaxKeys(0)); !errors.Is(err, ErrConfig) {
		t.Error("max keys 0 accepted")
	}
	if _, err := newBuckets(Limit{1, 1}, withIdle(-1)); !errors.Is(err, ErrConfig) {
		t.Error("negative idle accepted")
	}
}

func TestBucketsPerKeyLimits(t *testing.T) {
	limits := map[string]Limit{"big": {100, 100}, "bad": {-1, 0}}
	var mu sync.Mutex
	k, err := newBuckets(Limit{RUPerSecond: 10, Burst: 10}, withLimitOf(func(key string) (Limit, bool) {
		mu.Lock()
		defer mu.Unlock()
		l, ok := limits[key]
		return l, ok
	}))
	if err != nil {
		t.Fatal(err)
	}
	if got := k.TokensAt(t0, "big"); got != 100 {
		t.Errorf("big = %v", got)
	}
	if got := k.TokensAt(t0, "small"); got != 10 {
		t.Errorf("small = %v", got)
	}
	if got := k.LimitOf("bad"); got != (Limit{10, 10}) {
		t.Errorf("invalid limit not replaced by default: %+v", got)
	}
	k.ChargeAt(t0, "small", 30)
	if ok, wait := k.AllowAt(t0, "small"); ok || wait != 2*time.Second {
		t.Errorf("small in debt: %v %v", ok, wait)
	}
	if ok, _ := k.TakeAt(t0, "big", 150); !ok {
		t.Error("big refused")
	}
	if ok, wait := k.TakeAt(t0, "big", 1); ok || wait != 500*time.Millisecond {
		t.Errorf("big after overdraw: %v %v", ok, wait)
	}
	// An override lowers small's rate: the debt stays, paid at the new rate.
	mu.Lock()
	limits["small"] = Limit{RUPerSecond: 1, Burst: 10}
	mu.Unlock()
	k.Invalidate()
	if got := k.LimitOf("small"); got.RUPerSecond != 1 {
		t.Errorf("limit after invalidate = %+v", got)
	}
	if ok, wait := k.AllowAt(t0, "small"); ok || wait != 20*time.Second {
		t.Errorf("small after override: %v %v", ok, wait)
	}
}

func TestBucketsEviction(t *testing.T) {
	k, _ := newBuckets(Limit{RUPerSecond: 1, Burst: 1}, withMaxKeys(numShards*4), withIdle(time.Minute))
	for i := 0; i < 10_000; i++ {
		k.ChargeAt(at(time.Duration(i)*time.Millisecond), fmt.Sprint("t", i), 1)
	}
	if n := k.Len(); n > numShards*4 {
		t.Errorf("%d buckets kept, bound %d", n, numShards*4)
	}
	if k.Evicted() == 0 {
		t.Error("nothing evicted")
	}
	// A bucket in debt survives a sweep; full ones go.
	k2, _ := newBuckets(Limit{RUPerSecond: 1, Burst: 1}, withIdle(time.Minute))
	k2.ChargeAt(t0, "debtor", 1000)
	k2.ChargeAt(t0, "light", 1)
	if n := k2.SweepAt(at(2 * time.Minute)); n != 1 || k2.Len() != 1 {
		t.Errorf("sweep evicted %d, %d left", n, k2.Len())
	}
	if got := k2.TokensAt(at(2*time.Minute), "debtor"); !near(got, 1-1000+120) {
		t.Errorf("debtor tokens = %v", got)
	}
}

func TestBucketsConcurrent(t *testing.T) {
	k, _ := newBuckets(Limit{RUPerSecond: 1000, Burst: 1000}, withMaxKeys(numShards*2), withIdle(0))
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				now := at(time.Duration(i) * time.Millisecond)
				key := fmt.Sprint("t", (g*31+i)%300)
				k.AllowAt(now, key)
				k.ChargeAt(now, key, 1)
				k.TakeAt(now, key, 1)
				if i%500 == 0 {
					k.Invalidate()
					k.SweepAt(now)
				}
			}
		}()
	}
	wg.Wait()
	// One shared key: every charge is counted.
	k2, _ := newBuckets(Limit{RUPerSecond: 1, Burst: 0})
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				k2.ChargeAt(t0, "shared", 1)
			}
		}()
	}
	wg.Wait()
	if got := k2.TokensAt(t0, "shared"); !near(got, -8000) {
		t.Errorf("shared tokens = %v, want -8000", got)
	}
}

func BenchmarkBucketsAllowAt(b *testing.B) {
	k, _ := newBuckets(Limit{RUPerSecond: 1e9, Burst: 1e9})
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprintf("tenant-%04d", i)
		k.AllowAt(t0, keys[i])
	}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			k.AllowAt(t0, keys[i&1023])
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				k.AllowAt(t0, keys[i&1023])
				i++
			}
		})
	})
	b.Run("take", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			k.TakeAt(t0, keys[i&1023], 1)
		}
	})
}
