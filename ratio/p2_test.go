package ratio

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// The worked example of Jain and Chlamtac (1985), Table I: the median of
// 20 observations. The paper prints marker heights with two decimals and
// carries rounded values from step to step, so its intermediate rows differ
// from exact arithmetic by up to 0.02; the final row is checked closely.
func TestP2PaperExample(t *testing.T) {
	data := []float64{0.02, 0.15, 0.74, 3.39, 0.83, 22.37, 10.15, 15.43, 38.62, 15.92,
		34.60, 10.28, 1.47, 0.40, 0.05, 11.39, 0.27, 0.42, 0.09, 11.37}
	rows := map[int][5]float64{ // observations so far → marker heights
		6:  {0.02, 0.15, 0.74, 0.83, 22.37},
		7:  {0.02, 0.15, 0.74, 4.47, 22.37},
		8:  {0.02, 0.15, 2.18, 8.60, 22.37},
		9:  {0.02, 0.87, 4.75, 15.52, 38.62},
		11: {0.02, 0.87, 9.28, 21.58, 38.62},
		13: {0.02, 2.14, 9.28, 21.58, 38.62},
		15: {0.02, 0.74, 6.30, 21.58, 38.62},
	}
	e := NewP2(0.5)
	for i, x := range data {
		e.Add(x)
		want, ok := rows[i+1]
		if !ok {
			continue
		}
		for j := range want {
			if math.Abs(e.height[j]-want[j]) > 0.02 {
				t.Fatalf("after %d observations: heights %.3f, paper %.2f", i+1, e.height, want)
			}
		}
	}
	final := [5]float64{0.02, 0.4939, 4.4406, 17.2039, 38.62}
	for j := range final {
		if math.Abs(e.height[j]-final[j]) > 1e-4 {
			t.Fatalf("final heights %.4f, paper %.4f", e.height, final)
		}
	}
	if want := [5]float64{1, 6, 10, 16, 20}; e.pos != want {
		t.Errorf("final positions %v, paper %v", e.pos, want)
	}
	if v := e.Value(); math.Abs(v-4.4406) > 1e-4 {
		t.Errorf("median estimate %v, paper 4.44", v)
	}
	if e.Count() != 20 || e.Quantile() != 0.5 {
		t.Errorf("Count %d Quantile %v", e.Count(), e.Quantile())
	}
}

// exactInterpolated is the sample quantile at position 1+(n−1)q between
// order statistics, the definition P² follows.
func exactInterpolated(xs []float64, q float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	h := float64(len(s)-1) * q
	i := int(h)
	if i+1 >= len(s) {
		return s[len(s)-1]
	}
	return s[i] + (h-float64(i))*(s[i+1]-s[i])
}

func TestP2ExactUpToFive(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, q := range []float64{0.01, 0.25, 0.5, 0.9, 0.95, 0.99} {
		for trial := 0; trial < 100; trial++ {
			e := NewP2(q)
			var xs []float64
			for n := 1; n <= 5; n++ {
				x := r.ExpFloat64()
				if trial%10 == 0 {
					x = float64(r.IntN(3)) // ties
				}
				xs = append(xs, x)
				e.Add(x)
				if got, want := e.Value(), exactInterpolated(xs, q); math.Abs(got-want) > 1e-12 {
					t.Fatalf("q=%v %v: %v, exact %v", q, xs, got, want)
				}
			}
		}
	}
}

func TestP2Empty(t *testing.T) {
	if v := NewP2(0.95).Value(); v != 0 {
		t.Fatalf("empty estimate %v, want 0", v)
	}
}

func TestP2IgnoresNaN(t *testing.T) {
	e := NewP2(0.5)
	for _, x := range []float64{1, math.NaN(), 2, 3, math.NaN(), 4, 5, 6, 7} {
		e.Add(x)
	}
	if e.Count() != 7 || math.IsNaN(e.Value()) {
		t.Fatalf("count %d value %v", e.Count(), e.Value())
	}
}

func TestP2RejectsBadQuantile(t *testing.T) {
	for _, q := range []float64{0, 1, -0.5, 1.5, math.NaN()} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewP2(%v) did not panic", q)
				}
			}()
			NewP2(q)
		}()
	}
}

func TestP2ConvergesOnLargeStreams(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	for _, q := range []float64{0.5, 0.9, 0.95, 0.99} {
		e := NewP2(q)
		xs := make([]float64, 100000)
		for i := range xs {
			xs[i] = r.Float64()
			e.Add(xs[i])
		}
		if got, want := e.Value(), exactInterpolated(xs, q); math.Abs(got-want) > 0.005 {
			t.Errorf("uniform q=%v: %v, exact %v", q, got, want)
		}
	}
	// Sorted input is the classic hard case; the markers still track it.
	e := NewP2(0.5)
	for i := 0; i < 10001; i++ {
		e.Add(float64(i))
	}
	if v := e.Value(); math.Abs(v-5000)/5000 > 0.01 {
		t.Errorf("sorted 0..10000: median %v", v)
	}
}

func TestP2MarkersStaySorted(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	e := NewP2(0.95)
	for i := 0; i < 50000; i++ {
		e.Add(math.Exp(2 * r.NormFloat64()))
		if i >= 5 && !slices.IsSorted(e.height[:]) {
			t.Fatalf("after %d: heights %v not sorted", i+1, e.height)
		}
		if i >= 5 && !slices.IsSorted(e.pos[:]) {
			t.Fatalf("after %d: positions %v not sorted", i+1, e.pos)
		}
	}
}

func TestP2Reset(t *testing.T) {
	e := NewP2(0.9)
	for i := 0; i < 100; i++ {
		e.Add(float64(i))
	}
	e.Reset()
	if e.Count() != 0 || e.Value() != 0 || e.Quantile() != 0.9 {
		t.Fatal("Reset kept observations or lost the quantile")
	}
	e.Add(7)
	if e.Value() != 7 {
		t.Fatal("reset estimator does not work")
	}
}

func TestP2AddAllocs(t *testing.T) {
	e := NewP2(0.95)
	x := 0.0
	if a := testing.AllocsPerRun(1000, func() { x += 0.37; e.Add(math.Mod(x, 1)) }); a != 0 {
		t.Errorf("Add allocates %v", a)
	}
	if a := testing.AllocsPerRun(100, func() { e.Reset() }); a != 0 {
		t.Errorf("Reset allocates %v", a)
	}
}
