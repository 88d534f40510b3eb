package collector

import (
	"slices"

	"github.com/qtop-dev/qtop/ratio"
)

// sparse is a latency histogram that keeps only its non-empty buckets, in
// bucket order: a row of one tenant touches a few dozen of the
// ratio.NumBuckets buckets, so this is ~100 times smaller than a
// ratio.Histogram.
type sparse struct {
	idx []uint16
	cnt []uint64
}

func (s *sparse) add(i int, c uint64) {
	if c == 0 {
		return
	}
	n := len(s.idx)
	if n == 0 || int(s.idx[n-1]) < i {
		s.idx = append(s.idx, uint16(i))
		s.cnt = append(s.cnt, c)
		return
	}
	p, found := slices.BinarySearch(s.idx, uint16(i))
	if found {
		s.cnt[p] += c
		return
	}
	s.idx = slices.Insert(s.idx, p, uint16(i))
	s.cnt = slices.Insert(s.cnt, p, c)
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
	h.Buckets(func(i int, c uint64) {
		if c > 0 {
			s.idx = append(s.idx, uint16(i))
			s.cnt = append(s.cnt, c)
		}
	})
}

// merge adds o to s (both in bucket order): buckets s has are found by
// binary search from the last position, and the buckets it lacks, if
// any, are merged in from the back in one pass.
func (s *sparse) merge(o *sparse) {
	if len(o.idx) == 0 {
		return
	}
	if len(s.idx) == 0 {
		s.idx = append(s.idx, o.idx...)
		s.cnt = append(s.cnt, o.cnt...)
		return
	}
	var missIdx [64]uint16
	var missCnt [64]uint64
	miss := 0
	lo := 0
	for j, b := range o.idx {
		p, found := slices.BinarySearch(s.idx[lo:], b)
		p += lo
		if found {
			s.cnt[p] += o.cnt[j]
			lo = p + 1
			continue
		}
		lo = p
		if miss == len(missIdx) {
			// Many new buckets: add the rest one by one.
			for k := j; k < len(o.idx); k++ {
				s.add(int(o.idx[k]), o.cnt[k])
			}
			break
		}
		missIdx[miss], missCnt[miss] = b, o.cnt[j]
		miss++
	}
	if miss == 0 {
		return
	}
	n := len(s.idx)
	s.idx = append(s.idx, missIdx[:miss]...)
	s.cnt = append(s.cnt, missCnt[:miss]...)
	i, j, k := n-1, miss-1, len(s.idx)-1
	for j >= 0 {
		if i >= 0 && s.idx[i] > missIdx[j] {
			s.idx[k], s.cnt[k] = s.idx[i], s.cnt[i]
			i--
		} else {
			s.idx[k], s.cnt[k] = missIdx[j], missCnt[j]
			j--
		}
		k--
	}
}

func (s *sparse) reset() {
	s.idx = s.idx[:0]
	s.cnt = s.cnt[:0]
}

func (s *sparse) count() uint64 {
	var n uint64
	for _, c := range s.cnt {
		n += c
	}
	return n
}

// dense returns the buckets as ratio.Histogram.Dense does; nil when empty.
func (s *sparse) dense() []uint64 {
	if len(s.idx) == 0 {
		return nil
	}
	d := make([]uint64, ratio.NumBuckets)
	for k, i := range s.idx {
		d[i] = s.cnt[k]
	}
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
	for k, c := range s.cnt {
		seen += c
		if seen >= rank {
			return ratio.BucketValue(int(s.idx[k]))
		}
	}
	return ratio.BucketValue(int(s.idx[len(s.idx)-1]))
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
