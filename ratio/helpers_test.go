package ratio

import (
	"math"
	"sort"
	"time"
)

// t0 is the fixed instant the tests' step tables start from.
var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

// exactQuantile is the nearest-rank q-quantile of xs, the definition
// histogram.Histogram.Quantile follows: the observation of rank ⌈q·n⌉, at
// least 1.
func exactQuantile(xs []float64, q float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	r := int(math.Ceil(q * float64(len(s))))
	if r < 1 {
		r = 1
	}
	return s[r-1]
}

func relErr(got, want float64) float64 { return math.Abs(got-want) / want }
