package ratio

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestSparseMergeIsExact checks Sparse merges against Histogram
// merges bucket by bucket.
func TestSparseMergeIsExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var want Histogram
	var got, one Sparse
	for round := range 200 {
		var h Histogram
		n := rng.IntN(30)
		if round%10 == 0 {
			n = 400 // more new buckets than merge keeps on its stack
		}
		for range n {
			h.Observe(rng.ExpFloat64() * float64(round%7+1) * 0.01 * float64(1+round%3*round))
		}
		want.Merge(&h)
		one.Load(&h)
		got.Merge(&one)
	}
	d := want.Dense()
	gd := got.Dense()
	for i := range d {
		if d[i] != gd[i] {
			t.Fatalf("bucket %d: %d, want %d", i, gd[i], d[i])
		}
	}
	if got.Quantile(0.95) != want.Quantile(0.95) {
		t.Fatalf("p95 %v, want %v", got.Quantile(0.95), want.Quantile(0.95))
	}
}

// TestSparseAddAndMergeAgree: random adds and merges, one bucket at a time
// or by whole histograms, agree with a dense array.
func TestSparseAddAndMergeAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	want := make([]uint64, NumBuckets)
	var got Sparse
	for round := range 500 {
		var o Sparse
		for range rng.IntN(40) {
			i := rng.IntN(NumBuckets)
			if round%3 == 0 {
				i = 300 + rng.IntN(20) // often the same buckets: the in-place path
			}
			c := uint64(1 + rng.IntN(5))
			want[i] += c
			if round%2 == 0 {
				got.Add(i, c)
			} else {
				o.Add(i, c)
			}
		}
		got.Merge(&o)
		if round%50 == 0 {
			got2 := Sparse{}
			got2.Merge(&got) // copy into an empty one
			got = got2
		}
	}
	d := got.Dense()
	for i := range want {
		if d[i] != want[i] {
			t.Fatalf("bucket %d: %d, want %d", i, d[i], want[i])
		}
	}
	got.Reset()
	if got.Count() != 0 || got.Dense() != nil || got.Quantile(0.5) != 0 {
		t.Fatal("reset left something")
	}
}

// Sums saturate instead of wrapping.
func TestSparseSaturates(t *testing.T) {
	var x, y Sparse
	x.Add(3, math.MaxUint64-1)
	y.Add(3, 10)
	x.Merge(&y)
	x.Add(3, 1)
	if x.Count() != math.MaxUint64 {
		t.Fatalf("bucket wrapped to %d", x.Count())
	}
}

// Buckets and Len agree with the dense histogram it was loaded from.
func TestSparseBucketsEqualDense(t *testing.T) {
	var h Histogram
	for i := range 100 {
		h.Observe(1e-6 * float64(1+i*i*i))
	}
	var s Sparse
	s.Load(&h)
	n := 0
	h.Buckets(func(i int, c uint64) { n++ })
	if s.Len() != n {
		t.Fatalf("%d buckets, want %d", s.Len(), n)
	}
	var got, want [][2]uint64
	h.Buckets(func(i int, c uint64) { want = append(want, [2]uint64{uint64(i), c}) })
	s.Buckets(func(i int, c uint64) { got = append(got, [2]uint64{uint64(i), c}) })
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("bucket %d: %v, want %v", i, got[i], want[i])
		}
	}
}

func BenchmarkSparseMerge(b *testing.B) {
	var h Histogram
	for i := range 30 {
		h.Observe(0.001 * float64(1+i))
	}
	var one, all Sparse
	one.Load(&h)
	all.Load(&h)
	b.ReportAllocs()
	for b.Loop() {
		all.Merge(&one)
	}
}
