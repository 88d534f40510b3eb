package ratio_test

import (
	"fmt"
	"time"

	"github.com/qtop-dev/qtop/ratio"
)

func ExampleSignal() {
	s := ratio.NewSignal()
	t0 := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	// Five minutes of 20 ms requests, 100 per second...
	for i := 0; i < 5*60*100; i++ {
		s.ObserveAt(t0.Add(time.Duration(i)*10*time.Millisecond), 0.020)
	}
	now := t0.Add(5 * time.Minute)
	r, ok := s.ValueAt(now)
	fmt.Printf("steady: ratio %.2f ok %v degraded %v\n", r, ok, s.DegradedAt(now))
	// ...then latency triples for 10 seconds.
	for i := 0; i < 10*100; i++ {
		s.ObserveAt(now.Add(time.Duration(i)*10*time.Millisecond), 0.060)
	}
	now = now.Add(10 * time.Second)
	r, ok = s.ValueAt(now)
	fmt.Printf("tripled: ratio %.2f ok %v degraded %v\n", r, ok, s.DegradedAt(now))
	// Output:
	// steady: ratio 1.00 ok true degraded false
	// tripled: ratio 0.33 ok true degraded true
}

func ExampleHistogram() {
	var h ratio.Histogram
	for i := 1; i <= 1000; i++ {
		h.ObserveDuration(time.Duration(i) * time.Millisecond)
	}
	// Each quantile is within 1% of the exact 0.500, 0.950 and 0.990 s.
	fmt.Printf("count %d, p50 %.3f s, p95 %.3f s, p99 %.3f s\n",
		h.Count(), h.Quantile(0.5), h.Quantile(0.95), h.Quantile(0.99))
	// Output:
	// count 1000, p50 0.505 s, p95 0.954 s, p99 0.991 s
}

func ExampleP2() {
	e := ratio.NewP2(0.5)
	for _, x := range []float64{3, 1, 2} {
		e.Add(x)
	}
	fmt.Println(e.Value())
	// Output:
	// 2
}

func ExampleWindow() {
	w := ratio.NewWindow(10*time.Second, 10)
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
	var h ratio.Histogram
	for i := 0; i < 1000; i++ {
		h.Observe(0.012)
	}
	h.Observe(0.250)
	b, _ := h.MarshalBinary()

	var got ratio.Histogram
	if err := got.UnmarshalBinary(b); err != nil {
		fmt.Println(err)
		return
	}
	var merged ratio.Histogram
	merged.Merge(&got)
	merged.Merge(&got)
	fmt.Printf("%d bytes; merged %d observations; dense array of %d buckets\n",
		len(b), merged.Count(), len(merged.Dense()))

	err := got.UnmarshalBinary(b[:len(b)-1])
	fmt.Println(err)
	// Output:
	// 17 bytes; merged 2002 observations; dense array of 1154 buckets
	// ratio: corrupt encoding: truncated count of bucket 649
}

// A Sparse histogram holds only the non-empty buckets of a Histogram and
// merges like one: the quantiles are the dense histogram's.
func ExampleSparse() {
	var h ratio.Histogram
	for _, ms := range []float64{3, 5, 8, 13, 120} {
		h.Observe(ms / 1000)
	}
	var a, b ratio.Sparse
	a.Load(&h)
	b.Merge(&a)
	b.Merge(&a)
	fmt.Println(b.Count(), b.Len(), b.Quantile(0.5) == h.Quantile(0.5))
	// Output: 10 5 true
}
