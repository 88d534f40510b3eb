package ratio

import (
	"fmt"
	"math"
)

// P2 estimates one quantile of a stream in constant memory with the P²
// algorithm of Jain and Chlamtac ("The P² algorithm for dynamic calculation
// of quantiles and histograms without storing observations", CACM 28(10),
// 1985): five markers whose heights are adjusted by piecewise-parabolic
// interpolation as observations arrive.
//
// It is exact for five observations or fewer and cheap (no allocation, a few
// tens of nanoseconds per observation), but it is not mergeable and its
// error on heavy-tailed latency is unbounded in the worst case: see the
// package documentation for figures. The latency ratio uses Histogram.
//
// A P2 is not safe for concurrent use. It needs NewP2 because the quantile
// is part of its state from the first observation.
type P2 struct {
	p       float64
	n       int        // observations so far
	height  [5]float64 // marker heights q1..q5 (sorted observations while n ≤ 5)
	pos     [5]float64 // marker positions n1..n5 (1-based)
	desired [5]float64 // desired positions n'1..n'5
	inc     [5]float64 // increments of the desired positions dn'1..dn'5
}

// NewP2 returns an estimator of the q-quantile, 0 < q < 1. It panics
// otherwise, as a q out of range is a programming error.
func NewP2(q float64) *P2 {
	if !(q > 0 && q < 1) {
		panic(fmt.Sprintf("ratio: NewP2: quantile %v outside (0, 1)", q))
	}
	e := new(P2)
	e.init(q)
	return e
}

func (e *P2) init(q float64) {
	*e = P2{
		p:       q,
		pos:     [5]float64{1, 2, 3, 4, 5},
		desired: [5]float64{1, 1 + 2*q, 1 + 4*q, 3 + 2*q, 5},
		inc:     [5]float64{0, q / 2, q, (1 + q) / 2, 1},
	}
}

// Quantile returns the quantile being estimated.
func (e *P2) Quantile() float64 { return e.p }

// Count returns the number of observations added.
func (e *P2) Count() int { return e.n }

// Add adds one observation. NaN is ignored, as it has no place among the
// markers.
func (e *P2) Add(x float64) {
	if x != x {
		return
	}
	if e.n < 5 {
		// Insertion into the sorted first five.
		i := e.n
		for i > 0 && e.height[i-1] > x {
			e.height[i] = e.height[i-1]
			i--
		}
		e.height[i] = x
		e.n++
		return
	}
	e.n++
	q, n := &e.height, &e.pos

	// B1: find the cell k with q[k] ≤ x < q[k+1], extending the extremes.
	var k int
	switch {
	case x < q[0]:
		q[0] = x
		k = 0
	case x < q[1]:
		k = 0
	case x < q[2]:
		k = 1
	case x < q[3]:
		k = 2
	case x <= q[4]:
		k = 3
	default:
		q[4] = x
		k = 3
	}
	// B2: shift the markers above the cell and every desired position.
	for i := k + 1; i < 5; i++ {
		n[i]++
	}
	for i := range e.desired {
		e.desired[i] += e.inc[i]
	}
	// B3: move the middle markers that are off their desired position by a
	// whole place or more, where there is room.
	for i := 1; i <= 3; i++ {
		d := e.desired[i] - n[i]
		if d >= 1 && n[i+1]-n[i] > 1 || d <= -1 && n[i-1]-n[i] < -1 {
			s := 1.0
			if d < 0 {
				s = -1
			}
			h := e.parabolic(i, s)
			if q[i-1] < h && h < q[i+1] {
				q[i] = h
			} else {
				q[i] = e.linear(i, s)
			}
			n[i] += s
		}
	}
}

func (e *P2) parabolic(i int, d float64) float64 {
	q, n := &e.height, &e.pos
	return q[i] + d/(n[i+1]-n[i-1])*
		((n[i]-n[i-1]+d)*(q[i+1]-q[i])/(n[i+1]-n[i])+
			(n[i+1]-n[i]-d)*(q[i]-q[i-1])/(n[i]-n[i-1]))
}

func (e *P2) linear(i int, d float64) float64 {
	j := i + int(d)
	return e.height[i] + d*(e.height[j]-e.height[i])/(e.pos[j]-e.pos[i])
}

// Value returns the estimate. With five observations or fewer it is the
// exact sample quantile, interpolated linearly between the order statistics
// around position 1+(n−1)q (the definition whose desired positions P²
// tracks); with none it is 0.
func (e *P2) Value() float64 {
	switch {
	case e.n == 0:
		return 0
	case e.n > 5:
		return e.height[2]
	}
	h := (float64(e.n) - 1) * e.p
	lo := math.Floor(h)
	i := int(lo)
	if i+1 >= e.n {
		return e.height[e.n-1]
	}
	return e.height[i] + (h-lo)*(e.height[i+1]-e.height[i])
}

// Reset forgets every observation and keeps the quantile.
func (e *P2) Reset() {
	e.init(e.p)
}
