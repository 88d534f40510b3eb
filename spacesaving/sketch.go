package spacesaving

import (
	"hash/maphash"
	"math/bits"
	"slices"
	"strings"
)

// MaxCapacity bounds the capacity of a sketch, so that neither New nor a
// decoder can be asked for an unbounded allocation.
const MaxCapacity = 1 << 20

// DefaultCapacity is the capacity of a zero Sketch.
const DefaultCapacity = 1000

// alphaPerCounter is how many filter buckets a sketch keeps per counter,
// before rounding up to a power of two. More buckets keep light keys
// apart from heavy ones for longer (better recall) at 8 bytes each; 4
// keeps a capacity-1000 sketch under 100 KB and the Zipf(1.1) top-100
// recall at capacity 200 at 1.00 (see the benchmarks).
const alphaPerCounter = 4

// seed is the process-wide hash seed. It is random per process, so an
// outsider who chooses keys cannot aim them at one bucket of the index;
// sketches of one process share it, so merging them keeps the filter
// exact. Sketches decoded from another process are rehashed (see
// UnmarshalBinary). It is never mutated.
var seed = maphash.MakeSeed()

// seedID identifies seed in encodings without revealing it.
var seedID = maphash.String(seed, "qtop spacesaving seed id")

// Counter is one monitored key. Count is an upper bound of the key's true
// count and Count−Err a lower bound.
type Counter struct {
	Key   string
	Count uint64
	Err   uint64
}

// counter is a Counter in the heap, with the hash that places it in the
// index and the index slot that points back at it.
type counter struct {
	key   string
	count uint64
	err   uint64
	hash  uint64
	slot  uint32
}

// Sketch is a filtered Space-Saving summary of a weighted stream of string
// keys. It keeps at most Capacity keys in a min-heap by count, found
// through an open-addressing index, plus a small array of filter buckets
// (alpha) that absorb keys too light to displace a monitored one.
//
// The zero Sketch is ready to use with DefaultCapacity. A Sketch is not
// safe for concurrent use; see Concurrent.
//
// Keys are retained as given, without copying: pass strings whose bytes
// are not modified afterwards (ordinary Go strings never are).
type Sketch struct {
	heap  []counter // min-heap by count; len ≤ cap(heap) = capacity
	index []uint64  // open addressing: hash>>32<<32 | heap position+1; 0 is empty
	alpha []uint64  // filter buckets, indexed by the top bits of the hash
	mask  uint64    // len(index)-1
	shift uint      // 64 - log2(len(alpha))
	total uint64
}

// New returns an empty sketch that monitors at most capacity keys.
// Capacity must be between 1 and MaxCapacity; New panics otherwise, since
// a capacity is a constant of the program, not an input.
func New(capacity int) *Sketch {
	if capacity < 1 || capacity > MaxCapacity {
		panic("spacesaving: capacity out of range [1, MaxCapacity]")
	}
	s := new(Sketch)
	s.init(capacity)
	return s
}

func (s *Sketch) init(capacity int) {
	s.heap = make([]counter, 0, capacity)
	isize := 1 << bits.Len(uint(2*capacity-1)) // ≥ 2×capacity: load ≤ 0.5
	if isize < 4 {
		isize = 4
	}
	s.index = make([]uint64, isize)
	s.mask = uint64(isize - 1)
	abits := bits.Len(uint(alphaPerCounter*capacity - 1))
	if abits < 2 {
		abits = 2
	}
	s.alpha = make([]uint64, 1<<abits)
	s.shift = uint(64 - abits)
	s.total = 0
}

func hashKey(key string) uint64 { return maphash.String(seed, key) }

// Capacity returns the most keys the sketch monitors.
func (s *Sketch) Capacity() int {
	if s.heap == nil {
		return DefaultCapacity
	}
	return cap(s.heap)
}

// Len returns how many keys the sketch monitors now.
func (s *Sketch) Len() int { return len(s.heap) }

// Total returns the sum of all weights added, including merged sketches.
func (s *Sketch) Total() uint64 { return s.total }

// Reset empties the sketch and keeps its capacity and memory.
func (s *Sketch) Reset() {
	if s.heap == nil {
		return
	}
	s.heap = s.heap[:0]
	clear(s.index)
	clear(s.alpha)
	s.total = 0
}

// Add counts weight more for key. It does not allocate once the sketch is
// initialised. A zero weight changes nothing.
func (s *Sketch) Add(key string, weight uint64) {
	if s.heap == nil {
		s.init(DefaultCapacity)
	}
	s.addHash(key, hashKey(key), weight)
}

func (s *Sketch) addHash(key string, h, weight uint64) {
	if weight == 0 {
		return
	}
	s.total += weight
	tag := h &^ 0xffffffff
	for i := h & s.mask; ; i = (i + 1) & s.mask {
		e := s.index[i]
		if e == 0 {
			break
		}
		if e&^0xffffffff == tag {
			p := int(uint32(e)) - 1
			if c := &s.heap[p]; c.key == key {
				c.count += weight
				s.down(p)
				return
			}
		}
	}
	a := &s.alpha[h>>s.shift]
	if n := len(s.heap); n < cap(s.heap) {
		s.heap = s.heap[:n+1]
		s.heap[n] = counter{key: key, count: *a + weight, err: *a, hash: h}
		s.place(n)
		s.up(n)
		return
	}
	m := &s.heap[0]
	if *a+weight < m.count {
		// Too light to displace the least monitored key: the bucket
		// remembers it, an upper bound for every key that hashes here.
		*a += weight
		return
	}
	// Evict the minimum; its count bounds it from now on.
	if ev := &s.alpha[m.hash>>s.shift]; *ev < m.count {
		*ev = m.count
	}
	s.unplace(m.slot)
	*m = counter{key: key, count: *a + weight, err: *a, hash: h}
	s.place(0)
	s.down(0)
}

// place enters heap position p in the index.
func (s *Sketch) place(p int) {
	c := &s.heap[p]
	i := c.hash & s.mask
	for s.index[i] != 0 {
		i = (i + 1) & s.mask
	}
	s.index[i] = c.hash&^0xffffffff | uint64(p+1)
	c.slot = uint32(i)
}

// unplace empties slot i of the index with backward-shift deletion, so
// that probing needs no tombstones.
func (s *Sketch) unplace(i uint32) {
	mask := s.mask
	hole := uint64(i)
	for j := (hole + 1) & mask; ; j = (j + 1) & mask {
		e := s.index[j]
		if e == 0 {
			break
		}
		c := &s.heap[uint32(e)-1]
		home := c.hash & mask
		// Move e into the hole unless its home lies cyclically in (hole, j].
		if (j-home)&mask >= (j-hole)&mask {
			s.index[hole] = e
			c.slot = uint32(hole)
			hole = j
		}
	}
	s.index[hole] = 0
}

func (s *Sketch) swap(i, j int) {
	h := s.heap
	h[i], h[j] = h[j], h[i]
	s.index[h[i].slot] = s.index[h[i].slot]&^0xffffffff | uint64(i+1)
	s.index[h[j].slot] = s.index[h[j].slot]&^0xffffffff | uint64(j+1)
}

func (s *Sketch) up(p int) {
	h := s.heap
	for p > 0 {
		q := (p - 1) / 2
		if h[q].count <= h[p].count {
			return
		}
		s.swap(p, q)
		p = q
	}
}

func (s *Sketch) down(p int) {
	h := s.heap
	n := len(h)
	for {
		l := 2*p + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h[r].count < h[l].count {
			m = r
		}
		if h[p].count <= h[m].count {
			return
		}
		s.swap(p, m)
		p = m
	}
}

// find returns the heap position of key, or -1.
func (s *Sketch) find(key string, h uint64) int {
	if s.heap == nil {
		return -1
	}
	tag := h &^ 0xffffffff
	for i := h & s.mask; ; i = (i + 1) & s.mask {
		e := s.index[i]
		if e == 0 {
			return -1
		}
		if e&^0xffffffff == tag {
			if p := int(uint32(e)) - 1; s.heap[p].key == key {
				return p
			}
		}
	}
}

// Estimate returns the bounds for key. When the key is monitored, ok is
// true and count ≥ true count ≥ count − err. When it is not, ok is false
// and count = err is an upper bound of its true count (0 for a key never
// seen before the sketch filled).
func (s *Sketch) Estimate(key string) (count, err uint64, ok bool) {
	if s.heap == nil {
		return 0, 0, false
	}
	h := hashKey(key)
	if p := s.find(key, h); p >= 0 {
		c := &s.heap[p]
		return c.count, c.err, true
	}
	a := s.alpha[h>>s.shift]
	return a, a, false
}

// Top returns the n monitored keys with the highest counts, by Count
// descending (ties by lower Err, then by key). n < 0 or n > Len means all.
func (s *Sketch) Top(n int) []Counter {
	if n < 0 || n > len(s.heap) {
		n = len(s.heap)
	}
	out := make([]Counter, len(s.heap))
	for i := range s.heap {
		c := &s.heap[i]
		out[i] = Counter{Key: c.key, Count: c.count, Err: c.err}
	}
	slices.SortFunc(out, compareCounters)
	return out[:n:n]
}

func compareCounters(a, b Counter) int {
	switch {
	case a.Count != b.Count:
		if a.Count > b.Count {
			return -1
		}
		return 1
	case a.Err != b.Err:
		if a.Err < b.Err {
			return -1
		}
		return 1
	}
	return strings.Compare(a.Key, b.Key)
}

// Clone returns an independent copy of the sketch.
func (s *Sketch) Clone() *Sketch {
	if s.heap == nil {
		return New(DefaultCapacity)
	}
	c := &Sketch{
		heap:  make([]counter, len(s.heap), cap(s.heap)),
		index: slices.Clone(s.index),
		alpha: slices.Clone(s.alpha),
		mask:  s.mask,
		shift: s.shift,
		total: s.total,
	}
	copy(c.heap, s.heap)
	return c
}

// maxAlpha is a bound on the true count of every key the sketch does not
// monitor.
func (s *Sketch) maxAlpha() uint64 {
	var m uint64
	for _, a := range s.alpha {
		m = max(m, a)
	}
	return m
}

// Merge adds the stream summarised by o to s, so that s summarises the
// union of both streams with the guarantees of the package doc (for
// sketches of equal capacity; otherwise those of the smaller one). o is
// not modified; merging a sketch into itself doubles it. A zero Sketch
// takes the capacity of o.
//
// A key monitored by only one of the two is charged, in count and in
// error, the largest bucket of the other: a bound on any key that other
// does not monitor. Keys beyond the capacity of s are folded into its
// buckets.
func (s *Sketch) Merge(o *Sketch) {
	if o == nil || o.heap == nil || (o.total == 0 && len(o.heap) == 0) {
		return
	}
	if o == s {
		o = s.Clone()
	}
	if s.heap == nil {
		s.init(cap(o.heap)) // a zero Sketch takes the capacity of the first it merges
	}
	us, uo := s.maxAlpha(), o.maxAlpha()

	all := make([]counter, 0, len(s.heap)+len(o.heap))
	seen := make([]bool, len(s.heap))
	for i := range o.heap {
		oc := o.heap[i]
		if p := s.find(oc.key, oc.hash); p >= 0 {
			seen[p] = true
			sc := &s.heap[p]
			oc.count += sc.count
			oc.err += sc.err
		} else {
			oc.count += us
			oc.err += us
		}
		all = append(all, oc)
	}
	for p := range s.heap {
		if !seen[p] {
			c := s.heap[p]
			c.count += uo
			c.err += uo
			all = append(all, c)
		}
	}

	// Buckets: same hash and a power-of-two size, so map them exactly.
	if len(o.alpha) >= len(s.alpha) {
		d := uint(bits.Len(uint(len(o.alpha))) - bits.Len(uint(len(s.alpha))))
		for i := range s.alpha {
			var m uint64
			for _, a := range o.alpha[i<<d : (i+1)<<d] {
				m = max(m, a)
			}
			s.alpha[i] += m
		}
	} else {
		d := uint(bits.Len(uint(len(s.alpha))) - bits.Len(uint(len(o.alpha))))
		for i := range s.alpha {
			s.alpha[i] += o.alpha[i>>d]
		}
	}
	s.total += o.total
	s.rebuild(all)
}

// rebuild keeps the capacity largest of cs, folds the rest into the
// buckets, and rebuilds the heap and the index.
func (s *Sketch) rebuild(cs []counter) {
	if len(cs) > cap(s.heap) {
		slices.SortFunc(cs, func(a, b counter) int {
			return compareCounters(Counter{a.key, a.count, a.err}, Counter{b.key, b.count, b.err})
		})
		for _, c := range cs[cap(s.heap):] {
			if a := &s.alpha[c.hash>>s.shift]; *a < c.count {
				*a = c.count
			}
		}
		cs = cs[:cap(s.heap)]
	}
	s.heap = s.heap[:len(cs)]
	copy(s.heap, cs)
	clear(s.index)
	for p := range s.heap {
		s.place(p)
	}
	for p := len(s.heap)/2 - 1; p >= 0; p-- {
		s.down(p)
	}
}
