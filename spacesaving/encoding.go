package spacesaving

import (
	"encoding"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
)

// Errors returned by UnmarshalBinary; test with errors.Is.
var (
	ErrVersion   = errors.New("spacesaving: unknown encoding version")
	ErrCorrupt   = errors.New("spacesaving: corrupt encoding")
	ErrTruncated = errors.New("spacesaving: truncated encoding")
)

var (
	_ encoding.BinaryMarshaler   = (*Sketch)(nil)
	_ encoding.BinaryUnmarshaler = (*Sketch)(nil)
	_ encoding.BinaryAppender    = (*Sketch)(nil)
)

// encodingVersion is the first byte of MarshalBinary's output.
//
// Version 1, after the version byte, all integers unsigned varints:
//
//	capacity, log2(len(alpha)), seed id (8 bytes, little endian), total,
//	n, n × (len(key), key bytes, count, err), len(alpha) × bucket
const encodingVersion = 1

// MarshalBinary encodes the sketch: counters, buckets and total. The
// encoding is versioned and portable between processes.
func (s *Sketch) MarshalBinary() ([]byte, error) {
	return s.AppendBinary(make([]byte, 0, s.encodedSizeHint()))
}

// AppendBinary appends the encoding of MarshalBinary to b.
func (s *Sketch) AppendBinary(b []byte) ([]byte, error) {
	if s.heap == nil {
		s = New(DefaultCapacity) // encode the zero Sketch without changing it
	}
	b = append(b, encodingVersion)
	b = binary.AppendUvarint(b, uint64(cap(s.heap)))
	b = binary.AppendUvarint(b, uint64(64-s.shift))
	b = binary.LittleEndian.AppendUint64(b, seedID)
	b = binary.AppendUvarint(b, s.total)
	b = binary.AppendUvarint(b, uint64(len(s.heap)))
	for i := range s.heap {
		c := &s.heap[i]
		b = binary.AppendUvarint(b, uint64(len(c.key)))
		b = append(b, c.key...)
		b = binary.AppendUvarint(b, c.count)
		b = binary.AppendUvarint(b, c.err)
	}
	for _, a := range s.alpha {
		b = binary.AppendUvarint(b, a)
	}
	return b, nil
}

func (s *Sketch) encodedSizeHint() int {
	n := 1 + 4*binary.MaxVarintLen64 + 8 + len(s.heap)*(3*4) + len(s.alpha)*2
	for i := range s.heap {
		n += len(s.heap[i].key)
	}
	return n
}

// UnmarshalBinary replaces the sketch with the one encoded in data. On
// error the sketch is unchanged. Allocation is bounded by len(data): each
// counter and bucket takes at least one byte of input.
//
// A sketch encoded by another process was hashed with another seed; its
// buckets are then replaced by their maximum, a bound that holds whatever
// the hash, so merging it stays correct (if looser for light keys).
func (s *Sketch) UnmarshalBinary(data []byte) error {
	d := decoder{b: data}
	h, err := d.header()
	if err != nil {
		return err
	}
	t := new(Sketch)
	t.init(int(h.capacity))
	t.total = h.total
	cs, minCount, err := d.counters(len(data), h.n, h.total)
	if err != nil {
		return err
	}
	var amax uint64
	for i := range t.alpha {
		t.alpha[i] = d.uvarint()
		amax = max(amax, t.alpha[i])
	}
	if d.err != nil {
		return d.err
	}
	if len(d.b) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrCorrupt, len(d.b))
	}
	if amax > h.total || amax > minCount {
		// A bucket holds evicted or filtered counts, never more than a
		// monitored key: the filter's invariant.
		return fmt.Errorf("%w: bucket %d exceeds a monitored count or the total %d", ErrCorrupt, amax, h.total)
	}
	if h.id != seedID {
		for i := range t.alpha {
			t.alpha[i] = amax
		}
	}
	for i := range cs {
		t.heap = append(t.heap, cs[i])
		if t.find(cs[i].key, cs[i].hash) >= 0 {
			return fmt.Errorf("%w: key %q twice", ErrCorrupt, cs[i].key)
		}
		t.place(i)
	}
	for p := len(t.heap)/2 - 1; p >= 0; p-- {
		t.down(p)
	}
	*s = *t
	return nil
}

// header is an encoded sketch's header.
type header struct {
	capacity, total, n uint64
	id                 uint64 // the seed's: another process's buckets are not comparable
}

// header reads and checks the header, and that the rest can hold what it
// announces.
func (d *decoder) header() (header, error) {
	var h header
	if len(d.b) == 0 {
		return h, fmt.Errorf("%w: empty", ErrTruncated)
	}
	if v := d.byte(); v != encodingVersion {
		return h, fmt.Errorf("%w: %d", ErrVersion, v)
	}
	h.capacity = d.uvarint()
	abits := d.uvarint()
	h.id = d.uint64()
	h.total = d.uvarint()
	h.n = d.uvarint()
	if d.err != nil {
		return h, d.err
	}
	if h.capacity < 1 || h.capacity > MaxCapacity {
		return h, fmt.Errorf("%w: capacity %d", ErrCorrupt, h.capacity)
	}
	want := max(uint64(bits.Len(uint(alphaPerCounter*h.capacity-1))), 2)
	if abits != want {
		return h, fmt.Errorf("%w: %d bucket bits for capacity %d", ErrCorrupt, abits, h.capacity)
	}
	if h.n > h.capacity {
		return h, fmt.Errorf("%w: %d counters for capacity %d", ErrCorrupt, h.n, h.capacity)
	}
	// Every counter needs 3 bytes and every bucket 1: refuse before
	// allocating what the input cannot fill.
	if rest := uint64(len(d.b)); h.n*3+(1<<abits) > rest {
		return h, fmt.Errorf("%w: %d counters and %d buckets in %d bytes", ErrTruncated, h.n, 1<<abits, rest)
	}
	return h, nil
}

// counters reads n counters of a sketch of total whose encoding is size
// bytes, and returns them with their smallest count. Their keys share one
// allocation.
func (d *decoder) counters(size int, n, total uint64) ([]counter, uint64, error) {
	keys := string(d.b)
	base := size - len(d.b)
	cs := make([]counter, n)
	var sum uint64
	minCount := uint64(1<<64 - 1)
	for i := range cs {
		kl := d.uvarint()
		if d.err != nil {
			return nil, 0, d.err
		}
		if kl > uint64(len(d.b)) {
			return nil, 0, fmt.Errorf("%w: key of %d bytes", ErrTruncated, kl)
		}
		off := size - len(d.b) - base
		key := keys[off : off+int(kl)]
		d.b = d.b[kl:]
		c := counter{key: key, count: d.uvarint(), err: d.uvarint(), hash: hashKey(key)}
		if d.err != nil {
			return nil, 0, d.err
		}
		if c.err > c.count || c.count > total {
			return nil, 0, fmt.Errorf("%w: counter %q: count %d, err %d, total %d", ErrCorrupt, key, c.count, c.err, total)
		}
		var carry uint64
		if sum, carry = bits.Add64(sum, c.count-c.err, 0); carry != 0 || sum > total {
			return nil, 0, fmt.Errorf("%w: guaranteed counts exceed total %d", ErrCorrupt, total)
		}
		minCount = min(minCount, c.count)
		cs[i] = c
	}
	return cs, minCount, nil
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) byte() byte {
	if d.err != nil || len(d.b) < 1 {
		d.fail()
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) uint64() uint64 {
	if d.err != nil || len(d.b) < 8 {
		d.fail()
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		if n == 0 {
			d.fail()
		} else {
			d.err = fmt.Errorf("%w: varint overflows 64 bits", ErrCorrupt)
		}
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) fail() {
	if d.err == nil {
		d.err = fmt.Errorf("%w: input ends early", ErrTruncated)
	}
}
