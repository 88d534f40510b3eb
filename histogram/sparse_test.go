package histogram

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
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
	x.Add(4, 2) // two buckets whose sum is beyond uint64
	if x.Count() != math.MaxUint64 {
		t.Fatalf("count of two full buckets wrapped to %d", x.Count())
	}
}

// A merge that brings new buckets saturates the ones s had, as the merge
// without new buckets does.
func TestSparseMergeNewBucketsSaturates(t *testing.T) {
	var x, y Sparse
	x.Add(3, math.MaxUint64-1)
	y.Add(3, 10)
	y.Add(500, 1) // a bucket x lacks
	x.Merge(&y)
	d := x.Dense()
	if d[3] != math.MaxUint64 || d[500] != 1 {
		t.Fatalf("buckets 3 and 500: %d, %d; want the largest uint64 and 1", d[3], d[500])
	}
}

// TestSparseMergeAnyBuckets: merges of random bucket sets — clustered,
// spread over every word, at the range's ends, few or many new ones —
// agree with dense arrays bucket for bucket.
func TestSparseMergeAnyBuckets(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for round := range 2000 {
		want := make([]uint64, NumBuckets)
		var s Sparse
		for range 1 + rng.IntN(8) {
			var o Sparse
			at, width := rng.IntN(NumBuckets), 1+rng.IntN(NumBuckets)
			if round%4 == 0 {
				width = 1 + rng.IntN(40) // a row's latency: a few neighbouring words
			}
			for range rng.IntN(60) {
				i := (at + rng.IntN(width)) % NumBuckets
				switch rng.IntN(20) {
				case 0:
					i = 0
				case 1:
					i = NumBuckets - 1
				}
				c := uint64(1 + rng.IntN(1000))
				want[i] += c
				o.Add(i, c)
			}
			s.Merge(&o)
		}
		d := denseOf(&s)
		n := 0
		for i := range want {
			if d[i] != want[i] {
				t.Fatalf("round %d, bucket %d: %d, want %d", round, i, d[i], want[i])
			}
			if want[i] != 0 {
				n++
			}
		}
		if s.Len() != n {
			t.Fatalf("round %d: %d buckets, want %d", round, s.Len(), n)
		}
		// The index agrees with the counts: every bucket is found by Add.
		for i := range want {
			if want[i] != 0 {
				s.Add(i, 1)
				want[i]++
			}
		}
		if d := s.Dense(); d != nil {
			for i := range want {
				if d[i] != want[i] {
					t.Fatalf("round %d, after adds, bucket %d: %d, want %d", round, i, d[i], want[i])
				}
			}
		}
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

// Observe puts a value in the bucket Histogram.Observe puts it in.
func TestSparseObserveMatchesHistogram(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	var h Histogram
	var s Sparse
	for i := range 2000 {
		v := rng.ExpFloat64() * 0.01
		switch i % 100 {
		case 0:
			v = -1
		case 1:
			v = math.Inf(1)
		case 2:
			v = math.NaN()
		case 3:
			v = 1e-9
		}
		h.Observe(v)
		s.Observe(v)
	}
	h.ObserveDuration(3 * time.Millisecond)
	s.ObserveDuration(3 * time.Millisecond)
	var want Sparse
	want.Load(&h)
	if !s.Equal(&want) || s.Count() != h.Count() {
		t.Fatalf("observed %d in %d buckets, want %d in %d", s.Count(), s.Len(), h.Count(), want.Len())
	}
	if s.Quantile(0.99) != h.Quantile(0.99) {
		t.Fatalf("p99 %v, want %v", s.Quantile(0.99), h.Quantile(0.99))
	}
}

// Equal tells histograms apart by bucket and by count; Clone shares
// nothing with its original.
func TestSparseEqualAndClone(t *testing.T) {
	var a, b, empty Sparse
	a.Add(5, 2)
	a.Add(700, 1)
	b.Add(5, 2)
	if a.Equal(&b) || b.Equal(&a) {
		t.Fatal("different bucket sets are equal")
	}
	b.Add(700, 1)
	if !a.Equal(&b) {
		t.Fatal("same buckets are not equal")
	}
	b.Add(700, 1)
	if a.Equal(&b) {
		t.Fatal("different counts are equal")
	}
	var reset Sparse
	reset.Add(9, 9)
	reset.Reset()
	if !reset.Equal(&empty) || !empty.Equal(&reset) || a.Equal(&empty) {
		t.Fatal("empty histograms: a reset one differs from the zero value, or a full one equals it")
	}

	c := a.Clone()
	if !c.Equal(&a) {
		t.Fatal("clone differs")
	}
	c.Add(5, 1)
	c.Add(6, 1) // a new bucket: the index changes
	if a.Count() != 3 || a.Len() != 2 {
		t.Fatalf("changing the clone changed the original: %d in %d buckets", a.Count(), a.Len())
	}
	if z := empty.Clone(); z.Len() != 0 || z.ix != nil {
		t.Fatal("clone of an empty histogram holds memory")
	}
}

// AppendPairs and SetPairs round-trip; SetPairs refuses what is not a
// histogram of this layout and skips zero counts.
func TestSparsePairs(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for range 50 {
		var s Sparse
		for range rng.IntN(200) {
			s.Add(rng.IntN(NumBuckets), uint64(1+rng.IntN(1000)))
		}
		idx, cnt := s.AppendPairs([]uint16{42}, []uint64{7}) // appends after what is there
		if len(idx) != s.Len()+1 || idx[0] != 42 || cnt[0] != 7 {
			t.Fatalf("AppendPairs: %d pairs for %d buckets", len(idx), s.Len())
		}
		var back Sparse
		back.Add(3, 3) // replaced
		if err := back.SetPairs(idx[1:], cnt[1:]); err != nil || !back.Equal(&s) {
			t.Fatalf("round trip: %v, %d buckets, want %d", err, back.Len(), s.Len())
		}
	}
	var s Sparse
	if err := s.SetPairs([]uint16{1, 4, 9}, []uint64{2, 0, 5}); err != nil || s.Len() != 2 || s.Count() != 7 {
		t.Fatalf("zero count: %v, %d buckets", err, s.Len())
	}
	for name, c := range map[string]struct {
		idx  []uint16
		cnt  []uint64
		want error
	}{
		"lengths":    {[]uint16{1, 2}, []uint64{1}, ErrCorrupt},
		"decreasing": {[]uint16{5, 3}, []uint64{1, 1}, ErrCorrupt},
		"repeated":   {[]uint16{5, 5}, []uint64{1, 1}, ErrCorrupt},
		"range":      {[]uint16{1, NumBuckets}, []uint64{1, 1}, ErrLayout},
	} {
		s.Add(8, 1)
		if err := s.SetPairs(c.idx, c.cnt); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
		var empty Sparse
		if !s.Equal(&empty) || s.Count() != 0 {
			t.Errorf("%s: left %d buckets", name, s.Len())
		}
		s.Add(8, 1) // still usable
		if s.Len() != 1 || s.Quantile(1) != BucketValue(8) {
			t.Errorf("%s: unusable after the error", name)
		}
	}
}

// After Grow(n), n new buckets allocate nothing; a reused Sparse loads
// pairs without allocating.
func TestSparseGrowAllocs(t *testing.T) {
	idx := make([]uint16, 40)
	cnt := make([]uint64, 40)
	for i := range idx {
		idx[i], cnt[i] = uint16(10*i), uint64(i+1)
	}
	var keep *Sparse
	fill := func(grow bool) float64 {
		return testing.AllocsPerRun(100, func() {
			s := new(Sparse)
			if grow {
				s.Grow(len(idx))
			}
			for k := range idx {
				s.Add(int(idx[k]), cnt[k])
			}
			keep = s
		})
	}
	grown, plain := fill(true), fill(false)
	// The Sparse, its index, its counts (and one more under -race, which
	// inlines less); appending 40 counts one by one reallocates ~6 times.
	if grown > 4 || plain-grown < 4 || keep.Len() != len(idx) {
		t.Fatalf("%v allocations to fill a grown Sparse, %v without Grow", grown, plain)
	}
	var s Sparse
	allocs := testing.AllocsPerRun(100, func() {
		if err := s.SetPairs(idx, cnt); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations to load a reused Sparse", allocs)
	}
}

// Quantile gives what Histogram.Quantile gives for the same buckets, for
// every q (ranks at the edge of a bucket included).
func TestSparseQuantileMatchesHistogram(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for round := range 40 {
		var h Histogram
		for range 1 + rng.IntN(3000) {
			h.Observe(rng.ExpFloat64() * 0.02)
		}
		var s Sparse
		s.Load(&h)
		n := float64(h.Count())
		qs := []float64{-1, 0, 1e-9, 0.5, 0.95, 0.99, 0.999, 1, 2, math.NaN()}
		for k := range 20 { // ranks k/n exactly, and a hair above
			qs = append(qs, float64(k+round)/n, math.Nextafter(float64(k+round)/n, 1))
		}
		for _, q := range qs {
			if g, w := s.Quantile(q), h.Quantile(q); g != w {
				t.Fatalf("n %v, q %v: %v, want %v", n, q, g, w)
			}
		}
	}
}

// BenchmarkSparseCopy is what a collector pays per rollup it hands to a
// store: a dense copy of the minute's histogram (what rollups held
// before) or a sparse clone, of a row with 30 non-empty buckets.
func BenchmarkSparseCopy(b *testing.B) {
	var s Sparse
	for i := range 30 {
		s.Observe(0.001 * float64(1+i))
	}
	rollups := make([]struct {
		dense []uint64
		lat   Sparse
	}, 1024) // what the store is handed: the copies escape
	b.Run("dense", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			rollups[i%len(rollups)].dense = s.Dense()
			i++
		}
	})
	b.Run("clone", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			rollups[i%len(rollups)].lat = s.Clone()
			i++
		}
	})
}

// BenchmarkSparseMergeRows merges rows of 10 observations each (5 ms ×
// (1 + Exp(1)), as the collector's benchmarks report) into a target that
// is emptied every 50 rows, as a live window's second is, or every 3,000,
// as a tenant's minute row is: most merges bring a bucket or two the
// target lacks.
func BenchmarkSparseMergeRows(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	rows := make([]Sparse, 1024)
	for i := range rows {
		for range 10 {
			rows[i].Observe(0.005 * (1 + rng.ExpFloat64()))
		}
	}
	for _, every := range []int{50, 3000} {
		b.Run(fmt.Sprintf("reset=%d", every), func(b *testing.B) {
			var all Sparse
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if i%every == 0 {
					all.Reset()
				}
				all.Merge(&rows[i%len(rows)])
				i++
			}
		})
	}
}

// FuzzSparseMerge: a merge of any two bucket sets agrees with dense
// arrays (go test -fuzz FuzzSparseMerge ./histogram).
func FuzzSparseMerge(f *testing.F) {
	f.Add([]byte{0, 1, 0, 2, 4, 130, 1}, []byte{0, 3, 4, 131, 1, 255, 255})
	f.Fuzz(func(t *testing.T, a, b []byte) {
		want := make([]uint64, NumBuckets)
		var s Sparse
		for _, in := range [][]byte{a, b, a} {
			var o Sparse
			for k := 0; k+2 < len(in); k += 3 {
				i := (int(in[k])<<8 | int(in[k+1])) % NumBuckets
				c := uint64(in[k+2]) + 1
				want[i] += c
				o.Add(i, c)
			}
			s.Merge(&o)
		}
		d := denseOf(&s)
		for i := range want {
			if d[i] != want[i] {
				t.Fatalf("bucket %d: %d, want %d", i, d[i], want[i])
			}
		}
	})
}

// denseOf is s's buckets as a dense array, also when s is empty.
func denseOf(s *Sparse) []uint64 {
	if d := s.Dense(); d != nil {
		return d
	}
	return make([]uint64, NumBuckets)
}
