package collector

import (
	"math/bits"
	"slices"

	"github.com/qtop-dev/qtop/ratio"
)

const sparseWords = (ratio.NumBuckets + 63) / 64

// sparseIndex says which buckets of a sparse histogram are non-empty: one
// bit per bucket, and for each word the number of bits set before it, so
// the position of a bucket's count is found in constant time.
type sparseIndex struct {
	bits [sparseWords]uint64
	pre  [sparseWords]uint16
}

// sparse is a latency histogram that keeps only its non-empty buckets: a
// row of one tenant touches a few dozen of the ratio.NumBuckets buckets,
// so this is ~30 times smaller than a ratio.Histogram. The index is
// allocated on first use; an empty sparse is 32 bytes.
type sparse struct {
	ix  *sparseIndex
	cnt []uint64 // the counts of the non-empty buckets, in bucket order
}

func (s *sparse) rank(i int) (int, bool) {
	w, b := i>>6, uint(i&63)
	r := int(s.ix.pre[w]) + bits.OnesCount64(s.ix.bits[w]&(1<<b-1))
	return r, s.ix.bits[w]&(1<<b) != 0
}

func (s *sparse) reindex() {
	n := 0
	for w := range sparseWords {
		s.ix.pre[w] = uint16(n)
		n += bits.OnesCount64(s.ix.bits[w])
	}
}

func (s *sparse) add(i int, c uint64) {
	if c == 0 {
		return
	}
	i = min(max(i, 0), ratio.NumBuckets-1)
	if s.ix == nil {
		s.ix = new(sparseIndex)
	}
	r, ok := s.rank(i)
	if ok {
		addSat(&s.cnt[r], c)
		return
	}
	s.cnt = slices.Insert(s.cnt, r, c)
	w := i >> 6
	s.ix.bits[w] |= 1 << uint(i&63)
	for k := w + 1; k < sparseWords; k++ {
		s.ix.pre[k]++
	}
}

func (s *sparse) addHistogram(h *ratio.Histogram) {
	if h.Count() == 0 {
		return
	}
	h.Buckets(s.add)
}

// load replaces s with the non-empty buckets of h.
func (s *sparse) load(h *ratio.Histogram) {
	s.reset()
	if h.Count() == 0 {
		return
	}
	if s.ix == nil {
		s.ix = new(sparseIndex)
	}
	h.Buckets(func(i int, c uint64) {
		if c > 0 {
			s.ix.bits[i>>6] |= 1 << uint(i&63)
			s.cnt = append(s.cnt, c)
		}
	})
	s.reindex()
}

// merge adds o to s.
func (s *sparse) merge(o *sparse) {
	if len(o.cnt) == 0 {
		return
	}
	if s.ix == nil {
		s.ix = new(sparseIndex)
	}
	if len(s.cnt) == 0 {
		*s.ix = *o.ix
		s.cnt = append(s.cnt[:0], o.cnt...)
		return
	}
	subset := true
	for w := range sparseWords {
		if o.ix.bits[w]&^s.ix.bits[w] != 0 {
			subset = false
			break
		}
	}
	if subset { // the common case: add in place
		k := 0
		for w := range sparseWords {
			ob := o.ix.bits[w]
			for ob != 0 {
				b := uint(bits.TrailingZeros64(ob))
				ob &= ob - 1
				r := int(s.ix.pre[w]) + bits.OnesCount64(s.ix.bits[w]&(1<<b-1))
				addSat(&s.cnt[r], o.cnt[k])
				k++
			}
		}
		return
	}
	// New buckets: grow, and merge from the back in one pass.
	total := 0
	for w := range sparseWords {
		total += bits.OnesCount64(s.ix.bits[w] | o.ix.bits[w])
	}
	is, io, k := len(s.cnt)-1, len(o.cnt)-1, total-1
	s.cnt = append(s.cnt, make([]uint64, total-len(s.cnt))...)
	for w := sparseWords - 1; w >= 0; w-- {
		sb, ob := s.ix.bits[w], o.ix.bits[w]
		nb := sb | ob
		for nb != 0 {
			b := uint(63 - bits.LeadingZeros64(nb))
			nb &^= 1 << b
			var v uint64
			if sb&(1<<b) != 0 {
				v += s.cnt[is]
				is--
			}
			if ob&(1<<b) != 0 {
				v += o.cnt[io]
				io--
			}
			s.cnt[k] = v
			k--
		}
		s.ix.bits[w] = sb | ob
	}
	s.reindex()
}

func (s *sparse) reset() {
	if s.ix != nil && len(s.cnt) > 0 {
		*s.ix = sparseIndex{}
	}
	s.cnt = s.cnt[:0]
}

func (s *sparse) count() uint64 {
	var n uint64
	for _, c := range s.cnt {
		n += c
	}
	return n
}

// each calls fn with every non-empty bucket, in order.
func (s *sparse) each(fn func(i int, c uint64) bool) {
	if len(s.cnt) == 0 {
		return
	}
	k := 0
	for w := range sparseWords {
		wb := s.ix.bits[w]
		for wb != 0 {
			b := bits.TrailingZeros64(wb)
			wb &= wb - 1
			if !fn(w<<6|b, s.cnt[k]) {
				return
			}
			k++
		}
	}
}

// dense returns the buckets as ratio.Histogram.Dense does; nil when empty.
func (s *sparse) dense() []uint64 {
	if len(s.cnt) == 0 {
		return nil
	}
	d := make([]uint64, ratio.NumBuckets)
	s.each(func(i int, c uint64) bool { d[i] = c; return true })
	return d
}

// quantile estimates the q-quantile in seconds (0 when empty): the
// representative value of the bucket holding rank ⌈q·n⌉.
func (s *sparse) quantile(q float64) float64 {
	n := s.count()
	if n == 0 {
		return 0
	}
	rank := uint64(q*float64(n) + 0.999999)
	if rank < 1 {
		rank = 1
	}
	var seen uint64
	out := 0.0
	s.each(func(i int, c uint64) bool {
		seen += c
		out = ratio.BucketValue(i)
		return seen < rank
	})
	return out
}

func quantileOf(q float64, hs ...*sparse) float64 {
	if len(hs) == 1 {
		return hs[0].quantile(q)
	}
	var all sparse
	for _, h := range hs {
		all.merge(h)
	}
	return all.quantile(q)
}
