package gcra

import (
	"errors"
	"math"
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

func mustRate(t testing.TB, perSecond, burst float64) Rate {
	t.Helper()
	r, err := NewRate(perSecond, burst)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestSteps walks one bucket through fixed instants t0 … t9, the clock
// going backwards at t5, for both forms of the bucket.
func TestSteps(t *testing.T) {
	r := mustRate(t, 10, 20) // 10 a second, burst 20
	ms := time.Millisecond
	steps := []struct {
		name   string
		at     time.Duration
		op     string // allow (need ru), charge, take
		ru     float64
		ok     bool
		tokens float64
		wait   time.Duration // WaitAt(now, r, 0)
	}{
		{"t0 full", 0, "allow", 20, true, 20, 0},
		{"t1 charge after", 0, "charge", 15, true, 5, 0},
		{"t2 refill", 100 * ms, "allow", 6, true, 6, 0},
		{"t2 not enough", 100 * ms, "allow", 7, false, 6, 0},
		// A 100,000-row scan costs 1,000: deep debt, remembered.
		{"t3 debt", 100 * ms, "charge", 1000, false, -994, 99400 * ms},
		{"t4 still", time.Second, "take", 1, false, -985, 98500 * ms},
		// The clock goes backwards: no tokens appear.
		{"t5 backwards", 500 * ms, "allow", 0, false, -990, 99000 * ms},
		{"t5 charge", 500 * ms, "charge", 1, false, -991, 99100 * ms},
		// 100.1 s after 0.5 s the debt is paid and 10 tokens refilled.
		{"t6 paid", 100*time.Second + 600*ms, "allow", 10, true, 10, 0},
		{"t7 take into debt", 100*time.Second + 600*ms, "take", 15, true, -5, 500 * ms},
		{"t8 exactly out of debt", 101*time.Second + 100*ms, "allow", 0, true, 0, 0},
		{"t8 refund", 101*time.Second + 100*ms, "charge", -3, true, 3, 0},
		// Idle for an hour: capped at the burst.
		{"t9 idle", time.Hour, "allow", 0, true, 20, 0},
	}
	var b Bucket
	var a Atomic
	for _, s := range steps {
		now := at(s.at)
		var ok, aok bool
		switch s.op {
		case "allow":
			ok, aok = b.AllowAt(now, r, s.ru), a.AllowAt(now, r, s.ru)
		case "charge":
			b.ChargeAt(now, r, s.ru)
			a.ChargeAt(now, r, s.ru)
			ok, aok = b.AllowAt(now, r, 0), a.AllowAt(now, r, 0)
		case "take":
			ok, aok = b.TakeAt(now, r, s.ru), a.TakeAt(now, r, s.ru)
		}
		if ok != s.ok || aok != s.ok {
			t.Errorf("%s: ok = %v (atomic %v), want %v", s.name, ok, aok, s.ok)
		}
		if got, agot := b.TokensAt(now, r), a.TokensAt(now, r); !near(got, s.tokens) || got != agot {
			t.Errorf("%s: tokens = %v (atomic %v), want %v", s.name, got, agot, s.tokens)
		}
		if got, agot := b.WaitAt(now, r, 0), a.WaitAt(now, r, 0); got != s.wait || agot != s.wait {
			t.Errorf("%s: wait = %v (atomic %v), want %v", s.name, got, agot, s.wait)
		}
	}
}

func TestWaitForTokens(t *testing.T) {
	r := mustRate(t, 4, 8)
	var b Bucket
	b.ChargeAt(t0, r, 9) // -1
	if got := b.WaitAt(t0, r, 1); got != 500*time.Millisecond {
		t.Errorf("wait for 1 = %v, want 500ms", got)
	}
	if b.AllowAt(at(499*time.Millisecond), r, 1) || !b.AllowAt(at(500*time.Millisecond), r, 1) {
		t.Error("AllowAt disagrees with WaitAt")
	}
	// More than the burst waits for the burst.
	if got := b.WaitAt(t0, r, 100); got != 2250*time.Millisecond {
		t.Errorf("wait for 100 = %v, want 2.25s (a full bucket)", got)
	}
}

func TestDebtCap(t *testing.T) {
	r := mustRate(t, 1, 1).WithMaxDebt(time.Minute)
	var b Bucket
	b.ChargeAt(t0, r, math.Inf(1))
	if got := b.WaitAt(t0, r, 0); got != time.Minute-time.Second {
		t.Errorf("wait after an infinite charge = %v, want the cap less the burst", got)
	}
	b.ChargeAt(t0, r, 1e300)
	b.ChargeAt(t0, r, 30)
	if got := b.FullAt(); !got.Equal(at(time.Minute)) {
		t.Errorf("full at %v, want %v", got, at(time.Minute))
	}
	b.ChargeAt(t0, r, math.NaN())
	b.ChargeAt(t0, r, math.Inf(-1))
	if got := b.TokensAt(t0, r); got != 1 {
		t.Errorf("tokens after a -Inf refund = %v, want the burst", got)
	}
}

func TestSetRateKeepsTokens(t *testing.T) {
	from, to := mustRate(t, 10, 20), mustRate(t, 1, 5)
	var b Bucket
	b.ChargeAt(t0, from, 30) // -10
	b.SetRateAt(t0, from, to)
	if got := b.TokensAt(t0, to); !near(got, -10) {
		t.Errorf("debt after change = %v, want -10", got)
	}
	if got := b.WaitAt(t0, to, 0); got != 10*time.Second {
		t.Errorf("wait = %v, want 10s at the new rate", got)
	}
	big := mustRate(t, 100, 2)
	b.SetRateAt(at(time.Hour), to, big)
	if got := b.TokensAt(at(time.Hour), big); !near(got, 2) {
		t.Errorf("full bucket after shrinking burst = %v, want 2", got)
	}
	b.SetAt(t0, big, -4)
	if got := b.TokensAt(t0, big); !near(got, -4) {
		t.Errorf("SetAt -4: %v", got)
	}
}

func TestRate(t *testing.T) {
	for _, c := range [][2]float64{{0, 1}, {-1, 1}, {math.Inf(1), 1}, {math.NaN(), 1}, {1, -1}, {1, math.NaN()}, {1, math.Inf(1)}} {
		if _, err := NewRate(c[0], c[1]); !errors.Is(err, ErrRate) {
			t.Errorf("NewRate(%v, %v) = %v", c[0], c[1], err)
		}
	}
	r := mustRate(t, 1000, 0).WithBurstDuration(50 * time.Millisecond)
	if r.PerSecond() != 1000 || r.Burst() != 50 {
		t.Errorf("rate %v burst %v", r.PerSecond(), r.Burst())
	}
	if got := mustRate(t, 1, 1e9).Burst(); got != DefaultMaxDebt.Seconds() {
		t.Errorf("burst beyond the cap = %v, want %v", got, DefaultMaxDebt.Seconds())
	}
}

// TestAtomicConcurrent: every charge lands while the rate changes.
func TestAtomicConcurrent(t *testing.T) {
	r0, r1 := mustRate(t, 1, 0), mustRate(t, 1, 2)
	var b Atomic
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				b.ChargeAt(t0, r0, 1)
				b.TakeAt(t0, r0, 0)
				if g == 0 && i%10 == 0 {
					b.SetRateAt(t0, r0, r0)
				}
			}
		}()
	}
	wg.Wait()
	if got := b.TokensAt(t0, r0); !near(got, -4000) {
		t.Errorf("tokens %v after 4000 of charges, want -4000", got)
	}
	b.SetRateAt(t0, r0, r1)
	if got := b.TokensAt(t0, r1); !near(got, -4000) {
		t.Errorf("tokens %v after a rate change, want -4000", got)
	}
}

// FuzzBucket: whatever the operations, the tokens never exceed the burst,
// the debt never exceeds the cap, a clock going backwards creates
// nothing, and AllowAt agrees with WaitAt.
func FuzzBucket(f *testing.F) {
	f.Add(10.0, 20.0, int64(0), 15.0, int64(100e6), 1000.0, int64(-5e8), 1.0)
	f.Add(1e-3, 0.0, int64(1), -1e9, int64(0), 1e300, int64(1), math.NaN())
	f.Fuzz(func(t *testing.T, rate, burst float64, d1 int64, c1 float64, d2 int64, c2 float64, d3 int64, need float64) {
		r, err := NewRate(rate, burst)
		if err != nil {
			return
		}
		r = r.WithMaxDebt(time.Hour)
		var b Bucket
		now, latest := t0, t0
		for _, s := range []struct {
			d int64
			c float64
		}{{d1, c1}, {d2, c2}, {d3, need}} {
			before := b.TokensAt(now, r)
			now = now.Add(time.Duration(s.d % int64(time.Hour)))
			if s.d < 0 && b.TokensAt(now, r) > before+1e-9*math.Abs(before) {
				t.Fatalf("clock back %v: tokens %v → %v", time.Duration(s.d), before, b.TokensAt(now, r))
			}
			if now.After(latest) {
				latest = now
			}
			b.ChargeAt(now, r, s.c)
			tk := b.TokensAt(now, r)
			if tk > r.Burst() || b.FullAt().Sub(latest) > time.Hour {
				t.Fatalf("tokens %v (burst %v), full %v after the latest instant", tk, r.Burst(), b.FullAt().Sub(latest))
			}
			if !(need >= 0) || need > r.Burst() {
				continue
			}
			w := b.WaitAt(now, r, need)
			if b.AllowAt(now, r, need) != (w == 0) || !b.AllowAt(now.Add(w), r, need) {
				t.Fatalf("wait %v for %v disagrees with AllowAt", w, need)
			}
		}
	})
}

func BenchmarkAtomic(b *testing.B) {
	r, _ := NewRate(1e9, 1e9)
	var a Atomic
	b.Run("AllowAt", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			a.AllowAt(t0, r, 0)
		}
	})
	b.Run("TakeAt", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			a.TakeAt(t0, r, 1)
		}
	})
}

func BenchmarkBucket(b *testing.B) {
	r, _ := NewRate(1e9, 1e9)
	var k Bucket
	b.ReportAllocs()
	for b.Loop() {
		if k.AllowAt(t0, r, 1) {
			k.ChargeAt(t0, r, 1)
		}
	}
}
