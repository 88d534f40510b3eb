package histogram

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

// A 10 s window in 10 slots of 1 s, step by step.
func TestWindowSteps(t *testing.T) {
	w := NewWindow(10*time.Second, 10)
	type step struct {
		at      time.Duration
		observe float64 // seconds; 0 means only check
		count   uint64  // CountAt(at) after the step
	}
	steps := []step{
		{0, 0.010, 1},                                // t0
		{500 * time.Millisecond, 0.010, 2},           // same slot
		{time.Second, 0.020, 3},                      // next slot
		{9*time.Second + 999*time.Millisecond, 0, 3}, // the window still holds slot 0
		{10 * time.Second, 0, 1},                     // slot 0 (two observations) expires
		{10*time.Second + 500*time.Millisecond, 0.030, 2},
		{11 * time.Second, 0, 1},                      // slot 1 expires
		{19*time.Second + 900*time.Millisecond, 0, 1}, // slot 10 still in
		{20 * time.Second, 0, 0},                      // everything expired
		{21 * time.Second, 0.040, 1},                  // the ring is reused
	}
	for i, s := range steps {
		now := at(s.at)
		if s.observe != 0 {
			w.ObserveAt(now, s.observe)
		}
		if got := w.CountAt(now); got != s.count {
			t.Fatalf("t%d (%v): CountAt = %d, want %d", i, s.at, got, s.count)
		}
	}
	if q := w.QuantileAt(at(21*time.Second), 0.5); relErr(q, 0.040) > RelativeAccuracy {
		t.Fatalf("p50 %v, want 0.040", q)
	}
}

func TestWindowEmpty(t *testing.T) {
	w := NewWindow(time.Minute, 6)
	if w.CountAt(t0) != 0 || w.QuantileAt(t0, 0.95) != 0 || w.HistogramAt(t0).Count() != 0 {
		t.Fatal("new window not empty")
	}
	if w.Span() != time.Minute || w.Slots() != 6 {
		t.Fatalf("Span %v Slots %d", w.Span(), w.Slots())
	}
}

// Observations arriving a little out of order (as when callers read the
// clock before taking a lock) land in the slot of their own time.
func TestWindowSmallBackwardsStep(t *testing.T) {
	w := NewWindow(10*time.Second, 10)
	w.ObserveAt(at(5*time.Second), 0.1)
	w.ObserveAt(at(3*time.Second), 0.2) // 2 s back: slot 3
	if c := w.CountAt(at(5 * time.Second)); c != 2 {
		t.Fatalf("count %d, want 2", c)
	}
	// The late observation expires with slot 3, before the other.
	if c := w.CountAt(at(13 * time.Second)); c != 1 {
		t.Fatalf("at 13 s: count %d, want 1", c)
	}
	// A query from before the newest observation answers for the newest.
	if c := w.CountAt(at(4 * time.Second)); c != 2 {
		t.Fatalf("query 1 s back: count %d, want 2", c)
	}
}

// A clock that jumps back by more than the span re-bases the window:
// nothing is lost and the window ages from the new time.
func TestWindowJumpBackwards(t *testing.T) {
	w := NewWindow(10*time.Second, 10)
	for s := 0; s < 10; s++ {
		w.ObserveAt(at(time.Duration(s)*time.Second), 0.010)
	}
	// The clock steps back one hour.
	back := at(9*time.Second - time.Hour)
	if c := w.CountAt(back); c != 10 {
		t.Fatalf("query after the jump: count %d, want 10", c)
	}
	w.ObserveAt(back, 0.050)
	if c := w.CountAt(back); c != 11 {
		t.Fatalf("after the jump: count %d, want 11 (nothing lost)", c)
	}
	// The old data now ages in the new timeline: one slot per second.
	if c := w.CountAt(back.Add(time.Second)); c != 10 {
		t.Fatalf("1 s after the jump: count %d, want 10", c)
	}
	if c := w.CountAt(back.Add(9 * time.Second)); c != 2 {
		t.Fatalf("9 s after the jump: count %d, want 2", c)
	}
	if c := w.CountAt(back.Add(10 * time.Second)); c != 0 {
		t.Fatalf("10 s after the jump: count %d, want 0", c)
	}
	w.ObserveAt(back.Add(10*time.Second), 0.020)
	if q := w.QuantileAt(back.Add(10*time.Second), 1); relErr(q, 0.020) > RelativeAccuracy {
		t.Fatalf("new data after the jump: p100 %v", q)
	}
	// Time then runs normally: going back to the original timeline is a
	// jump forward of an hour, which empties the window.
	if c := w.CountAt(at(time.Hour)); c != 0 {
		t.Fatalf("back in the old timeline: count %d", c)
	}
}

// A clock far in the future expires everything; observations go on.
func TestWindowJumpForward(t *testing.T) {
	w := NewWindow(5*time.Minute, 30)
	for s := 0; s < 300; s++ {
		w.ObserveAt(at(time.Duration(s)*time.Second), 0.010)
	}
	if c := w.CountAt(at(299 * time.Second)); c != 300 {
		t.Fatalf("count %d, want 300", c)
	}
	far := at(1000 * time.Hour)
	if c := w.CountAt(far); c != 0 {
		t.Fatalf("far forward: count %d, want 0", c)
	}
	w.ObserveAt(far, 0.5)
	if c, q := w.CountAt(far), w.QuantileAt(far, 0.5); c != 1 || relErr(q, 0.5) > RelativeAccuracy {
		t.Fatalf("after the jump: count %d p50 %v", c, q)
	}
	// A query from before the jump answers for the newest instant.
	if c := w.CountAt(at(0)); c != 1 {
		t.Fatalf("query from the past: count %d", c)
	}
}

func TestWindowBeforeUnixEpoch(t *testing.T) {
	w := NewWindow(10*time.Second, 10)
	old := time.Date(1969, 12, 31, 23, 59, 55, 500, time.UTC)
	w.ObserveAt(old, 0.1)
	w.ObserveAt(old.Add(time.Second), 0.1)
	if c := w.CountAt(old.Add(time.Second)); c != 2 {
		t.Fatalf("count %d across the epoch, want 2", c)
	}
	if c := w.CountAt(old.Add(10 * time.Second)); c != 1 {
		t.Fatalf("count %d after 10 s, want 1", c)
	}
}

func TestWindowQuantileMatchesMerge(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	w := NewWindow(time.Minute, 12)
	now := t0
	for i := 0; i < 20000; i++ {
		now = now.Add(time.Duration(r.IntN(10)) * time.Millisecond)
		w.ObserveAt(now, 0.005*math.Exp(r.NormFloat64()))
	}
	h := w.HistogramAt(now)
	if h.Count() != w.CountAt(now) || h.Count() == 0 {
		t.Fatalf("HistogramAt count %d, CountAt %d", h.Count(), w.CountAt(now))
	}
	for _, q := range []float64{0, 0.1, 0.5, 0.95, 0.99, 1} {
		if a, b := w.QuantileAt(now, q), h.Quantile(q); a != b {
			t.Fatalf("q=%v: QuantileAt %v, merged %v", q, a, b)
		}
	}
}

func TestWindowMergeAt(t *testing.T) {
	w := NewWindow(10*time.Second, 10)
	var h Histogram
	for i := 1; i <= 100; i++ {
		h.Observe(float64(i) / 1000)
	}
	w.MergeAt(at(0), &h)
	w.MergeAt(at(5*time.Second), &h)
	if c := w.CountAt(at(5 * time.Second)); c != 200 {
		t.Fatalf("count %d, want 200", c)
	}
	if c := w.CountAt(at(10 * time.Second)); c != 100 {
		t.Fatalf("count %d after the first expired, want 100", c)
	}
	if h.Count() != 100 {
		t.Fatal("MergeAt changed its argument")
	}
	w.Reset()
	if w.CountAt(at(10*time.Second)) != 0 {
		t.Fatal("Reset kept observations")
	}
}

func TestNewWindowRejectsBadArguments(t *testing.T) {
	for _, c := range []struct {
		span  time.Duration
		slots int
	}{{0, 10}, {-time.Second, 10}, {time.Second, 0}, {time.Second, -1}, {10, 11}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewWindow(%v, %d) did not panic", c.span, c.slots)
				}
			}()
			NewWindow(c.span, c.slots)
		}()
	}
}

func TestWindowAllocs(t *testing.T) {
	w := NewWindow(10*time.Second, 10)
	now := t0
	if a := testing.AllocsPerRun(1000, func() {
		now = now.Add(time.Millisecond)
		w.ObserveAt(now, 0.01)
	}); a != 0 {
		t.Errorf("ObserveAt allocates %v", a)
	}
	if a := testing.AllocsPerRun(100, func() { _ = w.QuantileAt(now, 0.95) }); a != 0 {
		t.Errorf("QuantileAt allocates %v", a)
	}
}

// Against a model: with the clock moving forward and jittering back by
// less than the span, the window holds exactly the observations whose slot
// lies within slots of the newest slot seen (or of the query's, if later).
func TestWindowMatchesModel(t *testing.T) {
	r := rand.New(rand.NewPCG(33, 34))
	const slots = 8
	slot := 250 * time.Millisecond
	w := NewWindow(slot*slots, slots)
	type obs struct {
		epoch int64
		v     float64
	}
	var all []obs
	head := t0.UnixNano() / int64(slot)
	now := t0
	for step := 0; step < 20000; step++ {
		switch k := r.IntN(10); {
		case k < 6: // forward a little
			now = now.Add(time.Duration(r.IntN(int(slot))))
		case k < 8: // back, within the span
			now = now.Add(-time.Duration(r.IntN(int(slot * (slots - 1)))))
		case k < 9: // forward by a lot
			now = now.Add(time.Duration(r.IntN(int(3 * slot * slots))))
		}
		e := now.UnixNano() / int64(slot)
		if r.IntN(3) > 0 && e > head-slots {
			v := 0.001 * math.Exp(2*r.NormFloat64())
			w.ObserveAt(now, v)
			all = append(all, obs{e, v})
			head = max(head, e)
		}
		q := max(e, head)
		var want Histogram
		for _, o := range all {
			if o.epoch > q-slots && o.epoch <= q {
				want.Observe(o.v)
			}
		}
		if got := w.CountAt(now); got != want.Count() {
			t.Fatalf("step %d: CountAt %d, model %d", step, got, want.Count())
		}
		if got, exp := w.QuantileAt(now, 0.9), want.Quantile(0.9); got != exp {
			t.Fatalf("step %d: p90 %v, model %v", step, got, exp)
		}
		if len(all) > 5000 { // keep the model small
			all = all[len(all)-1000:]
		}
	}
	if len(all) < 1000 {
		t.Fatalf("only %d observations made: the model test tests little", len(all))
	}
}

// Whatever the sequence of instants, a window never panics, never holds
// more than it was given, and its quantile agrees with its merged slots.
func FuzzWindow(f *testing.F) {
	f.Add([]byte{0, 10, 200, 3, 128, 7, 255, 255, 1})
	f.Add([]byte{255, 0, 255, 0, 1, 2, 3})
	f.Fuzz(func(t *testing.T, ops []byte) {
		w := NewWindow(4*time.Second, 4)
		now := t0
		var given uint64
		for i, b := range ops {
			// The high bits pick a move, the low bits its size.
			size := time.Duration(b&31) * 300 * time.Millisecond
			switch b >> 5 {
			case 0, 1, 2:
				now = now.Add(size)
			case 3:
				now = now.Add(-size)
			case 4:
				now = now.Add(time.Duration(b&31) * time.Hour)
			case 5:
				now = now.Add(-time.Duration(b&31) * time.Hour)
			}
			if i%2 == 0 {
				w.ObserveAt(now, float64(b)/100)
				given++
			}
			c := w.CountAt(now)
			if c > given {
				t.Fatalf("window holds %d of %d observations", c, given)
			}
			h := w.HistogramAt(now)
			if h.Count() != c || w.QuantileAt(now, 0.95) != h.Quantile(0.95) {
				t.Fatal("QuantileAt disagrees with the merged slots")
			}
		}
	})
}
