package ratio

import (
	"github.com/qtop-dev/qtop/histogram"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// latencies returns n lognormal latencies (median 20 ms, σ = 1) to cycle
// through, so benchmarks do not measure the random number generator.
func latencies(n int) []float64 {
	r := rand.New(rand.NewPCG(61, 62))
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = 0.020 * math.Exp(r.NormFloat64())
	}
	return xs
}

func BenchmarkHistogramObserve(b *testing.B) {
	xs := latencies(4096)
	var h histogram.Histogram
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		h.Observe(xs[i&4095])
		i++
	}
}

func BenchmarkHistogramObserveDuration(b *testing.B) {
	xs := latencies(4096)
	ds := make([]time.Duration, len(xs))
	for i, x := range xs {
		ds[i] = time.Duration(x * 1e9)
	}
	var h histogram.Histogram
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		h.ObserveDuration(ds[i&4095])
		i++
	}
}

func BenchmarkHistogramQuantileP95(b *testing.B) {
	var h histogram.Histogram
	for _, x := range latencies(100000) {
		h.Observe(x)
	}
	b.ReportAllocs()
	var sink float64
	for b.Loop() {
		sink += h.Quantile(0.95)
	}
	_ = sink
}

func BenchmarkHistogramMerge(b *testing.B) {
	var h, o histogram.Histogram
	for _, x := range latencies(10000) {
		o.Observe(x)
	}
	b.ReportAllocs()
	for b.Loop() {
		h.Merge(&o)
	}
}

func BenchmarkWindowObserveAt(b *testing.B) {
	xs := latencies(4096)
	w := histogram.NewWindow(10*time.Second, 10)
	now := t0
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		now = now.Add(10 * time.Microsecond)
		w.ObserveAt(now, xs[i&4095])
		i++
	}
}

func BenchmarkWindowQuantileAtP95(b *testing.B) {
	w := histogram.NewWindow(5*time.Minute, 30)
	now := t0
	for _, x := range latencies(300000) {
		now = now.Add(time.Millisecond)
		w.ObserveAt(now, x)
	}
	b.ReportAllocs()
	var sink float64
	for b.Loop() {
		sink += w.QuantileAt(now, 0.95)
	}
	_ = sink
}

func BenchmarkSignalObserveAt(b *testing.B) {
	xs := latencies(4096)
	s := NewSignal()
	now := t0
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		now = now.Add(10 * time.Microsecond)
		s.ObserveAt(now, xs[i&4095])
		i++
	}
}

func BenchmarkSignalValueAt(b *testing.B) {
	s := NewSignal()
	now := t0
	for _, x := range latencies(300000) {
		now = now.Add(time.Millisecond)
		s.ObserveAt(now, x)
	}
	b.ReportAllocs()
	for b.Loop() {
		s.ValueAt(now)
	}
}

func BenchmarkP2Add(b *testing.B) {
	xs := latencies(4096)
	e := NewP2(0.95)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		e.Add(xs[i&4095])
		i++
	}
}

// The comparison behind the package documentation: on windows of 1,000
// heavy-tailed latencies, how far from the exact p95 are P² and the
// histogram? The histogram is guaranteed within RelativeAccuracy; P² is
// reported, and must at least be worse, or the package doc is wrong.
func TestQuantileErrorP2VersusHistogram(t *testing.T) {
	r := rand.New(rand.NewPCG(63, 64))
	type source struct {
		name string
		draw func() float64
	}
	sources := []source{
		{"lognormal σ=1", func() float64 { return 0.020 * math.Exp(r.NormFloat64()) }},
		{"lognormal body + 3% Pareto(1.5) tail", func() float64 {
			if r.Float64() < 0.03 {
				return 0.2 / math.Pow(1-r.Float64(), 1/1.5)
			}
			return 0.020 * math.Exp(0.5*r.NormFloat64())
		}},
	}
	const windows, n, q = 2000, 1000, 0.95
	for _, src := range sources {
		var p2Err, hErr []float64
		xs := make([]float64, n)
		for w := 0; w < windows; w++ {
			e := NewP2(q)
			var h histogram.Histogram
			for i := range xs {
				xs[i] = src.draw()
				e.Add(xs[i])
				h.Observe(xs[i])
			}
			p2Err = append(p2Err, relErr(e.Value(), exactInterpolated(xs, q)))
			hErr = append(hErr, relErr(h.Quantile(q), exactQuantile(xs, q)))
		}
		slices.Sort(p2Err)
		slices.Sort(hErr)
		pm, px := p2Err[len(p2Err)/2], p2Err[len(p2Err)-1]
		hm, hx := hErr[len(hErr)/2], hErr[len(hErr)-1]
		t.Logf("%s, p95 of %d windows of %d: P² median %.2f%% max %.1f%%; Histogram median %.2f%% max %.2f%%",
			src.name, windows, n, 100*pm, 100*px, 100*hm, 100*hx)
		if hx > histogram.RelativeAccuracy {
			t.Errorf("%s: histogram error %.3f%% above its bound", src.name, 100*hx)
		}
		if px <= hx {
			t.Errorf("%s: P² (max %.3f%%) no worse than the histogram (max %.3f%%): revisit the package doc", src.name, 100*px, 100*hx)
		}
	}
}

// Many request goroutines observing into one process-wide Signal.
func BenchmarkSignalObserveAtParallel(b *testing.B) {
	xs := latencies(4096)
	s := NewSignal()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		now := t0
		i := 0
		for pb.Next() {
			now = now.Add(10 * time.Microsecond)
			s.ObserveAt(now, xs[i&4095])
			i++
		}
	})
}
