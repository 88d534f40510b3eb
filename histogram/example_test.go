package histogram_test

import (
	"fmt"
	"time"

	"github.com/qtop-dev/qtop/histogram"
)

func ExampleHistogram() {
	var h histogram.Histogram
	for i := 1; i <= 1000; i++ {
		h.ObserveDuration(time.Duration(i) * time.Millisecond)
	}
	// Each quantile is within 1% of the exact 0.500, 0.950 and 0.990 s.
	fmt.Printf("count %d, p50 %.3f s, p95 %.3f s, p99 %.3f s\n",
		h.Count(), h.Quantile(0.5), h.Quantile(0.95), h.Quantile(0.99))
	// Output:
	// count 1000, p50 0.505 s, p95 0.954 s, p99 0.991 s
}

func ExampleWindow() {
	w := histogram.NewWindow(10*time.Second, 10)
	t0 := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	for i := 0; i < 20; i++ { // one request a second for 20 s, slower and slower
		w.ObserveAt(t0.Add(time.Duration(i)*time.Second), float64(i+1)/100)
	}
	now := t0.Add(19 * time.Second)
	fmt.Printf("last 10 s: %d requests, p50 %.3f s\n", w.CountAt(now), w.QuantileAt(now, 0.5))
	// Output:
	// last 10 s: 10 requests, p50 0.150 s
}

// A process sends its histogram in a report; the collector merges it, and
// the store keeps it as a dense array that ClickHouse sums with sumForEach.
func ExampleHistogram_MarshalBinary() {
	var h histogram.Histogram
	for i := 0; i < 1000; i++ {
		h.Observe(0.012)
	}
	h.Observe(0.250)
	b, _ := h.MarshalBinary()

	var got histogram.Histogram
	if err := got.UnmarshalBinary(b); err != nil {
		fmt.Println(err)
		return
	}
	var merged histogram.Histogram
	merged.Merge(&got)
	merged.Merge(&got)
	fmt.Printf("%d bytes; merged %d observations; dense array of %d buckets\n",
		len(b), merged.Count(), len(merged.Dense()))

	err := got.UnmarshalBinary(b[:len(b)-1])
	fmt.Println(err)
	// Output:
	// 17 bytes; merged 2002 observations; dense array of 1154 buckets
	// histogram: corrupt encoding: truncated count of bucket 649
}

// A Sparse histogram holds only the non-empty buckets of a Histogram and
// merges like one: the quantiles are the dense histogram's.
func ExampleSparse() {
	var h histogram.Histogram
	for _, ms := range []float64{3, 5, 8, 13, 120} {
		h.Observe(ms / 1000)
	}
	var a, b histogram.Sparse
	a.Load(&h)
	b.Merge(&a)
	b.Merge(&a)
	fmt.Println(b.Count(), b.Len(), b.Quantile(0.5) == h.Quantile(0.5))
	// Output: 10 5 true
}
