package enforce

import (
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/ratio"
	"github.com/qtop-dev/qtop/tenant"
)

func TestPriceControllerSteps(t *testing.T) {
	p, err := newPriceController(PriceConfig{})
	if err != nil {
		t.Fatal(err)
	}
	inf := math.Inf(1)
	s := time.Second
	steps := []struct {
		at      time.Duration
		ratio   float64
		ok      bool
		changed bool
		level   int
		mult    [4]float64 // T0..T3
	}{
		{0, 1.0, true, false, 0, [4]float64{1, 1, 1, 1}},
		{0, 0.9, true, false, 0, [4]float64{1, 1, 1, 1}},                        // in the band: hold
		{0, 0.7, false, false, 0, [4]float64{1, 1, 1, 1}},                       // no signal: hold
		{s, 0.7, true, true, 1, [4]float64{1, 1, 1, 2}},                         // T3 first
		{s + 500*time.Millisecond, 0.7, true, false, 1, [4]float64{1, 1, 1, 2}}, // too soon
		{2 * s, 0.7, true, true, 2, [4]float64{1, 1, 1, 4}},
		{3 * s, 0.7, true, true, 3, [4]float64{1, 1, 1, 8}},
		{4 * s, 0.7, true, true, 4, [4]float64{1, 1, 1, inf}},   // T3 shed
		{5 * s, 0.3, true, true, 6, [4]float64{1, 1, 4, inf}},   // severe: two steps, now T2
		{6 * s, 0.85, true, false, 6, [4]float64{1, 1, 4, inf}}, // hysteresis band
		{7 * s, 0.3, true, true, 8, [4]float64{1, 1, inf, inf}},
		{8 * s, 0.3, true, true, 10, [4]float64{1, 4, inf, inf}},
		{9 * s, 0.3, true, true, 12, [4]float64{1, inf, inf, inf}},   // all but T0 shed
		{10 * s, 0.1, true, false, 12, [4]float64{1, inf, inf, inf}}, // T0 never
		{12 * s, 1.0, true, false, 12, [4]float64{1, inf, inf, inf}}, // recovery waits 5 s
		{14 * s, 1.0, true, true, 11, [4]float64{1, 8, inf, inf}},    // T1 recovers first
		{16 * s, 1.0, true, false, 11, [4]float64{1, 8, inf, inf}},   // one step per 5 s
		{19 * s, 1.0, true, true, 10, [4]float64{1, 4, inf, inf}},
		{20 * s, 0.9, true, false, 10, [4]float64{1, 4, inf, inf}},
		{25 * s, 0.7, true, true, 11, [4]float64{1, 8, inf, inf}},
		{24 * s, 1.0, true, false, 11, [4]float64{1, 8, inf, inf}}, // clock back: hold
	}
	for i, st := range steps {
		if got := p.UpdateAt(at(st.at), st.ratio, st.ok); got != st.changed {
			t.Errorf("step %d (%v, %v): changed = %v, want %v", i, st.at, st.ratio, got, st.changed)
		}
		if p.Level() != st.level {
			t.Errorf("step %d: level %d, want %d", i, p.Level(), st.level)
		}
		for ti, want := range st.mult {
			if got := p.Multiplier(tenant.T0 + tenant.Tier(ti)); got != want {
				t.Errorf("step %d: T%d multiplier %v, want %v", i, ti, got, want)
			}
		}
	}
	if !p.Shed(tenant.TierUnset) || p.Shed(tenant.T0) {
		t.Error("unset tier should read as T3, T0 never shed")
	}
	p.SetLevel(t0, -4)
	if p.Level() != 0 || p.Multiplier(tenant.T3) != 1 {
		t.Error("SetLevel did not clamp to rest")
	}
	p.SetLevel(t0, 100)
	if p.Level() != p.MaxLevel() {
		t.Error("SetLevel did not clamp to max")
	}
}

func TestPriceConfigErrors(t *testing.T) {
	for _, c := range []PriceConfig{
		{Steps: []float64{1}},
		{Steps: []float64{4, 2}},
		{Steps: []float64{2, math.Inf(1)}},
		{Enter: 0.9, Exit: 0.8},
		{Severe: 0.9, Enter: 0.8},
		{EscalateEvery: -1},
	} {
		if _, err := newPriceController(c); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v", c, err)
		}
	}
}

func TestPriceControllerConcurrent(t *testing.T) {
	p, _ := newPriceController(PriceConfig{EscalateEvery: time.Millisecond, RecoverEvery: time.Millisecond})
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				r := 0.3
				if (i/100)%2 == 1 {
					r = 1
				}
				p.UpdateAt(at(time.Duration(i)*time.Millisecond), r, true)
				_ = p.Multiplier(tenant.Tier(i % 5))
				if p.Multiplier(tenant.T0) != 1 {
					t.Error("T0 priced up")
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestEnforcerFollowsRatioSignal drives the Enforcer with the real latency
// ratio: steady latency, then latency tripling, then back.
func TestEnforcerFollowsRatioSignal(t *testing.T) {
	sig := ratio.NewSignal(ratio.WithShortWindow(2*time.Second), ratio.WithLongWindow(60*time.Second),
		ratio.WithSlots(4, 30), ratio.WithMinSamples(100))
	e, err := New(WithSignal(sig), WithEvalEvery(250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t3 := tenant.Tags{Tenant: "batch", Tier: tenant.T3}
	t0t := tenant.Tags{Tenant: "support", Tier: tenant.T0}
	feed := func(from, to time.Duration, latency time.Duration) {
		for d := from; d < to; d += 5 * time.Millisecond { // 200 per second
			now := at(d)
			e.ObserveAt(now, latency)
			e.ShedAt(now, t0t)
		}
	}
	feed(0, 60*time.Second, 10*time.Millisecond)
	if e.Price().Level() != 0 {
		t.Fatalf("steady latency escalated to %d", e.Price().Level())
	}
	feed(60*time.Second, 66*time.Second, 30*time.Millisecond)
	if !e.Price().Shed(tenant.T3) || e.Price().Multiplier(tenant.T0) != 1 {
		t.Fatalf("latency tripled: level %d, T3 ×%v", e.Price().Level(), e.Price().Multiplier(tenant.T3))
	}
	if d := e.ShedAt(at(66*time.Second), t3); d.Admitted() {
		t.Error("T3 admitted while shed")
	}
	// Latency back to normal: the long window still remembers the spike,
	// the ratio rises above 1 and prices come down one step per 5 s.
	feed(66*time.Second, 200*time.Second, 10*time.Millisecond)
	if e.Price().Level() != 0 {
		t.Errorf("level %d long after recovery", e.Price().Level())
	}
}
