package histogram

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// exactQuantile is the nearest-rank q-quantile of xs, the definition
// Histogram.Quantile follows: the observation of rank ⌈q·n⌉, at least 1.
func exactQuantile(xs []float64, q float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[rankOf(uint64(len(s)), q)-1]
}

func relErr(got, want float64) float64 { return math.Abs(got-want) / want }

func TestLayoutBoundsAgreeWithBucketIndex(t *testing.T) {
	for i := 1; i < NumBuckets; i++ {
		lo, _ := BucketBounds(i)
		if got := BucketIndex(lo); got != i {
			t.Fatalf("BucketIndex(lower bound of %d = %v) = %d", i, lo, got)
		}
		if got := BucketIndex(math.Nextafter(lo, 0)); got != i-1 {
			t.Fatalf("BucketIndex(just below lower bound of %d) = %d, want %d", i, got, i-1)
		}
	}
	if lo, hi := BucketBounds(0); lo != 0 || hi != MinSeconds {
		t.Errorf("BucketBounds(0) = %v, %v", lo, hi)
	}
	if lo, hi := BucketBounds(NumBuckets - 1); lo != MaxSeconds || !math.IsInf(hi, 1) {
		t.Errorf("BucketBounds(last) = %v, %v", lo, hi)
	}
	// Octave boundaries are exact powers of two.
	for k := 0; k <= octaves; k++ {
		lo, _ := BucketBounds(1 + k*perOctave)
		if want := math.Ldexp(1, minExp+k); lo != want {
			t.Errorf("bucket %d starts at %v, want 2^%d", 1+k*perOctave, lo, minExp+k)
		}
	}
}

func TestLayoutRelativeAccuracy(t *testing.T) {
	gamma := math.Exp(0.7 / perOctave)
	worst := 0.0
	for i := 1; i < NumBuckets-1; i++ {
		lo, hi := BucketBounds(i)
		if hi <= lo {
			t.Fatalf("bucket %d is empty: [%v, %v)", i, lo, hi)
		}
		if r := hi / lo; r > gamma*(1+1e-12) {
			t.Fatalf("bucket %d spans a ratio %v > γ = %v", i, r, gamma)
		}
		v := BucketValue(i)
		for _, x := range []float64{lo, math.Nextafter(hi, 0)} {
			e := relErr(v, x)
			worst = max(worst, e)
			if e > RelativeAccuracy {
				t.Fatalf("bucket %d: value %v is %.4f%% off %v", i, v, 100*e, x)
			}
		}
	}
	// The bound is tight: a looser layout would waste buckets.
	if worst < 0.9*RelativeAccuracy {
		t.Errorf("worst relative error %.4f%%, far below the bound: layout wastes buckets", 100*worst)
	}
	t.Logf("worst relative error %.4f%% over %d buckets", 100*worst, NumBuckets)
}

func TestBucketIndexMonotone(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		a := math.Exp(r.Float64()*36 - 18)
		b := a * (1 + r.Float64()*1e-3)
		if BucketIndex(a) > BucketIndex(b) {
			t.Fatalf("BucketIndex(%v) = %d > BucketIndex(%v) = %d", a, BucketIndex(a), b, BucketIndex(b))
		}
	}
}

func TestHistogramClampsOutOfRange(t *testing.T) {
	var h Histogram
	for _, v := range []float64{0, -1, math.NaN(), math.Inf(-1), 1e-9, MinSeconds / 2} {
		h.Observe(v)
	}
	for _, v := range []float64{MaxSeconds, 7200, math.Inf(1), math.MaxFloat64} {
		h.Observe(v)
	}
	if h.Count() != 10 {
		t.Fatalf("Count = %d, want 10: clamped values must be counted", h.Count())
	}
	got := map[int]uint64{}
	h.Buckets(func(i int, c uint64) { got[i] = c })
	if got[0] != 6 || got[NumBuckets-1] != 4 || len(got) != 2 {
		t.Fatalf("buckets %v, want 6 in underflow and 4 in overflow", got)
	}
	if s := h.Sum(); math.IsNaN(s) || math.IsInf(s, 0) {
		t.Fatalf("Sum = %v, want finite", s)
	}
	if q := h.Quantile(0); q != MinSeconds {
		t.Errorf("p0 = %v, want MinSeconds", q)
	}
	if q := h.Quantile(1); q != MaxSeconds {
		t.Errorf("p100 = %v, want MaxSeconds", q)
	}
}

func TestHistogramQuantileAccuracy(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{1, 2, 5, 100, 1000, 100000} {
		for _, sigma := range []float64{0.2, 1, 2.5} {
			xs := make([]float64, n)
			var h Histogram
			for i := range xs {
				xs[i] = 0.02 * math.Exp(sigma*r.NormFloat64())
				h.Observe(xs[i])
			}
			for _, q := range []float64{0, 0.01, 0.25, 0.5, 0.9, 0.95, 0.99, 0.999, 1} {
				want := exactQuantile(xs, q)
				if want < MinSeconds || want >= MaxSeconds {
					continue
				}
				if e := relErr(h.Quantile(q), want); e > RelativeAccuracy {
					t.Errorf("n=%d σ=%v q=%v: %v, exact %v, error %.3f%%", n, sigma, q, h.Quantile(q), want, 100*e)
				}
			}
		}
	}
}

func TestHistogramEmpty(t *testing.T) {
	var h Histogram
	if h.Count() != 0 || h.Sum() != 0 || h.Quantile(0.95) != 0 || h.Mean() != 0 {
		t.Fatal("zero Histogram is not empty")
	}
	n := 0
	h.Buckets(func(int, uint64) { n++ })
	if n != 0 {
		t.Fatal("zero Histogram has buckets")
	}
}

func TestHistogramQuantileOutOfRangeQ(t *testing.T) {
	var h Histogram
	h.Observe(0.001)
	h.Observe(1)
	if h.Quantile(-1) != h.Quantile(0) || h.Quantile(2) != h.Quantile(1) || h.Quantile(math.NaN()) != h.Quantile(0) {
		t.Fatal("q outside [0, 1] must clamp")
	}
}

func randomHistogram(r *rand.Rand, n int) (*Histogram, []float64) {
	h := new(Histogram)
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = 0.01 * math.Exp(1.5*r.NormFloat64())
		h.Observe(xs[i])
	}
	return h, xs
}

// checkGroups verifies the invariant behind Quantile: each group count is
// the sum of its buckets, and the groups sum to Count.
func checkGroups(t *testing.T, h *Histogram) {
	t.Helper()
	var total uint64
	for g := range h.groups {
		var n uint64
		for i := g * groupSize; i < min((g+1)*groupSize, NumBuckets); i++ {
			n += h.counts[i]
		}
		if n != h.groups[g] {
			t.Fatalf("group %d counts %d, its buckets %d", g, h.groups[g], n)
		}
		total += n
	}
	if total != h.count {
		t.Fatalf("groups sum to %d, Count %d", total, h.count)
	}
}

func sameBuckets(t *testing.T, a, b *Histogram) {
	t.Helper()
	checkGroups(t, a)
	checkGroups(t, b)
	if a.Count() != b.Count() {
		t.Fatalf("count %d != %d", a.Count(), b.Count())
	}
	if a.counts != b.counts || a.groups != b.groups {
		t.Fatal("buckets differ")
	}
}

func TestHistogramMergeIsExact(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	a, xa := randomHistogram(r, 3000)
	b, xb := randomHistogram(r, 5000)
	var all Histogram
	for _, x := range append(xa, xb...) {
		all.Observe(x)
	}
	m := a.Clone()
	m.Merge(b)
	sameBuckets(t, m, &all)
	if relErr(m.Sum(), all.Sum()) > 1e-12 {
		t.Fatalf("sum %v != %v", m.Sum(), all.Sum())
	}
	// Merging is commutative and leaves the argument alone.
	m2 := b.Clone()
	m2.Merge(a)
	sameBuckets(t, m, m2)
	if a.Count() != 3000 || b.Count() != 5000 {
		t.Fatal("Merge changed its argument")
	}
	// Merging with itself doubles.
	d := a.Clone()
	d.Merge(d)
	a.Buckets(func(i int, c uint64) {
		if d.counts[i] != 2*c {
			t.Fatalf("self-merge bucket %d: %d, want %d", i, d.counts[i], 2*c)
		}
	})
}

func TestHistogramBucketByBucket(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	h, _ := randomHistogram(r, 2000)

	// Buckets → AddBucket rebuilds it.
	var viaBuckets Histogram
	prev := -1
	h.Buckets(func(i int, c uint64) {
		if i <= prev || c == 0 {
			t.Fatalf("Buckets not increasing over non-empty buckets: %d after %d, count %d", i, prev, c)
		}
		prev = i
		viaBuckets.AddBucket(i, c)
	})
	sameBuckets(t, &viaBuckets, h)
	if relErr(viaBuckets.Sum(), h.Sum()) > RelativeAccuracy {
		t.Errorf("sum from bucket values %v, exact %v", viaBuckets.Sum(), h.Sum())
	}

	// Dense → AddDense, and the element-wise sum of two dense arrays (what
	// ClickHouse's sumForEach does) is the dense array of the merge.
	d := h.Dense()
	if len(d) != NumBuckets {
		t.Fatalf("len(Dense) = %d", len(d))
	}
	var viaDense Histogram
	if err := viaDense.AddDense(d); err != nil {
		t.Fatal(err)
	}
	sameBuckets(t, &viaDense, h)
	g, _ := randomHistogram(r, 500)
	sum := h.Dense()
	for i, c := range g.Dense() {
		sum[i] += c
	}
	m := h.Clone()
	m.Merge(g)
	if !slices.Equal(sum, m.Dense()) {
		t.Fatal("sumForEach of Dense arrays differs from Dense of the merge")
	}
	d[0] = 99 // Dense returns a copy
	if h.counts[0] == 99 {
		t.Fatal("Dense aliases the histogram")
	}
}

func TestHistogramAddDenseWrongLayout(t *testing.T) {
	var h Histogram
	h.Observe(0.5)
	before := *h.Clone()
	for _, n := range []int{0, NumBuckets - 1, NumBuckets + 1, 2000} {
		err := h.AddDense(make([]uint64, n))
		if !errors.Is(err, ErrLayout) {
			t.Fatalf("AddDense(len %d) = %v, want ErrLayout", n, err)
		}
	}
	sameBuckets(t, &h, &before)
}

func TestHistogramAddBucketClamps(t *testing.T) {
	var h Histogram
	h.AddBucket(-5, 2)
	h.AddBucket(NumBuckets+10, 3)
	h.AddBucket(100, 0)
	if h.Count() != 5 || h.counts[0] != 2 || h.counts[NumBuckets-1] != 3 || h.counts[100] != 0 {
		t.Fatalf("AddBucket out of range: count %d, under %d, over %d", h.Count(), h.counts[0], h.counts[NumBuckets-1])
	}
	if lo, hi := BucketBounds(-1); lo != 0 || hi != MinSeconds {
		t.Errorf("BucketBounds(-1) = %v, %v", lo, hi)
	}
}

func TestHistogramResetAndClone(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	h, _ := randomHistogram(r, 1000)
	c := h.Clone()
	h.Reset()
	if h.Count() != 0 || h.Sum() != 0 || h.counts != ([NumBuckets]uint64{}) || h.groups != ([numGroups]uint64{}) {
		t.Fatal("Reset left observations")
	}
	if c.Count() != 1000 {
		t.Fatal("Clone shares state with the original")
	}
	h.Observe(0.1)
	if h.Count() != 1 || relErr(h.Quantile(0.5), 0.1) > RelativeAccuracy {
		t.Fatal("a reset histogram does not work")
	}
}

func TestHistogramObserveDuration(t *testing.T) {
	var h Histogram
	h.ObserveDuration(250 * time.Millisecond)
	if BucketIndex(0.25) != BucketIndex(h.Quantile(0.5)) || h.Sum() != 0.25 {
		t.Fatalf("ObserveDuration(250ms): p50 %v, sum %v", h.Quantile(0.5), h.Sum())
	}
}

func TestHistogramObserveAllocs(t *testing.T) {
	var h Histogram
	if a := testing.AllocsPerRun(1000, func() { h.Observe(0.0123) }); a != 0 {
		t.Errorf("Observe allocates %v", a)
	}
	if a := testing.AllocsPerRun(1000, func() { _ = h.Quantile(0.95) }); a != 0 {
		t.Errorf("Quantile allocates %v", a)
	}
}
