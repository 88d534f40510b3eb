package histogram

import (
	"encoding"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
)

// Errors returned by this package, wrapped behind a "histogram:" prefix; check
// them with errors.Is.
var (
	// ErrVersion: an encoded histogram of an unknown version (or layout).
	ErrVersion = errors.New("unknown encoding version")
	// ErrCorrupt: an encoded histogram that is truncated or inconsistent.
	ErrCorrupt = errors.New("corrupt encoding")
	// ErrLayout: bucket counts of another bucket layout.
	ErrLayout = errors.New("bucket layout mismatch")
)

func errorf(sentinel error, format string, args ...any) error {
	return fmt.Errorf("histogram: %w: %s", sentinel, fmt.Sprintf(format, args...))
}

// encodingV1 is the first encoding, of the layout of 36 buckets per octave
// over [2^-20, 2^12) seconds. A change of layout takes a new version.
const encodingV1 = 1

var (
	_ encoding.BinaryMarshaler   = (*Histogram)(nil)
	_ encoding.BinaryUnmarshaler = (*Histogram)(nil)
	_ encoding.BinaryAppender    = (*Histogram)(nil)
)

// MarshalBinary encodes h sparsely:
//
//	version byte (1) | sum, float64 bits, 8 bytes little endian |
//	uvarint number of non-empty buckets n |
//	n × (uvarint gap from the previous non-empty bucket, uvarint count)
//
// where the first gap is the bucket index itself and later gaps are at least
// 1. A histogram of typical latencies takes a few hundred bytes.
func (h *Histogram) MarshalBinary() ([]byte, error) {
	return h.AppendBinary(make([]byte, 0, 16+8*h.nonEmptyCount()))
}

// AppendBinary appends the encoding of MarshalBinary to b.
func (h *Histogram) AppendBinary(b []byte) ([]byte, error) {
	b = append(b, encodingV1)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(h.sum))
	b = binary.AppendUvarint(b, uint64(h.nonEmptyCount()))
	prev := 0
	for g, n := range h.groups {
		if n == 0 {
			continue
		}
		for i := g << groupShift; i < min(g<<groupShift+groupSize, NumBuckets); i++ {
			if c := h.counts[i]; c != 0 {
				b = binary.AppendUvarint(b, uint64(i-prev))
				b = binary.AppendUvarint(b, c)
				prev = i
			}
		}
	}
	return b, nil
}

func (h *Histogram) nonEmptyCount() int {
	n := 0
	h.Buckets(func(int, uint64) { n++ })
	return n
}

// UnmarshalBinary replaces h with the histogram encoded in data. On error
// (ErrVersion, ErrCorrupt) h is left unchanged. It never allocates more than
// one Histogram, whatever the input.
func (h *Histogram) UnmarshalBinary(data []byte) error {
	var d Histogram
	if err := d.decode(data); err != nil {
		return err
	}
	*h = d
	return nil
}

func (h *Histogram) decode(data []byte) error {
	if len(data) == 0 {
		return errorf(ErrCorrupt, "empty input")
	}
	if data[0] != encodingV1 {
		return errorf(ErrVersion, "version %d", data[0])
	}
	data = data[1:]
	if len(data) < 8 {
		return errorf(ErrCorrupt, "truncated sum")
	}
	sum := math.Float64frombits(binary.LittleEndian.Uint64(data))
	if !(sum >= 0) || math.IsInf(sum, 1) {
		return errorf(ErrCorrupt, "sum %v", sum)
	}
	data = data[8:]
	n, k := binary.Uvarint(data)
	if k <= 0 {
		return errorf(ErrCorrupt, "truncated bucket count")
	}
	data = data[k:]
	if n > NumBuckets {
		return errorf(ErrCorrupt, "%d buckets, at most %d", n, NumBuckets)
	}
	idx := -1
	for j := uint64(0); j < n; j++ {
		gap, k := binary.Uvarint(data)
		if k <= 0 {
			return errorf(ErrCorrupt, "truncated bucket %d", j)
		}
		data = data[k:]
		switch {
		case j == 0 && gap >= NumBuckets:
			return errorf(ErrCorrupt, "bucket index %d out of range", gap)
		case j == 0:
			idx = int(gap)
		case gap == 0:
			return errorf(ErrCorrupt, "bucket %d repeats index %d", j, idx)
		case gap >= NumBuckets || idx+int(gap) >= NumBuckets:
			return errorf(ErrCorrupt, "bucket index out of range after %d", idx)
		default:
			idx += int(gap)
		}
		c, k := binary.Uvarint(data)
		if k <= 0 {
			return errorf(ErrCorrupt, "truncated count of bucket %d", idx)
		}
		data = data[k:]
		if c == 0 {
			return errorf(ErrCorrupt, "empty bucket %d encoded", idx)
		}
		total, carry := bits.Add64(h.count, c, 0)
		if carry != 0 {
			return errorf(ErrCorrupt, "total count overflows")
		}
		h.count = total
		h.counts[idx] = c
		h.groups[idx>>groupShift] += c
	}
	if len(data) != 0 {
		return errorf(ErrCorrupt, "%d trailing bytes", len(data))
	}
	if h.count == 0 && sum != 0 {
		return errorf(ErrCorrupt, "sum %v of no observations", sum)
	}
	h.sum = sum
	return nil
}
