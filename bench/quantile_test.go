package bench

// Quantile sketches side by side: qtop's ratio.Histogram and ratio.P2
// against github.com/DataDog/sketches-go (DDSketch, 1% relative accuracy)
// and github.com/HdrHistogram/hdrhistogram-go (2 significant digits,
// microseconds). Run: ./run -bench Quantile
//
// BenchmarkQuantileInsert   one observation (lognormal latency, median 20 ms, σ = 1)
// BenchmarkQuantileP95      the p95 of a sketch of 100,000 such observations
// BenchmarkQuantileMerge    merging a sketch of 10,000 observations into another
// BenchmarkQuantileWindow   a window of 1,000 heavy-tailed latencies: insert them all and ask the p95;
//                           reports the relative error of that p95 against the exact one over 1,000
//                           such windows (median-err-% and max-err-%)

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/DataDog/sketches-go/ddsketch"
	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/qtop-dev/qtop/histogram"
	"github.com/qtop-dev/qtop/ratio"
)

// quantileSketch is the common shape of the four contenders.
type quantileSketch interface {
	add(seconds float64)
	p(q float64) float64
	reset()
	merge(o quantileSketch)
}

type qtopHist struct{ h histogram.Histogram }

func (s *qtopHist) add(x float64)          { s.h.Observe(x) }
func (s *qtopHist) p(q float64) float64    { return s.h.Quantile(q) }
func (s *qtopHist) reset()                 { s.h.Reset() }
func (s *qtopHist) merge(o quantileSketch) { s.h.Merge(&o.(*qtopHist).h) }

type qtopP2 struct{ e *ratio.P2 }

func (s *qtopP2) add(x float64)          { s.e.Add(x) }
func (s *qtopP2) p(float64) float64      { return s.e.Value() }
func (s *qtopP2) reset()                 { s.e.Reset() }
func (s *qtopP2) merge(o quantileSketch) {} // P² does not merge

type ddSketch struct{ s *ddsketch.DDSketch }

func newDD() *ddSketch {
	s, err := ddsketch.NewDefaultDDSketch(0.01)
	if err != nil {
		panic(err)
	}
	return &ddSketch{s}
}
func (s *ddSketch) add(x float64) { _ = s.s.Add(x) }
func (s *ddSketch) p(q float64) float64 {
	v, _ := s.s.GetValueAtQuantile(q)
	return v
}
func (s *ddSketch) reset()                 { s.s.Clear() }
func (s *ddSketch) merge(o quantileSketch) { _ = s.s.MergeWith(o.(*ddSketch).s) }

type hdrSketch struct{ h *hdr.Histogram }

func newHDR() *hdrSketch                    { return &hdrSketch{hdr.New(1, 3_600_000_000, 2)} } // 1 µs … 1 h
func (s *hdrSketch) add(x float64)          { _ = s.h.RecordValue(int64(x*1e6 + 0.5)) }
func (s *hdrSketch) p(q float64) float64    { return float64(s.h.ValueAtQuantile(100*q)) / 1e6 }
func (s *hdrSketch) reset()                 { s.h.Reset() }
func (s *hdrSketch) merge(o quantileSketch) { s.h.Merge(o.(*hdrSketch).h) }

var contenders = []struct {
	name string
	make func() quantileSketch
}{
	{"qtop-histogram", func() quantileSketch { return new(qtopHist) }},
	{"qtop-p2", func() quantileSketch { return &qtopP2{ratio.NewP2(0.95)} }},
	{"ddsketch", func() quantileSketch { return newDD() }},
	{"hdrhistogram", func() quantileSketch { return newHDR() }},
}

func lognormalLatencies(seed uint64, n int) []float64 {
	r := rand.New(rand.NewPCG(seed, 1))
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = 0.020 * math.Exp(r.NormFloat64())
	}
	return xs
}

// heavyTailed draws a lognormal body (median 20 ms, σ = 0.5) with a 3%
// Pareto(α = 1.5) tail from 200 ms: a service with a slow path.
func heavyTailed(r *rand.Rand) float64 {
	if r.Float64() < 0.03 {
		return 0.2 / math.Pow(1-r.Float64(), 1/1.5)
	}
	return 0.020 * math.Exp(0.5*r.NormFloat64())
}

func BenchmarkQuantileInsert(b *testing.B) {
	xs := lognormalLatencies(1, 4096)
	for _, c := range contenders {
		b.Run(c.name, func(b *testing.B) {
			s := c.make()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				s.add(xs[i&4095])
				i++
			}
		})
	}
}

func BenchmarkQuantileP95(b *testing.B) {
	xs := lognormalLatencies(2, 100000)
	for _, c := range contenders {
		b.Run(c.name, func(b *testing.B) {
			s := c.make()
			for _, x := range xs {
				s.add(x)
			}
			b.ReportAllocs()
			var sink float64
			for b.Loop() {
				sink += s.p(0.95)
			}
			_ = sink
		})
	}
}

func BenchmarkQuantileMerge(b *testing.B) {
	xs := lognormalLatencies(3, 10000)
	for _, c := range contenders {
		if c.name == "qtop-p2" {
			continue // not mergeable
		}
		b.Run(c.name, func(b *testing.B) {
			src, dst := c.make(), c.make()
			for _, x := range xs {
				src.add(x)
			}
			b.ReportAllocs()
			for b.Loop() {
				dst.merge(src)
			}
		})
	}
}

// exactP95 is the nearest-rank p95, the observation of rank ⌈0.95·n⌉.
func exactP95(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[int(math.Ceil(0.95*float64(len(s))))-1]
}

func BenchmarkQuantileWindow(b *testing.B) {
	const windows, n = 1000, 1000
	r := rand.New(rand.NewPCG(4, 1))
	data := make([][]float64, windows)
	exact := make([]float64, windows)
	for w := range data {
		data[w] = make([]float64, n)
		for i := range data[w] {
			data[w][i] = heavyTailed(r)
		}
		exact[w] = exactP95(data[w])
	}
	for _, c := range contenders {
		b.Run(c.name, func(b *testing.B) {
			s := c.make()
			errs := make([]float64, windows)
			for w, xs := range data {
				s.reset()
				for _, x := range xs {
					s.add(x)
				}
				errs[w] = math.Abs(s.p(0.95)-exact[w]) / exact[w]
			}
			slices.Sort(errs)
			b.ReportAllocs()
			w := 0
			for b.Loop() {
				s.reset()
				for _, x := range data[w%windows] {
					s.add(x)
				}
				_ = s.p(0.95)
				w++
			}
			b.ReportMetric(100*errs[windows/2], "median-err-%")
			b.ReportMetric(100*errs[windows-1], "max-err-%")
		})
	}
}

// The four agree on an easy case, so the figures compare like with like.
func TestQuantileContendersAgree(t *testing.T) {
	xs := lognormalLatencies(5, 10000)
	want := exactP95(xs)
	for _, c := range contenders {
		s := c.make()
		for _, x := range xs {
			s.add(x)
		}
		got := s.p(0.95)
		if e := math.Abs(got-want) / want; e > 0.05 {
			t.Errorf("%s: p95 %v, exact %v (%.2f%%)", c.name, got, want, 100*e)
		}
		fmt.Printf("%-15s p95 %.5f s (exact %.5f)\n", c.name, got, want)
	}
	// Memory, for the record: in memory and encoded, 10,000 observations.
	var h histogram.Histogram
	d, hd := newDD(), newHDR()
	for _, x := range xs {
		h.Observe(x)
		d.add(x)
		hd.add(x)
	}
	enc, _ := h.MarshalBinary()
	var denc []byte
	d.s.Encode(&denc, false)
	hdrEnc, err := hd.h.Encode(hdr.V2CompressedEncodingCookieBase)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("qtop-histogram  %d B in memory, %d B encoded\n", unsafe.Sizeof(h), len(enc))
	fmt.Printf("ddsketch        %d B encoded\n", len(denc))
	fmt.Printf("hdrhistogram    %d B in memory, %d B encoded (compressed, base64)\n", hd.h.ByteSize(), len(hdrEnc))
}
