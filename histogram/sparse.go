package histogram

import (
	"math/bits"
	"slices"
	"sync"
	"time"
	"unsafe"
)

const sparseWords = (NumBuckets + 63) / 64

// SparseIndexBytes is what a non-empty Sparse holds besides its counts
// (8 bytes per non-empty bucket): a Sparse of k buckets takes 32 +
// SparseIndexBytes + 8·k bytes, an empty one 32.
const SparseIndexBytes = int(unsafe.Sizeof(sparseIndex{}))

// sparseIndex says which buckets of a Sparse histogram are non-empty: one
// bit per bucket, and for each word the number of bits set before it, so
// the position of a bucket's count is found in constant time.
type sparseIndex struct {
	bits [sparseWords]uint64
	pre  [sparseWords]uint16
}

// Sparse is a Histogram that keeps only its non-empty buckets, bucket for
// bucket equal to the dense one it is loaded from or merged into (same
// bucket indexes, same counts, same quantiles), and mergeable. A row of
// one tenant touches a few dozen of the NumBuckets buckets, so this is ~30
// times smaller than a Histogram. The index is allocated on first use; an
// empty Sparse is 32 bytes, and its zero value is an empty histogram.
// Counts saturate at the largest uint64 instead of wrapping.
//
// A Sparse refers to its memory: a copy of the value shares it, and
// changing one changes (or breaks) the other. Copy with Clone. It is not
// safe for concurrent use, except for concurrent reads.
type Sparse struct {
	ix  *sparseIndex
	cnt []uint64 // the counts of the non-empty buckets, in bucket order
}

func (s *Sparse) rank(i int) (int, bool) {
	w, b := i>>6, uint(i&63)
	r := int(s.ix.pre[w]) + bits.OnesCount64(s.ix.bits[w]&(1<<b-1))
	return r, s.ix.bits[w]&(1<<b) != 0
}

func (s *Sparse) reindex() {
	n := 0
	for w := range sparseWords {
		s.ix.pre[w] = uint16(n)
		n += bits.OnesCount64(s.ix.bits[w])
	}
}

// Add adds c to bucket i (clamped to the bucket range).
func (s *Sparse) Add(i int, c uint64) {
	if c == 0 {
		return
	}
	i = min(max(i, 0), NumBuckets-1)
	if s.ix == nil {
		s.ix = new(sparseIndex)
	}
	r, ok := s.rank(i)
	if ok {
		satAdd(&s.cnt[r], c)
		return
	}
	s.cnt = slices.Insert(s.cnt, r, c)
	w := i >> 6
	s.ix.bits[w] |= 1 << uint(i&63)
	for k := w + 1; k < sparseWords; k++ {
		s.ix.pre[k]++
	}
}

// Observe adds one observation in seconds, into the bucket
// Histogram.Observe puts it in (BucketIndex).
func (s *Sparse) Observe(seconds float64) { s.Add(BucketIndex(seconds), 1) }

// ObserveDuration adds one observation of d.
func (s *Sparse) ObserveDuration(d time.Duration) { s.Observe(float64(d) / 1e9) }

// Grow makes room for n more non-empty buckets, so that the next n Adds
// of new buckets allocate nothing.
func (s *Sparse) Grow(n int) {
	if n <= 0 {
		return
	}
	if s.ix == nil {
		s.ix = new(sparseIndex)
	}
	if cap(s.cnt)-len(s.cnt) < n { // one allocation of the size asked, in every build mode
		c := make([]uint64, len(s.cnt), len(s.cnt)+n)
		copy(c, s.cnt)
		s.cnt = c
	}
}

// Clone returns a copy of s that shares no memory with it.
func (s *Sparse) Clone() Sparse {
	if len(s.cnt) == 0 {
		return Sparse{}
	}
	ix := *s.ix
	return Sparse{ix: &ix, cnt: slices.Clone(s.cnt)}
}

// Equal reports whether s and o hold the same counts in the same buckets.
func (s *Sparse) Equal(o *Sparse) bool {
	if len(s.cnt) != len(o.cnt) {
		return false
	}
	return len(s.cnt) == 0 || (s.ix.bits == o.ix.bits && slices.Equal(s.cnt, o.cnt))
}

// AppendPairs appends the non-empty buckets of s to idx (their indexes,
// increasing) and cnt (their counts), the form ClickHouse and the store's
// spool keep a histogram in, and returns the extended slices.
func (s *Sparse) AppendPairs(idx []uint16, cnt []uint64) ([]uint16, []uint64) {
	idx = slices.Grow(idx, len(s.cnt))
	s.each(func(i int, _ uint64) bool { idx = append(idx, uint16(i)); return true })
	return idx, append(cnt, s.cnt...)
}

// SetPairs replaces s with count cnt[k] in bucket idx[k], the inverse of
// AppendPairs. The indexes must increase strictly and be below NumBuckets
// (else ErrCorrupt or ErrLayout, and s is left empty); a zero count leaves
// its bucket empty. It allocates at most twice, and nothing when s has
// the room already.
func (s *Sparse) SetPairs(idx []uint16, cnt []uint64) error {
	s.Reset()
	if len(idx) != len(cnt) {
		return errorf(ErrCorrupt, "%d bucket indexes for %d counts", len(idx), len(cnt))
	}
	s.Grow(len(cnt))
	prev := -1
	for k, u := range idx {
		i := int(u)
		switch {
		case i >= NumBuckets:
			s.clearAll()
			return errorf(ErrLayout, "bucket %d of %d", i, NumBuckets)
		case i <= prev:
			s.clearAll()
			return errorf(ErrCorrupt, "bucket %d after bucket %d (indexes must increase)", i, prev)
		}
		prev = i
		if cnt[k] != 0 {
			s.ix.bits[i>>6] |= 1 << uint(i&63)
			s.cnt = append(s.cnt, cnt[k])
		}
	}
	if len(s.cnt) > 0 {
		s.reindex()
	}
	return nil
}

// clearAll empties s whatever its index holds (SetPairs sets bits before
// it knows that the input is good).
func (s *Sparse) clearAll() {
	if s.ix != nil {
		*s.ix = sparseIndex{}
	}
	s.cnt = s.cnt[:0]
}

// AddHistogram adds every bucket of h.
func (s *Sparse) AddHistogram(h *Histogram) {
	if h.Count() == 0 {
		return
	}
	h.Buckets(s.Add)
}

// Load replaces s with the non-empty buckets of h.
func (s *Sparse) Load(h *Histogram) {
	s.Reset()
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

// Merge adds o to s.
func (s *Sparse) Merge(o *Sparse) {
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
	// Only the words where o has buckets are read: a row's latency spans
	// a few of the sparseWords words, and s is often cold in the cache.
	// Buckets s has are added in place; o's others are counted, and
	// inserted below.
	var fresh [sparseWords]uint64
	added, k := 0, 0
	for w := range sparseWords {
		ob := o.ix.bits[w]
		if ob == 0 {
			continue
		}
		sb := s.ix.bits[w]
		nb := ob &^ sb
		fresh[w] = nb
		added += bits.OnesCount64(nb)
		for ob != 0 {
			b := uint(bits.TrailingZeros64(ob))
			ob &= ob - 1
			if nb&(1<<b) == 0 {
				satAdd(&s.cnt[int(s.ix.pre[w])+bits.OnesCount64(sb&(1<<b-1))], o.cnt[k])
			}
			k++
		}
	}
	if added > 0 {
		s.insert(o, &fresh, added)
	}
}

// insert puts o's buckets fresh (added of them, none of them in s) into
// s. From the top word down, s's counts move up by the number of new
// buckets below them: a word without new buckets moves as part of one
// block, a word with some is merged count by count, and the words below
// the lowest new bucket do not move.
func (s *Sparse) insert(o *Sparse, fresh *[sparseWords]uint64, added int) {
	hi := len(s.cnt) // s's counts from hi up are in place
	s.cnt = slices.Grow(s.cnt, added)[:hi+added]
	rem := added
	for w := sparseWords - 1; w >= 0 && rem > 0; w-- {
		nb := fresh[w]
		if nb == 0 {
			continue
		}
		sb := s.ix.bits[w]
		lo := int(s.ix.pre[w])
		end := lo + bits.OnesCount64(sb)
		copy(s.cnt[end+rem:hi+rem], s.cnt[end:hi])
		all, ob := sb|nb, o.ix.bits[w]
		s.ix.bits[w] = all
		dst, src := end+rem-1, end-1
		for all != 0 && rem > 0 {
			b := uint(63 - bits.LeadingZeros64(all))
			all &^= 1 << b
			if nb&(1<<b) != 0 {
				s.cnt[dst] = o.cnt[int(o.ix.pre[w])+bits.OnesCount64(ob&(1<<b-1))]
				rem--
			} else {
				s.cnt[dst] = s.cnt[src]
				src--
			}
			dst--
		}
		hi = lo
	}
	s.reindex()
}

// Reset empties s, keeping its memory.
func (s *Sparse) Reset() {
	if s.ix != nil && len(s.cnt) > 0 {
		*s.ix = sparseIndex{}
	}
	s.cnt = s.cnt[:0]
}

// Count is the number of observations (saturating, as the counts do).
func (s *Sparse) Count() uint64 {
	var n uint64
	for _, c := range s.cnt {
		satAdd(&n, c)
	}
	return n
}

// each calls fn with every non-empty bucket, in order.
func (s *Sparse) each(fn func(i int, c uint64) bool) {
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

// Dense returns the buckets as Histogram.Dense does; nil when empty.
func (s *Sparse) Dense() []uint64 {
	if len(s.cnt) == 0 {
		return nil
	}
	d := make([]uint64, NumBuckets)
	s.each(func(i int, c uint64) bool { d[i] = c; return true })
	return d
}

// Quantile estimates the q-quantile in seconds (0 when empty): the
// representative value of the bucket holding rank ⌈q·n⌉ (at least 1), the
// value Histogram.Quantile gives for the same buckets.
func (s *Sparse) Quantile(q float64) float64 {
	n := s.Count()
	if n == 0 {
		return 0
	}
	rank := rankOf(n, q) // as Histogram.Quantile ranks
	var seen uint64
	out := 0.0
	s.each(func(i int, c uint64) bool {
		seen += c
		out = BucketValue(i)
		return seen < rank
	})
	return out
}

// QuantileOf is the q-quantile of the merge of hs, in seconds. The merge
// is made in scratch memory kept for the next call.
func QuantileOf(q float64, hs ...*Sparse) float64 {
	if len(hs) == 1 {
		return hs[0].Quantile(q)
	}
	all := mergeScratch.Get().(*Sparse)
	for _, h := range hs {
		all.Merge(h)
	}
	v := all.Quantile(q)
	all.Reset()
	mergeScratch.Put(all)
	return v
}

// mergeScratch keeps QuantileOf's merges (at most NumBuckets counts each).
var mergeScratch = sync.Pool{New: func() any { return new(Sparse) }}

// Len is the number of non-empty buckets.
func (s *Sparse) Len() int { return len(s.cnt) }

// Buckets calls fn for every non-empty bucket in increasing order, as
// Histogram.Buckets does.
func (s *Sparse) Buckets(fn func(i int, count uint64)) {
	s.each(func(i int, c uint64) bool { fn(i, c); return true })
}

// satAdd adds b to *a, stopping at the largest uint64.
func satAdd(a *uint64, b uint64) {
	if sum := *a + b; sum >= *a {
		*a = sum
	} else {
		*a = ^uint64(0)
	}
}
