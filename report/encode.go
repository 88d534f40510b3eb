package report

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"

	"github.com/qtop-dev/qtop/histogram"
	"github.com/qtop-dev/qtop/tenant"
)

// MarshalBinary encodes r, compressed, as the body of POST /v1/reports.
func (r *Report) MarshalBinary() ([]byte, error) {
	raw, err := r.appendRaw(make([]byte, 0, 64+len(r.Rows)*48))
	if err != nil {
		return nil, err
	}
	out := make([]byte, headerLen, headerLen+binary.MaxVarintLen64+len(raw)/2+64)
	copy(out, magic[:])
	binary.BigEndian.PutUint16(out[4:], CurrentVersion)
	out[6] = codecZstd
	out = binary.AppendUvarint(out, uint64(len(raw)))
	out = zenc().EncodeAll(raw, out)
	if len(out) > MaxReportBytes {
		return nil, fmt.Errorf("%w: %d bytes encoded, at most %d", ErrTooLarge, len(out), MaxReportBytes)
	}
	return out, nil
}

// marshalUncompressed is MarshalBinary without compression (codec 0), for
// tests and measurements.
func (r *Report) marshalUncompressed() ([]byte, error) {
	raw, err := r.appendRaw(nil)
	if err != nil {
		return nil, err
	}
	out := make([]byte, headerLen, headerLen+binary.MaxVarintLen64+len(raw))
	copy(out, magic[:])
	binary.BigEndian.PutUint16(out[4:], CurrentVersion)
	out[6] = codecNone
	out = binary.AppendUvarint(out, uint64(len(raw)))
	return append(out, raw...), nil
}

func (r *Report) appendRaw(b []byte) ([]byte, error) {
	if r.Version != 0 && r.Version != CurrentVersion {
		return nil, fmt.Errorf("%w: cannot encode version %d (this build writes %d)", ErrVersion, r.Version, CurrentVersion)
	}
	// Wall-clock times only: a monotonic reading would make End − Start
	// disagree with the Unix times.
	start, end := r.Start.UnixNano(), r.End.UnixNano()
	if r.Start.IsZero() || end < start {
		return nil, fmt.Errorf("%w: window [%v, %v) (start is required, end must not precede it)", ErrInvalid, r.Start, r.End)
	}
	if len(r.Rows) > MaxRows {
		return nil, fmt.Errorf("%w: %d rows, at most %d", ErrTooLarge, len(r.Rows), MaxRows)
	}
	if len(r.KeyTenants) > MaxKeyTenants {
		return nil, fmt.Errorf("%w: %d key tenants, at most %d", ErrTooLarge, len(r.KeyTenants), MaxKeyTenants)
	}
	e := encoder{b: b}
	e.str(r.Source.Service)
	e.str(r.Source.Instance)
	e.str(r.Source.Host)
	e.b = binary.AppendUvarint(e.b, r.Seq)
	e.b = binary.AppendVarint(e.b, start)
	e.b = binary.AppendUvarint(e.b, uint64(end-start))
	keys := make([]string, 0, len(r.KeyTenants))
	for k := range r.KeyTenants {
		keys = append(keys, k)
	}
	sort.Strings(keys) // deterministic output
	e.stringTable(r, keys)
	if err := e.rows(r); err != nil {
		return nil, err
	}
	if err := e.keys(r, keys); err != nil {
		return nil, err
	}
	if err := e.enforcement(r); err != nil {
		return nil, err
	}
	if e.err != nil {
		return nil, e.err
	}
	b, err := appendSections(e.b, r)
	if err != nil {
		return nil, err
	}
	if len(b) > MaxDecodedBytes {
		return nil, fmt.Errorf("%w: %d bytes before compression, at most %d", ErrTooLarge, len(b), MaxDecodedBytes)
	}
	return b, nil
}

// encoder appends a report's body to b; err keeps the first string over
// MaxStringLen (the encoding goes on, and fails at the end).
type encoder struct {
	b     []byte
	err   error
	index map[string]uint64 // the string table
}

func (e *encoder) str(s string) {
	if e.err == nil && len(s) > MaxStringLen {
		e.err = fmt.Errorf("%w: string of %d bytes, at most %d", ErrTooLarge, len(s), MaxStringLen)
	}
	e.b = binary.AppendUvarint(e.b, uint64(len(s)))
	e.b = append(e.b, s...)
}

// stringTable writes every tenant and route once, in order of first use
// (the rows', then those of the hot keys, sorted).
func (e *encoder) stringTable(r *Report, keys []string) {
	e.index = make(map[string]uint64, 2*len(r.Rows)+len(r.KeyTenants))
	table := make([]string, 0, 2*len(r.Rows)+len(r.KeyTenants))
	intern := func(s string) {
		if _, ok := e.index[s]; !ok {
			e.index[s] = uint64(len(table))
			table = append(table, s)
		}
	}
	for i := range r.Rows {
		intern(r.Rows[i].Tenant)
		intern(r.Rows[i].Route)
	}
	for _, k := range keys {
		intern(r.KeyTenants[k])
	}
	e.b = binary.AppendUvarint(e.b, uint64(len(table)))
	for _, s := range table {
		e.str(s)
	}
}

func (e *encoder) rows(r *Report) error {
	b := e.b
	b = binary.AppendUvarint(b, uint64(len(r.Rows)))
	for i := range r.Rows {
		row := &r.Rows[i]
		if row.Tier != tenant.TierUnset && !row.Tier.Valid() {
			return fmt.Errorf("%w: row %d: tier %d", ErrInvalid, i, uint8(row.Tier))
		}
		if !row.Kind.Valid() {
			return fmt.Errorf("%w: row %d: kind %d", ErrInvalid, i, uint8(row.Kind))
		}
		if !finite(row.RU) || row.RU < 0 || row.Duration < 0 || row.Errors > row.Count {
			return fmt.Errorf("%w: row %d (%s %s): ru %v, duration %v, %d errors of %d", ErrInvalid, i, row.Tenant, row.Route, row.RU, row.Duration, row.Errors, row.Count)
		}
		b = binary.AppendUvarint(b, e.index[row.Tenant])
		b = binary.AppendUvarint(b, e.index[row.Route])
		b = append(b, byte(row.Tier), byte(row.Kind))
		b = binary.AppendUvarint(b, row.Count)
		b = binary.AppendUvarint(b, row.Errors)
		b = binary.AppendUvarint(b, uint64(row.Duration))
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(row.RU))
		b = binary.AppendUvarint(b, row.Bytes)
		b = binary.AppendUvarint(b, row.Rows)
		b = appendHistogram(b, &row.Latency)
	}
	e.b = b
	return nil
}

// keys writes the key sketch, behind its length plus one (0: none), then
// the key tenants.
func (e *encoder) keys(r *Report, keys []string) error {
	if r.Keys == nil {
		e.b = binary.AppendUvarint(e.b, 0)
	} else {
		// The sketch goes after a length prefix that is known only once
		// it is written: write it, then slide it behind its prefix.
		at := len(e.b)
		b, err := r.Keys.AppendBinary(e.b)
		if err != nil {
			return fmt.Errorf("%w: key sketch: %v", ErrInvalid, err)
		}
		n := len(b) - at
		if n > MaxSketchBytes {
			return fmt.Errorf("%w: key sketch of %d bytes, at most %d", ErrTooLarge, n, MaxSketchBytes)
		}
		var hdr [binary.MaxVarintLen64]byte
		k := binary.PutUvarint(hdr[:], uint64(n)+1) // 0 means no sketch
		b = append(b, hdr[:k]...)
		copy(b[at+k:], b[at:at+n])
		copy(b[at:], hdr[:k])
		e.b = b
	}
	e.b = binary.AppendUvarint(e.b, uint64(len(keys)))
	for _, k := range keys {
		e.str(k)
		e.b = binary.AppendUvarint(e.b, e.index[r.KeyTenants[k]])
	}
	return nil
}

func (e *encoder) enforcement(r *Report) error {
	en := &r.Enforcement
	for _, a := range [...]*[tenant.NumTiers]uint64{&en.Admitted, &en.Throttled, &en.Shed, &en.ShadowThrottled, &en.ShadowShed} {
		for _, v := range a {
			e.b = binary.AppendUvarint(e.b, v)
		}
	}
	for i, v := range en.PriceMultiplier {
		if !finite(v) || v < 0 {
			return fmt.Errorf("%w: price multiplier of T%d: %v", ErrInvalid, i, v)
		}
		e.b = binary.LittleEndian.AppendUint64(e.b, math.Float64bits(v))
	}
	return nil
}

// appendHistogram writes the number of non-empty buckets, then the
// buckets as (gap, count) pairs, the gap being the bucket index minus the
// previous index plus one (the first gap is the index).
func appendHistogram(b []byte, h *histogram.Sparse) []byte {
	b = binary.AppendUvarint(b, uint64(h.Len()))
	next := 0
	h.Buckets(func(i int, c uint64) {
		b = binary.AppendUvarint(b, uint64(i-next))
		b = binary.AppendUvarint(b, c)
		next = i + 1
	})
	return b
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
