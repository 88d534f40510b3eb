package collector

import (
	"math/rand/v2"
	"testing"

	"github.com/qtop-dev/qtop/ratio"
)

// TestSparseMergeIsExact checks sparse merges against ratio.Histogram
// merges bucket by bucket.
func TestSparseMergeIsExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var want ratio.Histogram
	var got, one sparse
	for round := range 200 {
		var h ratio.Histogram
		n := rng.IntN(30)
		if round%10 == 0 {
			n = 400 // more new buckets than merge keeps on its stack
		}
		for range n {
			h.Observe(rng.ExpFloat64() * float64(round%7+1) * 0.01 * float64(1+round%3*round))
		}
		want.Merge(&h)
		one.load(&h)
		got.merge(&one)
	}
	d := want.Dense()
	gd := got.dense()
	for i := range d {
		if d[i] != gd[i] {
			t.Fatalf("bucket %d: %d, want %d", i, gd[i], d[i])
		}
	}
	if got.quantile(0.95) != want.Quantile(0.95) {
		t.Fatalf("p95 %v, want %v", got.quantile(0.95), want.Quantile(0.95))
	}
}

// TestSparseAddAndMergeAgree: random adds and merges, one bucket at a time
// or by whole histograms, agree with a dense array.
func TestSparseAddAndMergeAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	want := make([]uint64, ratio.NumBuckets)
	var got sparse
	for round := range 500 {
		var o sparse
		for range rng.IntN(40) {
			i := rng.IntN(ratio.NumBuckets)
			if round%3 == 0 {
				i = 300 + rng.IntN(20) // often the same buckets: the in-place path
			}
			c := uint64(1 + rng.IntN(5))
			want[i] += c
			if round%2 == 0 {
				got.add(i, c)
			} else {
				o.add(i, c)
			}
		}
		got.merge(&o)
		if round%50 == 0 {
			got2 := sparse{}
			got2.merge(&got) // copy into an empty one
			got = got2
		}
	}
	d := got.dense()
	for i := range want {
		if d[i] != want[i] {
			t.Fatalf("bucket %d: %d, want %d", i, d[i], want[i])
		}
	}
	got.reset()
	if got.count() != 0 || got.dense() != nil || got.quantile(0.5) != 0 {
		t.Fatal("reset left something")
	}
}
