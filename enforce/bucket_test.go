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

func TestBucketSteps(t *testing.T) {
	// 10 RU/s, burst 20.
	b, err := NewBucket(Limit{RUPerSecond: 10, Burst: 20})
	if err != nil {
		t.Fatal(err)
	}
	ms := time.Millisecond
	steps := []struct {
		at     time.Duration
		op     string // "allow", "charge" (then allow), "take"
		ru     float64
		ok     bool
		tokens float64
		retry  time.Duration // RetryAfterAt is this + 1 ns when not zero
	}{
		{0, "allow", 0, true, 20, 0},
		{0, "charge", 15, true, 5, 0},
		{100 * ms, "allow", 0, true, 6, 0},
		// A 100,000-row scan costs 1,000 RU: deep debt, remembered.
		{100 * ms, "charge", 1000, false, -994, 99400 * ms},
		{time.Second, "allow", 0, false, -985, 98500 * ms},
		{time.Second, "take", 1, false, -985, 98500 * ms},
		// The clock goes backwards: no tokens appear.
		{500 * ms, "allow", 0, false, -990, 99000 * ms},
		{500 * ms, "charge", 1, false, -991, 99100 * ms},
		// 100.1 s after 0.5 s the debt is paid and 10 tokens refilled.
		{100*time.Second + 600*ms, "allow", 0, true, 10, 0},
		{100*time.Second + 600*ms, "take", 15, true, -5, 500 * ms},
		{101*time.Second + 99*ms, "allow", 0, false, -0.01, ms},
		// Exactly zero tokens is not enough.
		{101*time.Second + 100*ms, "allow", 0, false, 0, 0},
		{101*time.Second + 101*ms, "allow", 0, true, 0.01, 0},
		// Idle for an hour: capped at the burst.
		{time.Hour, "allow", 0, true, 20, 0},
	}
	for i, s := range steps {
		now := at(s.at)
		var ok bool
		switch s.op {
		case "allow":
			ok = b.AllowAt(now)
		case "charge":
			b.ChargeAt(now, s.ru)
			ok = b.AllowAt(now)
		case "take":
			ok = b.TakeAt(now, s.ru)
		}
		if ok != s.ok {
			t.Errorf("step %d (%s at %v): ok = %v, want %v", i, s.op, s.at, ok, s.ok)
		}
		if got := b.TokensAt(now); !near(got, s.tokens) {
			t.Errorf("step %d: tokens = %v, want %v", i, got, s.tokens)
		}
		want := s.retry + 1
		if s.retry == 0 && s.tokens > 0 {
			want = 0
		}
		if got := b.RetryAfterAt(now); got != want {
			t.Errorf("step %d: retry after = %v, want %v", i, got, want)
		}
	}
}

func TestBucketIgnoresBadCharges(t *testing.T) {
	b, _ := NewBucket(Limit{RUPerSecond: 1, Burst: 1})
	b.ChargeAt(t0, -5)
	b.ChargeAt(t0, math.NaN())
	if got := b.TokensAt(t0); got != 1 {
		t.Errorf("tokens = %v after bad charges", got)
	}
	b.ChargeAt(t0, math.Inf(1))
	if got := b.RetryAfterAt(t0); got > maxDebt+time.Second || got < maxDebt-2*time.Second {
		t.Errorf("infinite charge: retry after %v, want the cap %v", got, maxDebt)
	}
}

func TestBucketSetLimitKeepsTokens(t *testing.T) {
	b, _ := NewBucket(Limit{RUPerSecond: 10, Burst: 20})
	b.ChargeAt(t0, 30) // -10
	if err := b.SetLimitAt(t0, Limit{RUPerSecond: 1, Burst: 5}); err != nil {
		t.Fatal(err)
	}
	if got := b.TokensAt(t0); !near(got, -10) {
		t.Errorf("debt after change = %v, want -10", got)
	}
	if got := b.RetryAfterAt(t0); got != 10*time.Second+1 {
		t.Errorf("retry after = %v, want 10s at the new rate", got)
	}
	if err := b.SetLimitAt(at(time.Hour), Limit{RUPerSecond: 100, Burst: 2}); err != nil {
		t.Fatal(err)
	}
	if got := b.TokensAt(at(time.Hour)); !near(got, 2) {
		t.Errorf("full bucket after shrinking burst = %v, want 2", got)
	}
	if err := b.SetLimitAt(t0, Limit{RUPerSecond: 0}); !errors.Is(err, ErrConfig) {
		t.Errorf("zero rate: %v", err)
	}
}

func TestLimitValidate(t *testing.T) {
	for _, l := range []Limit{{0, 1}, {-1, 1}, {math.Inf(1), 1}, {math.NaN(), 1}, {1, -1}, {1, math.NaN()}} {
		if _, err := NewBucket(l); !errors.Is(err, ErrConfig) {
			t.Errorf("NewBucket(%+v) = %v", l, err)
		}
		if _, err := NewBuckets(l); !errors.Is(err, ErrConfig) {
			t.Errorf("NewBuckets(%+v) = %v", l, err)
		}
	}
	if _, err := NewBuckets(Limit{1, 1}, WithMaxKeys(0)); !errors.Is(err, ErrConfig) {
		t.Error("max keys 0 accepted")
	}
	if _, err := NewBuckets(Limit{1, 1}, WithIdle(-1)); !errors.Is(err, ErrConfig) {
		t.Error("negative idle accepted")
	}
}

func TestBucketsPerKeyLimits(t *testing.T) {
	limits := map[string]Limit{"big": {100, 100}, "bad": {-1, 0}}
	var mu sync.Mutex
	k, err := NewBuckets(Limit{RUPerSecond: 10, Burst: 10}, WithLimitOf(func(key string) (Limit, bool) {
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
	if ok, wait := k.AllowAt(t0, "small"); ok || wait != 2*time.Second+1 {
		t.Errorf("small in debt: %v %v", ok, wait)
	}
	if ok, _ := k.TakeAt(t0, "big", 150); !ok {
		t.Error("big refused")
	}
	if ok, wait := k.TakeAt(t0, "big", 1); ok || wait != 500*time.Millisecond+1 {
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
	if ok, wait := k.AllowAt(t0, "small"); ok || wait != 20*time.Second+1 {
		t.Errorf("small after override: %v %v", ok, wait)
	}
}

func TestBucketsEviction(t *testing.T) {
	k, _ := NewBuckets(Limit{RUPerSecond: 1, Burst: 1}, WithMaxKeys(numShards*4), WithIdle(time.Minute))
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
	k2, _ := NewBuckets(Limit{RUPerSecond: 1, Burst: 1}, WithIdle(time.Minute))
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
	k, _ := NewBuckets(Limit{RUPerSecond: 1000, Burst: 1000}, WithMaxKeys(numShards*2), WithIdle(0))
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
	k2, _ := NewBuckets(Limit{RUPerSecond: 1, Burst: 0})
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
	k, _ := NewBuckets(Limit{RUPerSecond: 1e9, Burst: 1e9})
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

func TestBucketConcurrentLimitChanges(t *testing.T) {
	b, _ := NewBucket(Limit{RUPerSecond: 1, Burst: 0})
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				b.ChargeAt(t0, 1)
				b.TakeAt(t0, 0)
				_ = b.TokensAt(t0)
				if g == 0 && i%10 == 0 {
					_ = b.SetLimitAt(t0, Limit{RUPerSecond: 1, Burst: float64(i % 3)})
				}
			}
		}()
	}
	wg.Wait()
	// Every charge lands; the burst ends at 0 or more, so tokens ≤ burst − 4000.
	if got := b.TokensAt(t0); got > b.Limit().Burst-4000+1e-6 {
		t.Errorf("tokens %v after 4000 RU of charges (burst %v)", got, b.Limit().Burst)
	}
}
