package histogram

import (
	"math"
	"time"
)

// Bucket layout. The boundaries are fixed for all time (a change of layout
// is a new encoding version), so histograms made by different processes, by
// the collector and by ClickHouse's sumForEach all add bucket by bucket.
//
// A value v = 2^e·(1+s), s in [0,1), falls in bucket
//
//	1 + (e−minExp)·perOctave + ⌊perOctave·P(s)⌋
//
// where P(s) = (6/35)s³ − (3/5)s² + (10/7)s is the cubic that DDSketch uses to
// approximate log2(1+s) without calling math.Log: it is monotone, P(0) = 0,
// P(1) = 1, and its slope in log space, P′(s)(1+s), never falls below 10/7.
// So no bucket spans a ratio above γ = exp(0.7/perOctave): with 36 buckets per
// octave, γ ≈ 1.0196 and the bucket's representative value 2·lo·hi/(lo+hi)
// is within (γ−1)/(γ+1) ≈ 0.97% of every value in the bucket. A true
// logarithmic mapping with the same guarantee would need 35.6 buckets per
// octave; the cubic costs 1% more buckets and saves the logarithm.
//
// 32 octaves, [2^-20 s, 2^12 s) ≈ [0.95 µs, 68 min), cover 1 µs … 1 h with
// 1,152 buckets, plus one underflow and one overflow bucket: NumBuckets =
// 1,154. That is the smallest power-of-two range that covers 1 µs … 1 h at
// 1% accuracy; ClickHouse keeps one such Array(UInt64) per row per minute,
// and its arrays of mostly zeros compress to a few hundred bytes.
const (
	perOctave = 36
	minExp    = -20
	maxExp    = 12
	octaves   = maxExp - minExp

	// NumBuckets is the number of buckets of every Histogram: bucket 0 holds
	// values below MinSeconds (and zero, negative and NaN values), bucket
	// NumBuckets−1 holds values of MaxSeconds and above.
	NumBuckets = octaves*perOctave + 2

	// MinSeconds is the lower bound of bucket 1, the first exact bucket.
	MinSeconds = 1.0 / (1 << -minExp)
	// MaxSeconds is the lower bound of the overflow bucket.
	MaxSeconds = float64(1 << maxExp)

	// RelativeAccuracy bounds the relative error of a quantile between
	// MinSeconds and MaxSeconds: (γ−1)/(γ+1) with γ = exp(0.7/36).
	RelativeAccuracy = 0.0098

	// Buckets are counted in groups of 64 too, so that a quantile query
	// finds its group in at most 19 steps and its bucket in at most 64.
	groupShift = 6
	groupSize  = 1 << groupShift
	numGroups  = (NumBuckets + groupSize - 1) / groupSize

	cubicA = 6.0 / 35.0
	cubicB = -3.0 / 5.0
	cubicC = 10.0 / 7.0

	mantissaMask = 1<<52 - 1
	oneBits      = 1023 << 52
)

// Histogram is a log-bucket histogram of latencies in seconds with fixed
// bucket boundaries and a relative accuracy of about 1% (RelativeAccuracy).
// Histograms merge exactly, bucket by bucket. The zero value is an empty
// histogram ready to use.
//
// A Histogram is not safe for concurrent use: callers shard or lock it.
// It is a value of about 9 KiB with no pointers; copying it copies it.
type Histogram struct {
	counts [NumBuckets]uint64
	groups [numGroups]uint64 // groups[g] = sum of counts[g*64 : g*64+64]
	count  uint64
	sum    float64
}

// BucketIndex returns the bucket a value in seconds falls into. Values below
// MinSeconds, NaN and negative values fall into bucket 0; values of
// MaxSeconds and above (and +Inf) into bucket NumBuckets−1.
func BucketIndex(seconds float64) int {
	if !(seconds >= MinSeconds) {
		return 0
	}
	if seconds >= MaxSeconds {
		return NumBuckets - 1
	}
	b := math.Float64bits(seconds)
	e := int(b>>52) - 1023
	s := math.Float64frombits(b&mantissaMask|oneBits) - 1
	// The explicit conversions stop the compiler from fusing these into FMA
	// instructions on some architectures, so every platform agrees on every
	// bucket boundary.
	p := float64(float64(float64(float64(cubicA*s)+cubicB)*s)+cubicC) * s
	return 1 + (e-minExp)*perOctave + int(float64(perOctave*p))
}

// BucketBounds returns the bounds of bucket i: values v with lo ≤ v < hi
// fall into it. Bucket 0 is [0, MinSeconds) and the last bucket is
// [MaxSeconds, +Inf). An index out of range is clamped like AddBucket does.
func BucketBounds(i int) (lo, hi float64) {
	i = clampIndex(i)
	return layout.lower[i], layout.lower[i+1]
}

// BucketValue returns the value a quantile falling in bucket i reports: the
// point within RelativeAccuracy of every value of the bucket. The underflow
// bucket reports MinSeconds and the overflow bucket MaxSeconds.
func BucketValue(i int) float64 {
	return layout.value[clampIndex(i)]
}

func clampIndex(i int) int {
	if i < 0 {
		return 0
	}
	if i >= NumBuckets {
		return NumBuckets - 1
	}
	return i
}

// layout holds the bucket bounds, computed once from BucketIndex itself so
// that BucketIndex(lo) == i and every value just below lo falls in i−1.
var layout = makeLayout()

type bucketLayout struct {
	lower [NumBuckets + 1]float64 // lower[i] is the lower bound of bucket i
	value [NumBuckets]float64
}

func makeLayout() *bucketLayout {
	l := new(bucketLayout)
	l.lower[0] = 0
	l.lower[NumBuckets] = math.Inf(1)
	for i := 1; i < NumBuckets; i++ {
		// Smallest float v with BucketIndex(v) >= i, by bisection over the
		// bit patterns, which order positive floats like their values.
		lo, hi := math.Float64bits(MinSeconds), math.Float64bits(MaxSeconds)
		for lo < hi {
			mid := lo + (hi-lo)/2
			if BucketIndex(math.Float64frombits(mid)) >= i {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		l.lower[i] = math.Float64frombits(lo)
	}
	l.value[0] = MinSeconds
	l.value[NumBuckets-1] = MaxSeconds
	for i := 1; i < NumBuckets-1; i++ {
		lo, hi := l.lower[i], l.lower[i+1]
		l.value[i] = 2 * lo * hi / (lo + hi)
	}
	return l
}

// Observe adds one observation in seconds. Values outside [MinSeconds,
// MaxSeconds) are clamped into the end buckets and counted; NaN and
// negative values count as 0 and +Inf as MaxSeconds, so Sum stays finite.
func (h *Histogram) Observe(seconds float64) {
	i := BucketIndex(seconds)
	if i == 0 && !(seconds >= 0) {
		seconds = 0
	} else if seconds > math.MaxFloat64 {
		seconds = MaxSeconds
	}
	h.counts[i]++
	h.groups[i>>groupShift]++
	h.count++
	h.sum += seconds
}

// ObserveDuration adds one observation of d.
func (h *Histogram) ObserveDuration(d time.Duration) {
	h.Observe(float64(d) / 1e9)
}

// Count returns the number of observations.
func (h *Histogram) Count() uint64 { return h.count }

// Sum returns the sum of the observations in seconds. Buckets added with
// AddBucket contribute their count times the bucket's value.
func (h *Histogram) Sum() float64 { return h.sum }

// Mean returns Sum/Count, or 0 when the histogram is empty.
func (h *Histogram) Mean() float64 {
	if h.count == 0 {
		return 0
	}
	return h.sum / float64(h.count)
}

// Quantile returns the q-quantile (0 ≤ q ≤ 1, clamped) of the
// observations: the value of the bucket holding the observation of rank
// ⌈q·Count⌉ (at least 1). It is within RelativeAccuracy of that
// observation when it lies between MinSeconds and MaxSeconds. An empty
// histogram returns 0.
func (h *Histogram) Quantile(q float64) float64 {
	if h.count == 0 {
		return 0
	}
	rank := rankOf(h.count, q)
	if rank <= h.count/2 {
		// From the bottom: the group holding the rank, then its bucket.
		var cum uint64
		for g := 0; g < numGroups; g++ {
			if cum+h.groups[g] < rank {
				cum += h.groups[g]
				continue
			}
			for i := g << groupShift; i < NumBuckets; i++ {
				if cum += h.counts[i]; cum >= rank {
					return layout.value[i]
				}
			}
		}
	} else {
		// From the top, counting the rank from the largest observation, so
		// that a p95 looks at the tail only.
		need := h.count - rank + 1
		var cum uint64
		for g := numGroups - 1; g >= 0; g-- {
			if cum+h.groups[g] < need {
				cum += h.groups[g]
				continue
			}
			for i := min(g<<groupShift+groupSize, NumBuckets) - 1; i >= 0; i-- {
				if cum += h.counts[i]; cum >= need {
					return layout.value[i]
				}
			}
		}
	}
	// Only reached if the counts disagree with count, which they never do
	// for a histogram built through its methods.
	return layout.value[NumBuckets-1]
}

func rankOf(count uint64, q float64) uint64 {
	if !(q > 0) { // also NaN
		return 1
	}
	if q >= 1 {
		return count
	}
	r := uint64(math.Ceil(q * float64(count)))
	if r < 1 {
		r = 1
	}
	if r > count {
		r = count
	}
	return r
}

// Merge adds every observation of o to h. o is not changed; h.Merge(h)
// doubles h.
func (h *Histogram) Merge(o *Histogram) {
	for g, n := range o.groups {
		if n == 0 {
			continue
		}
		h.groups[g] += n
		lo := g << groupShift
		hi := min(lo+groupSize, NumBuckets)
		dst, src := h.counts[lo:hi], o.counts[lo:hi]
		for i := range dst {
			dst[i] += src[i]
		}
	}
	h.count += o.count
	h.sum += o.sum
}

// AddBucket adds count observations to bucket i, as when merging a
// histogram kept elsewhere bucket by bucket (Buckets, Dense). An index out
// of range is clamped into the end buckets, like an out-of-range value.
// Sum grows by count times BucketValue(i).
func (h *Histogram) AddBucket(i int, count uint64) {
	if count == 0 {
		return
	}
	i = clampIndex(i)
	h.counts[i] += count
	h.groups[i>>groupShift] += count
	h.count += count
	h.sum += float64(count) * layout.value[i]
}

// AddDense adds counts, a dense array of NumBuckets bucket counts as
// returned by Dense or stored in ClickHouse, to h. An array of another
// length belongs to another layout: AddDense returns ErrLayout and leaves h
// unchanged.
func (h *Histogram) AddDense(counts []uint64) error {
	if len(counts) != NumBuckets {
		return errorf(ErrLayout, "dense array of %d buckets, want %d", len(counts), NumBuckets)
	}
	for i, c := range counts {
		h.AddBucket(i, c)
	}
	return nil
}

// Buckets calls fn for every non-empty bucket in increasing order.
func (h *Histogram) Buckets(fn func(i int, count uint64)) {
	for g, n := range h.groups {
		if n == 0 {
			continue
		}
		for i := g << groupShift; i < min(g<<groupShift+groupSize, NumBuckets); i++ {
			if c := h.counts[i]; c != 0 {
				fn(i, c)
			}
		}
	}
}

// Dense returns a new slice of NumBuckets counts, one per bucket, as
// ClickHouse stores the histogram in an Array(UInt64) merged with
// sumForEach.
func (h *Histogram) Dense() []uint64 {
	d := make([]uint64, NumBuckets)
	copy(d, h.counts[:])
	return d
}

// Reset empties h.
func (h *Histogram) Reset() {
	for g, n := range h.groups {
		if n != 0 {
			clear(h.counts[g<<groupShift : min(g<<groupShift+groupSize, NumBuckets)])
		}
	}
	h.groups = [numGroups]uint64{}
	h.count, h.sum = 0, 0
}

// Clone returns a copy of h.
func (h *Histogram) Clone() *Histogram {
	c := *h
	return &c
}
