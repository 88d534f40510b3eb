package ratio

import (
	"github.com/qtop-dev/qtop/histogram"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// drive observes perSecond latencies a second, evenly spaced, from from
// (inclusive) to to (exclusive), drawn from lat.
func drive(s *Signal, from, to time.Time, perSecond int, lat func() float64) {
	step := time.Second / time.Duration(perSecond)
	for now := from; now.Before(to); now = now.Add(step) {
		s.ObserveAt(now, lat())
	}
}

func lognormal(r *rand.Rand, median, sigma float64) func() float64 {
	return func() float64 { return median * math.Exp(sigma*r.NormFloat64()) }
}

// After a 3× latency step the signal crosses its threshold within one short
// window (10 s), and the ratio settles near 1/3.
func TestSignalStepCrossesWithinShortWindow(t *testing.T) {
	for _, sigma := range []float64{0.3, 0.6, 1.0} {
		r := rand.New(rand.NewPCG(41, uint64(sigma*10)))
		s := NewSignal()
		base := lognormal(r, 0.020, sigma)
		step := at(10 * time.Minute)
		drive(s, t0, step, 100, base)
		if s.DegradedAt(step) {
			t.Fatalf("σ=%v: degraded before the step", sigma)
		}
		v, ok := s.ValueAt(step)
		if !ok || math.Abs(v-1) > 0.15 {
			t.Fatalf("σ=%v: before the step ratio %v ok %v, want about 1", sigma, v, ok)
		}
		tripled := func() float64 { return 3 * base() }
		crossed := time.Duration(-1)
		for d := time.Duration(0); d <= 10*time.Second; d += 100 * time.Millisecond {
			now := step.Add(d)
			drive(s, now, now.Add(100*time.Millisecond), 100, tripled)
			if s.DegradedAt(now.Add(100 * time.Millisecond)) {
				crossed = d + 100*time.Millisecond
				break
			}
		}
		if crossed < 0 {
			v, _ := s.ValueAt(step.Add(10 * time.Second))
			t.Fatalf("σ=%v: not degraded 10 s after a 3× step (ratio %v)", sigma, v)
		}
		drive(s, step.Add(crossed), step.Add(10*time.Second), 100, tripled)
		v, _ = s.ValueAt(step.Add(10 * time.Second))
		if v < 0.25 || v > 0.45 {
			t.Errorf("σ=%v: ratio %v one short window after a 3× step, want about 1/3", sigma, v)
		}
		t.Logf("σ=%v: crossed %v after the step; ratio %.3f after 10 s", sigma, crossed, v)
	}
}

// An hour of stationary lognormal latency never crosses the threshold.
func TestSignalStationaryHourNeverCrosses(t *testing.T) {
	for _, c := range []struct {
		sigma      float64
		perSecond  int
		minSamples uint64
	}{
		{0.5, 30, DefaultMinSamples},
		{1.0, 30, DefaultMinSamples},
		{1.0, 200, DefaultMinSamples},
		{1.5, 70, 600}, // a heavier tail needs more samples: 250σ²
	} {
		r := rand.New(rand.NewPCG(43, uint64(c.perSecond)))
		s := NewSignal(WithMinSamples(c.minSamples))
		lat := lognormal(r, 0.015, c.sigma)
		lowest := math.Inf(1)
		for sec := 0; sec < 3600; sec++ {
			from := at(time.Duration(sec) * time.Second)
			drive(s, from, from.Add(time.Second), c.perSecond, lat)
			now := from.Add(time.Second)
			if s.DegradedAt(now) {
				v, _ := s.ValueAt(now)
				t.Fatalf("σ=%v %d/s: degraded at %v with ratio %v", c.sigma, c.perSecond, now.Sub(t0), v)
			}
			if v, ok := s.ValueAt(now); ok {
				lowest = min(lowest, v)
			}
		}
		t.Logf("σ=%v %d/s: lowest ratio in an hour %.3f", c.sigma, c.perSecond, lowest)
	}
}

// Low traffic with a heavy tail: the ratio is unknown and no alarm rises.
func TestSignalLowTrafficRaisesNoAlarm(t *testing.T) {
	r := rand.New(rand.NewPCG(47, 48))
	s := NewSignal()
	for sec := 0; sec < 3600; sec++ {
		from := at(time.Duration(sec) * time.Second)
		lat := 0.010 * math.Exp(2*r.NormFloat64())
		if sec%97 == 0 {
			lat = 30 // a pathological outlier now and then
		}
		s.ObserveAt(from, lat)
		s.ObserveAt(from.Add(500*time.Millisecond), 0.010*math.Exp(2*r.NormFloat64()))
		if s.DegradedAt(from.Add(time.Second)) {
			t.Fatalf("degraded at %v on 2 requests/s", time.Duration(sec)*time.Second)
		}
		if _, ok := s.ValueAt(from.Add(time.Second)); ok {
			t.Fatal("ratio known with 20 samples in the short window")
		}
	}
}

func TestSignalMinSamples(t *testing.T) {
	s := NewSignal(WithMinSamples(50))
	for i := 0; i < 49; i++ {
		s.ObserveAt(at(time.Duration(i)*time.Millisecond), 0.01)
	}
	if r, ok := s.ValueAt(at(time.Second)); ok || r != 0 {
		t.Fatalf("49 samples: ratio %v ok %v", r, ok)
	}
	s.ObserveAt(at(49*time.Millisecond), 0.01)
	if r, ok := s.ValueAt(at(time.Second)); !ok || r != 1 {
		t.Fatalf("50 samples: ratio %v ok %v", r, ok)
	}
	// An empty signal is unknown even with no minimum.
	if _, ok := NewSignal(WithMinSamples(0)).ValueAt(t0); ok {
		t.Fatal("empty signal known")
	}
}

// Hysteresis, step by step: the median over 5 min against the median over
// 10 s (the median, so that the long window stays at the baseline while the
// short one moves), degraded below 0.5, healthy again above 0.65.
func TestSignalHysteresisSteps(t *testing.T) {
	s := NewSignal(WithQuantile(0.5))
	const base = 0.100
	drive(s, t0, at(5*time.Minute), 100, func() float64 { return base })
	steps := []struct {
		latency  float64 // over the next 10 s
		ratio    float64 // at the end of them
		degraded bool
	}{
		{0.100, 1.0, false},
		{0.190, 0.526, false}, // above enter
		{0.210, 0.476, true},  // below enter: degraded
		{0.170, 0.588, true},  // between enter and exit: holds
		{0.160, 0.625, true},  // still holds
		{0.140, 0.714, false}, // above exit: healthy
		{0.190, 0.526, false}, // between the two again: holds healthy
		{0.250, 0.400, true},
	}
	from := at(5 * time.Minute)
	for i, st := range steps {
		lat := st.latency
		drive(s, from, from.Add(10*time.Second), 100, func() float64 { return lat })
		now := from.Add(10*time.Second - time.Millisecond)
		v, ok := s.ValueAt(now)
		if !ok || math.Abs(v-st.ratio)/st.ratio > 2*histogram.RelativeAccuracy {
			t.Fatalf("t%d: ratio %v ok %v, want %v", i, v, ok, st.ratio)
		}
		if got := s.DegradedAt(now); got != st.degraded {
			t.Fatalf("t%d: ratio %.3f: degraded %v, want %v", i, v, got, st.degraded)
		}
		from = from.Add(10 * time.Second)
	}
}

// While the ratio is unknown the state holds: an outage that stops
// completions does not clear a degradation by itself.
func TestSignalStateHoldsWhenUnknown(t *testing.T) {
	s := NewSignal()
	drive(s, t0, at(5*time.Minute), 100, func() float64 { return 0.02 })
	drive(s, at(5*time.Minute), at(5*time.Minute+10*time.Second), 100, func() float64 { return 0.08 })
	if !s.DegradedAt(at(5*time.Minute + 10*time.Second - time.Millisecond)) {
		t.Fatal("not degraded after a 4× step")
	}
	if _, ok := s.ValueAt(at(6 * time.Minute)); ok {
		t.Fatal("ratio known with no recent traffic")
	}
	if !s.DegradedAt(at(6 * time.Minute)) {
		t.Fatal("state cleared without evidence")
	}
	// Traffic returns, healthy: the state clears.
	drive(s, at(10*time.Minute), at(10*time.Minute+10*time.Second), 100, func() float64 { return 0.02 })
	if s.DegradedAt(at(10*time.Minute + 10*time.Second - time.Millisecond)) {
		t.Fatal("still degraded after healthy traffic")
	}
}

// The collector's path: each second, four processes report a histogram of
// their requests, merged into the signal.
func TestSignalMergeAtStep(t *testing.T) {
	r := rand.New(rand.NewPCG(49, 50))
	s := NewSignal()
	report := func(now time.Time, factor float64) {
		for p := 0; p < 4; p++ {
			var h histogram.Histogram
			for i := 0; i < 25; i++ {
				h.Observe(factor * 0.030 * math.Exp(0.5*r.NormFloat64()))
			}
			s.MergeAt(now, &h)
		}
	}
	for sec := 1; sec <= 600; sec++ {
		report(at(time.Duration(sec)*time.Second), 1)
	}
	if v, ok := s.ValueAt(at(600 * time.Second)); !ok || math.Abs(v-1) > 0.15 {
		t.Fatalf("steady: ratio %v ok %v", v, ok)
	}
	crossed := 0
	for sec := 601; sec <= 610; sec++ {
		now := at(time.Duration(sec) * time.Second)
		report(now, 3)
		if s.DegradedAt(now) {
			crossed = sec - 600
			break
		}
	}
	if crossed == 0 {
		t.Fatal("merged reports: no crossing within 10 s of a 3× step")
	}
	t.Logf("merged reports: crossed %d s after the step", crossed)
}

func TestSignalConcurrentUse(t *testing.T) {
	s := NewSignal(WithMinSamples(10))
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var h histogram.Histogram
			h.Observe(0.01)
			for i := 0; i < 2000; i++ {
				now := at(time.Duration(i) * time.Millisecond)
				switch i % 4 {
				case 0:
					s.MergeAt(now, &h)
				case 1:
					s.ValueAt(now)
				case 2:
					s.DegradedAt(now)
				default:
					s.ObserveAt(now, 0.02)
				}
			}
		}()
	}
	wg.Wait()
	if _, ok := s.ValueAt(at(2 * time.Second)); !ok {
		t.Fatal("no value after concurrent observations")
	}
}

func TestNewSignalRejectsBadOptions(t *testing.T) {
	for name, opts := range map[string][]Option{
		"zero short":       {WithShortWindow(0)},
		"negative long":    {WithLongWindow(-time.Minute)},
		"long ≤ short":     {WithShortWindow(time.Minute), WithLongWindow(time.Minute)},
		"zero slots":       {WithSlots(0, 10)},
		"too many slots":   {WithShortWindow(10), WithLongWindow(100), WithSlots(20, 10)},
		"quantile 0":       {WithQuantile(0)},
		"quantile 1":       {WithQuantile(1)},
		"quantile NaN":     {WithQuantile(math.NaN())},
		"enter above exit": {WithThreshold(0.7, 0.5)},
		"enter 0":          {WithThreshold(0, 0.5)},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: NewSignal did not panic", name)
				}
			}()
			NewSignal(opts...)
		}()
	}
	// Valid non-defaults work.
	s := NewSignal(WithShortWindow(5*time.Second), WithLongWindow(time.Minute), WithSlots(5, 12),
		WithQuantile(0.99), WithThreshold(0.4, 0.4), WithMinSamples(1))
	if e, x := s.Thresholds(); e != 0.4 || x != 0.4 {
		t.Fatalf("Thresholds %v, %v", e, x)
	}
	if e, x := NewSignal().Thresholds(); e != DefaultEnter || x != DefaultExit {
		t.Fatalf("default Thresholds %v, %v", e, x)
	}
	s.ObserveAt(t0, 0.1)
	if v, ok := s.ValueAt(t0); !ok || v != 1 {
		t.Fatalf("custom signal: %v %v", v, ok)
	}
}

func TestSignalObserveAllocs(t *testing.T) {
	s := NewSignal()
	now := t0
	if a := testing.AllocsPerRun(1000, func() {
		now = now.Add(time.Millisecond)
		s.ObserveAt(now, 0.01)
	}); a != 0 {
		t.Errorf("ObserveAt allocates %v", a)
	}
	if a := testing.AllocsPerRun(100, func() { s.ValueAt(now) }); a != 0 {
		t.Errorf("ValueAt allocates %v", a)
	}
}

// MergeSparseAt gives the signal exactly what MergeAt of the same buckets
// gives: the same windows, the same ratio at every second.
func TestSignalMergeSparseAtSameAsDense(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	dense, sparse := NewSignal(), NewSignal()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	moved := 0.0
	for sec := range 900 {
		now := t0.Add(time.Duration(sec) * time.Second)
		var h histogram.Histogram
		med := 0.01
		if sec > 600 {
			med = 0.05 // a step: the ratio moves
		}
		for range 1 + rng.IntN(200) {
			h.Observe(lognormal(rng, med, 0.5)())
		}
		var s histogram.Sparse
		s.Load(&h)
		var fromBuckets histogram.Histogram // as a collector made it: the buckets only
		s.Buckets(fromBuckets.AddBucket)
		dense.MergeAt(now, &fromBuckets)
		sparse.MergeSparseAt(now, &s)
		sparse.MergeSparseAt(now, &histogram.Sparse{}) // nothing
		gv, gok := sparse.ValueAt(now)
		wv, wok := dense.ValueAt(now)
		if gv != wv || gok != wok || sparse.DegradedAt(now) != dense.DegradedAt(now) {
			t.Fatalf("second %d: ratio %v %v, want %v %v", sec, gv, gok, wv, wok)
		}
		if gok {
			moved = max(moved, math.Abs(math.Log(gv)))
		}
	}
	if moved < math.Log(1.5) {
		t.Fatalf("the step did not show: the ratio stayed within %v of 1", math.Exp(moved))
	}
}

// TestSignalCatchesUpWithLastingStep: the ratio is a change detector, not a
// level: after a lasting 3× step its long window takes in the new level and
// the ratio is healthy again within two minutes. This is why the alert
// rules do not hold the ratio for minutes: they compare the service's p95
// with the collector's hour baseline (qtop_collector_latency_baseline_p95_seconds).
func TestSignalCatchesUpWithLastingStep(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	s := NewSignal()
	base := lognormal(r, 0.020, 0.5)
	step := at(10 * time.Minute)
	drive(s, t0, step, 100, base)
	degraded, healthyAgain := time.Duration(-1), time.Duration(-1)
	for d := time.Second; d <= 5*time.Minute; d += time.Second {
		drive(s, step.Add(d-time.Second), step.Add(d), 100, func() float64 { return 3 * base() })
		switch deg := s.DegradedAt(step.Add(d)); {
		case deg && degraded < 0:
			degraded = d
		case !deg && degraded >= 0 && healthyAgain < 0:
			healthyAgain = d
		}
	}
	if degraded < 0 || degraded > 10*time.Second {
		t.Fatalf("degraded %v after the step, want within the short window", degraded)
	}
	if healthyAgain < 0 || healthyAgain > 2*time.Minute {
		t.Fatalf("healthy again %v after the step, want within 2 minutes (the long window catching up)", healthyAgain)
	}
	t.Logf("degraded after %v, healthy again after %v of a lasting 3× step", degraded, healthyAgain)
}
