package report

import (
	"encoding/binary"
	"fmt"
	"math"
)

// decoder reads the raw body; the first error sticks and every later read
// returns zero values.
type Reader struct {
	b    []byte
	wire int // bytes received (before decompression)
	err  error
	// idx and cnt hold the buckets of the histogram being read.
	idx []uint16
	cnt []uint64
}

func (d *Reader) Fail(err error) {
	if d.err == nil {
		d.err = err
		d.b = nil
	}
}

func (d *Reader) Uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.Fail(fmt.Errorf("%w: %s: truncated or overlong varint", ErrMalformed, what))
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *Reader) Varint(what string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.Fail(fmt.Errorf("%w: %s: truncated or overlong varint", ErrMalformed, what))
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *Reader) Bytes(n uint64, what string) []byte {
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.Fail(fmt.Errorf("%w: %s: %d bytes wanted, %d left", ErrMalformed, what, n, len(d.b)))
		return nil
	}
	p := d.b[:n]
	d.b = d.b[n:]
	return p
}

func (d *Reader) Byte(what string) byte {
	p := d.Bytes(1, what)
	if p == nil {
		return 0
	}
	return p[0]
}

func (d *Reader) Float(what string) float64 {
	p := d.Bytes(8, what)
	if p == nil {
		return 0
	}
	f := math.Float64frombits(binary.LittleEndian.Uint64(p))
	if !finite(f) || f < 0 {
		d.Fail(fmt.Errorf("%w: %s: %v (want a finite number ≥ 0)", ErrMalformed, what, f))
		return 0
	}
	return f
}

func (d *Reader) String(what string) string { return string(d.stringBytes(what)) }

// stringBytes reads a string's bytes (at most MaxStringLen), in place.
func (d *Reader) stringBytes(what string) []byte {
	n := d.Uvarint(what)
	if n > MaxStringLen {
		d.Fail(fmt.Errorf("%w: %s of %d bytes, at most %d", ErrTooLarge, what, n, MaxStringLen))
		return nil
	}
	return d.Bytes(n, what)
}

// count reads an element count, checked against its limit and against
// the bytes left (each element takes at least minSize bytes), so that a
// forged count never makes the decoder allocate.
func (d *Reader) Count(what string, limit uint64, minSize int) int {
	n := d.Uvarint(what)
	if d.err != nil {
		return 0
	}
	if n > limit {
		d.Fail(fmt.Errorf("%w: %d %s, at most %d", ErrTooLarge, n, what, limit))
		return 0
	}
	if n > uint64(len(d.b)/minSize) {
		d.Fail(fmt.Errorf("%w: %d %s in %d bytes", ErrMalformed, n, what, len(d.b)))
		return 0
	}
	return int(n)
}

// Err returns the first error of a read, nil if none.
func (d *Reader) Err() error { return d.err }

// Len returns the number of bytes left to read.
func (d *Reader) Len() int { return len(d.b) }

// Fixed64 reads 8 little-endian bytes (0 after a failure).
func (d *Reader) Fixed64(what string) uint64 {
	if p := d.Bytes(8, what); d.err == nil && len(p) == 8 {
		return binary.LittleEndian.Uint64(p)
	}
	return 0
}

// NewReader returns a reader of b, for a section's tests and tools; the
// decoder hands each section a reader of its payload.
func NewReader(b []byte) *Reader { return &Reader{b: b} }
