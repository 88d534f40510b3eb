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
	var err error
	str := func(s string) {
		if err == nil && len(s) > MaxStringLen {
			err = fmt.Errorf("%w: string of %d bytes, at most %d", ErrTooLarge, len(s), MaxStringLen)
		}
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	str(r.Source.Service)
	str(r.Source.Instance)
	str(r.Source.Host)
	b = binary.AppendUvarint(b, r.Seq)
	b = binary.AppendVarint(b, start)
	b = binary.AppendUvarint(b, uint64(end-start))

	// String table: every tenant and route once, in order of first use.
	index := make(map[string]uint64, 2*len(r.Rows)+len(r.KeyTenants))
	table := make([]string, 0, 2*len(r.Rows)+len(r.KeyTenants))
	intern := func(s string) uint64 {
		i, ok := index[s]
		if !ok {
			i = uint64(len(table))
			index[s] = i
			table = append(table, s)
		}
		return i
	}
	for i := range r.Rows {
		intern(r.Rows[i].Tenant)
		intern(r.Rows[i].Route)
	}
	keys := make([]string, 0, len(r.KeyTenants))
	for k := range r.KeyTenants {
		keys = append(keys, k)
	}
	sort.Strings(keys) // deterministic output
	for _, k := range keys {
		intern(r.KeyTenants[k])
	}
	b = binary.AppendUvarint(b, uint64(len(table)))
	for _, s := range table {
		str(s)
	}

	b = binary.AppendUvarint(b, uint64(len(r.Rows)))
	for i := range r.Rows {
		row := &r.Rows[i]
		if row.Tier != tenant.TierUnset && !row.Tier.Valid() {
			return nil, fmt.Errorf("%w: row %d: tier %d", ErrInvalid, i, uint8(row.Tier))
		}
		if !row.Kind.Valid() {
			return nil, fmt.Errorf("%w: row %d: kind %d", ErrInvalid, i, uint8(row.Kind))
		}
		if !finite(row.RU) || row.RU < 0 || row.Duration < 0 || row.Errors > row.Count {
			return nil, fmt.Errorf("%w: row %d (%s %s): ru %v, duration %v, %d errors of %d", ErrInvalid, i, row.Tenant, row.Route, row.RU, row.Duration, row.Errors, row.Count)
		}
		b = binary.AppendUvarint(b, index[row.Tenant])
		b = binary.AppendUvarint(b, index[row.Route])
		b = append(b, byte(row.Tier), byte(row.Kind))
		b = binary.AppendUvarint(b, row.Count)
		b = binary.AppendUvarint(b, row.Errors)
		b = binary.AppendUvarint(b, uint64(row.Duration))
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(row.RU))
		b = binary.AppendUvarint(b, row.Bytes)
		b = binary.AppendUvarint(b, row.Rows)
		b = appendHistogram(b, &row.Latency)
	}

	if r.Keys == nil {
		b = binary.AppendUvarint(b, 0)
	} else {
		// The sketch goes after a length prefix that is known only once
		// it is written: write it, then slide it behind its prefix.
		at := len(b)
		var kerr error
		b, kerr = r.Keys.AppendBinary(b)
		if kerr != nil {
			return nil, fmt.Errorf("%w: key sketch: %v", ErrInvalid, kerr)
		}
		n := len(b) - at
		if n > MaxSketchBytes {
			return nil, fmt.Errorf("%w: key sketch of %d bytes, at most %d", ErrTooLarge, n, MaxSketchBytes)
		}
		var hdr [binary.MaxVarintLen64]byte
		k := binary.PutUvarint(hdr[:], uint64(n)+1) // 0 means no sketch
		b = append(b, hdr[:k]...)
		copy(b[at+k:], b[at:at+n])
		copy(b[at:], hdr[:k])
	}
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		str(k)
		b = binary.AppendUvarint(b, index[r.KeyTenants[k]])
	}

	e := &r.Enforcement
	for _, a := range [...]*[tenant.NumTiers]uint64{&e.Admitted, &e.Throttled, &e.Shed, &e.ShadowThrottled, &e.ShadowShed} {
		for _, v := range a {
			b = binary.AppendUvarint(b, v)
		}
	}
	for i, v := range e.PriceMultiplier {
		if !finite(v) || v < 0 {
			return nil, fmt.Errorf("%w: price multiplier of T%d: %v", ErrInvalid, i, v)
		}
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	if err != nil {
		return nil, err
	}
	if b, err = appendSections(b, r); err != nil {
		return nil, err
	}
	if len(b) > MaxDecodedBytes {
		return nil, fmt.Errorf("%w: %d bytes before compression, at most %d", ErrTooLarge, len(b), MaxDecodedBytes)
	}
	return b, nil
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
