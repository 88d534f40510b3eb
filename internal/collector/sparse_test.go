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
