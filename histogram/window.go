package histogram

import (
	"fmt"
	"time"
)

// Window is a sliding window of latencies: a ring of slots sub-window
// histograms, each covering span/slots. At an instant now it holds the
// observations of the slot containing now and of the slots−1 slots before
// it, so it covers between span−span/slots and span of the past.
//
// Time is an argument: a Window never reads the clock. A clock that moves
// forward expires old slots; one that jumps far forward empties the window.
// A clock that goes back by less than the span puts observations in the
// slot of their time. One that jumps back by more than the span (a clock
// step, or data older than the window) re-bases the window: its slots keep
// their contents and age from the new time, so nothing is lost and the
// window goes on in the new timeline. Queries at an instant before the
// newest observation answer for the newest observation's instant.
//
// A Window is not safe for concurrent use: callers shard or lock it.
// Instants must lie between the years 1678 and 2262 (time.Time.UnixNano).
type Window struct {
	slot    int64 // slot width in nanoseconds
	hist    []Histogram
	epoch   []int64 // epoch of each slot's contents
	offset  int64   // slot of epoch e is at (e+offset) mod len
	head    int64   // newest epoch seen
	started bool

	// The head slot's time range [curLo, curHi) in Unix nanoseconds and
	// its index: most observations land there, and finding it takes no
	// division.
	curLo, curHi int64
	curIdx       int
}

// NewWindow returns an empty window of span made of slots sub-windows. It
// panics if span or slots is not positive or span/slots is under a
// nanosecond, as those are programming errors.
func NewWindow(span time.Duration, slots int) *Window {
	if span <= 0 || slots <= 0 || span/time.Duration(slots) <= 0 {
		panic(fmt.Sprintf("histogram: NewWindow(%v, %d): span and slots must be positive, span/slots at least 1ns", span, slots))
	}
	return &Window{
		slot:  int64(span / time.Duration(slots)),
		hist:  make([]Histogram, slots),
		epoch: make([]int64, slots),
	}
}

// Span returns the time the window covers.
func (w *Window) Span() time.Duration { return time.Duration(w.slot) * time.Duration(len(w.hist)) }

// Slots returns the number of sub-windows.
func (w *Window) Slots() int { return len(w.hist) }

func (w *Window) epochOf(now time.Time) int64 {
	t := now.UnixNano()
	e := t / w.slot
	if t%w.slot < 0 {
		e--
	}
	return e
}

func (w *Window) index(e int64) int {
	n := int64(len(w.hist))
	i := (e + w.offset) % n
	if i < 0 {
		i += n
	}
	return int(i)
}

// at returns the histogram of the slot of instant now, ready to add to.
func (w *Window) at(now time.Time) *Histogram {
	if t := now.UnixNano(); t >= w.curLo && t < w.curHi {
		return &w.hist[w.curIdx]
	}
	e := w.epochOf(now)
	n := int64(len(w.hist))
	switch {
	case !w.started:
		w.started = true
		w.head = e
		for i := range w.epoch {
			w.epoch[i] = e - n // not live
		}
	case e > w.head:
		w.head = e
	case e <= w.head-n:
		// Back by more than the span: re-base. Shift every epoch by d and the
		// offset by −d so each slot keeps its place in the ring.
		d := w.head - e
		for i := range w.epoch {
			w.epoch[i] -= d
		}
		w.offset = ((w.offset+d)%n + n) % n
		w.head = e
	}
	i := w.index(e)
	if w.epoch[i] != e {
		w.hist[i].Reset()
		w.epoch[i] = e
	}
	if e == w.head {
		w.curLo, w.curHi, w.curIdx = e*w.slot, e*w.slot+w.slot, i
	}
	return &w.hist[i]
}

// ObserveAt adds one observation in seconds made at instant now.
func (w *Window) ObserveAt(now time.Time, seconds float64) {
	w.at(now).Observe(seconds)
}

// MergeAt adds every observation of h to the slot of instant now.
func (w *Window) MergeAt(now time.Time, h *Histogram) {
	w.at(now).Merge(h)
}

// MergeSparseAt adds every observation of h to the slot of instant now,
// bucket by bucket, with no dense histogram in between.
func (w *Window) MergeSparseAt(now time.Time, h *Sparse) {
	if h.Len() == 0 {
		return
	}
	h.Buckets(w.at(now).AddBucket)
}

// live calls fn for every slot inside the window at instant now.
func (w *Window) live(now time.Time, fn func(h *Histogram)) {
	if !w.started {
		return
	}
	e := max(w.epochOf(now), w.head)
	n := int64(len(w.hist))
	for i := range w.hist {
		if ep := w.epoch[i]; ep > e-n && ep <= e {
			fn(&w.hist[i])
		}
	}
}

// CountAt returns the number of observations in the window at instant now.
func (w *Window) CountAt(now time.Time) uint64 {
	var c uint64
	w.live(now, func(h *Histogram) { c += h.count })
	return c
}

// QuantileAt returns the q-quantile of the observations in the window at
// instant now, as Histogram.Quantile would for their merge; 0 when empty.
// It does not allocate (up to 64 slots).
func (w *Window) QuantileAt(now time.Time, q float64) float64 {
	var (
		buf    [64]*Histogram
		hs     = buf[:0]
		count  uint64
		groups [numGroups]uint64
	)
	if !w.started {
		return 0
	}
	e := max(w.epochOf(now), w.head)
	n := int64(len(w.hist))
	for i := range w.hist {
		if ep := w.epoch[i]; ep > e-n && ep <= e && w.hist[i].count != 0 {
			h := &w.hist[i]
			hs = append(hs, h)
			count += h.count
			for g, c := range h.groups {
				groups[g] += c
			}
		}
	}
	if count == 0 {
		return 0
	}
	at := func(i int) uint64 {
		var c uint64
		for _, h := range hs {
			c += h.counts[i]
		}
		return c
	}
	rank := rankOf(count, q)
	if rank <= count/2 {
		var cum uint64
		for g := 0; g < numGroups; g++ {
			if cum+groups[g] < rank {
				cum += groups[g]
				continue
			}
			for i := g << groupShift; i < NumBuckets; i++ {
				if cum += at(i); cum >= rank {
					return layout.value[i]
				}
			}
		}
	} else {
		need := count - rank + 1
		var cum uint64
		for g := numGroups - 1; g >= 0; g-- {
			if cum+groups[g] < need {
				cum += groups[g]
				continue
			}
			for i := min(g<<groupShift+groupSize, NumBuckets) - 1; i >= 0; i-- {
				if cum += at(i); cum >= need {
					return layout.value[i]
				}
			}
		}
	}
	return layout.value[NumBuckets-1]
}

// HistogramAt returns a new histogram of the observations in the window at
// instant now.
func (w *Window) HistogramAt(now time.Time) *Histogram {
	m := new(Histogram)
	w.live(now, func(h *Histogram) { m.Merge(h) })
	return m
}

// Reset empties the window and forgets its time.
func (w *Window) Reset() {
	for i := range w.hist {
		w.hist[i].Reset()
	}
	w.offset, w.head, w.started = 0, 0, false
	w.curLo, w.curHi, w.curIdx = 0, 0, 0
}
