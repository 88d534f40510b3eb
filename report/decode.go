package report

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/qtop-dev/qtop/histogram"
	"github.com/qtop-dev/qtop/spacesaving"
	"github.com/qtop-dev/qtop/tenant"
)

// Decode decodes a body written by MarshalBinary into a new Report with
// the sections d knows. It never panics and never allocates more than a
// bounded amount, whatever b holds. A report of a newer format version
// gives ErrVersion; anything else that is not a report gives ErrMalformed,
// ErrTooLarge or ErrRange.
func (d *Decoder) Decode(b []byte) (*Report, error) {
	r := new(Report)
	if err := d.DecodeInto(r, b); err != nil {
		return nil, err
	}
	return r, nil
}

// DecodeInto decodes b like Decode, into r. It reuses r.Rows (and their
// histograms' memory) when it has the capacity, so a collector that
// decodes into one Report per worker allocates little per report.
// Nothing of r refers to b afterwards. On error r is left empty and
// usable.
func (d *Decoder) DecodeInto(r *Report, b []byte) error {
	raw, v, pooled, err := openBody(b)
	if err == nil {
		rd := Reader{b: raw, wire: len(b)}
		rd.report(r)
		if v >= 2 {
			rd.sections(r, d.known)
		}
		err = rd.err
		if err == nil && len(rd.b) != 0 {
			err = fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(rd.b))
		}
		if pooled {
			putRawBuf(raw) // nothing of the report points into it
		}
	}
	if err != nil {
		r.clear()
		return err
	}
	r.Version = v
	return nil
}

// Decode decodes b with a decoder that knows only the report's own
// sections (NewDecoder()): the sections of other packages are skipped.
func Decode(b []byte) (*Report, error) { return plain.Decode(b) }

// UnmarshalBinary decodes b into r like Decode.
func (r *Report) UnmarshalBinary(b []byte) error { return plain.DecodeInto(r, b) }

// Reset empties r, keeping the capacity of Rows (and the memory of their
// histograms).
func (r *Report) Reset() { r.clear() }

// clear empties r, keeping the capacity of Rows.
func (r *Report) clear() {
	rows := r.Rows[:0]
	*r = Report{Rows: rows}
}

// CheckHeader checks what the header of body b says — magic, version,
// compression, and a decompressed length within what b may expand to —
// without decompressing anything. A collector calls it before queueing a
// body for decoding, so a bomb costs no decode slot. UnmarshalBinary
// makes the same checks.
func CheckHeader(b []byte) error {
	_, _, _, _, err := header(b)
	return err
}

// header checks the header of b and returns the version, the codec, the
// claimed decompressed length and where the payload starts.
func header(b []byte) (v uint16, codec byte, rawLen uint64, at int, err error) {
	if len(b) > MaxReportBytes {
		return 0, 0, 0, 0, fmt.Errorf("%w: body of %d bytes, at most %d", ErrTooLarge, len(b), MaxReportBytes)
	}
	if len(b) == 0 {
		return 0, 0, 0, 0, fmt.Errorf("%w: empty body, not a qtop report", ErrMalformed)
	}
	if len(b) < headerLen || [4]byte(b[:4]) != magic {
		return 0, 0, 0, 0, fmt.Errorf("%w: not a qtop report (bad magic)", ErrMalformed)
	}
	v = binary.BigEndian.Uint16(b[4:])
	if v == 0 || v > CurrentVersion {
		return 0, 0, 0, 0, fmt.Errorf("%w: report format version %d, this decoder reads versions 1 to %d; upgrade the collector", ErrVersion, v, CurrentVersion)
	}
	codec, reserved := b[6], b[7]
	if reserved != 0 {
		return 0, 0, 0, 0, fmt.Errorf("%w: reserved header byte is %d", ErrMalformed, reserved)
	}
	rawLen, n := binary.Uvarint(b[headerLen:])
	if n <= 0 {
		return 0, 0, 0, 0, fmt.Errorf("%w: bad length", ErrMalformed)
	}
	if rawLen > MaxDecodedBytes {
		return 0, 0, 0, 0, fmt.Errorf("%w: %d bytes decompressed, at most %d", ErrTooLarge, rawLen, MaxDecodedBytes)
	}
	switch codec {
	case codecNone:
	case codecZstd:
		// Nothing is allocated from the claimed length until it is
		// checked against the bytes actually received.
		if limit := uint64(min(MaxDecodedBytes, max(MinDecodedBytes, MaxExpansion*len(b)))); rawLen > limit {
			return 0, 0, 0, 0, fmt.Errorf("%w: %d bytes received claim %d decompressed, at most %d (%d times the body)", ErrTooLarge, len(b), rawLen, limit, MaxExpansion)
		}
	default:
		return 0, 0, 0, 0, fmt.Errorf("%w: unknown compression %d", ErrMalformed, codec)
	}
	return v, codec, rawLen, headerLen + n, nil
}

// openBody checks the header and returns the decompressed body and the
// version; pooled says the body is a decompression buffer, to be handed
// back with putRawBuf once read.
func openBody(b []byte) (raw []byte, v uint16, pooled bool, err error) {
	v, codec, rawLen, at, err := header(b)
	if err != nil {
		return nil, 0, false, err
	}
	body := b[at:]
	switch codec {
	case codecNone:
		raw = body
	case codecZstd:
		raw, err = decompress(body, rawLen)
		if err != nil {
			putRawBuf(raw)
			return nil, 0, false, fmt.Errorf("%w: zstd: %v", ErrMalformed, err)
		}
		pooled = true
	}
	if uint64(len(raw)) != rawLen {
		if pooled {
			putRawBuf(raw)
		}
		return nil, 0, false, fmt.Errorf("%w: body is %d bytes, header says %d", ErrMalformed, len(raw), rawLen)
	}
	return raw, v, pooled, nil
}

// minRowLen is the smallest encoded row: 2 indexes, tier, kind, 5 varints,
// the RU and the bucket count.
const minRowLen = 2 + 2 + 5 + 8 + 1

func (d *Reader) report(r *Report) {
	rows := r.Rows[:0]
	*r = Report{Rows: rows} // rows keep their capacity for rows()
	r.Source.Service = d.String("source service")
	r.Source.Instance = d.String("source instance")
	r.Source.Host = d.String("source host")
	r.Seq = d.Uvarint("seq")
	start := d.Varint("start")
	span := d.Uvarint("window")
	if span > math.MaxInt64 || (start > 0 && int64(span) > math.MaxInt64-start) {
		d.Fail(fmt.Errorf("%w: window of %d ns", ErrMalformed, span))
	}
	r.Start = time.Unix(0, start).UTC()
	r.End = r.Start.Add(time.Duration(span))

	st := d.stringTable()
	d.rows(r, st.strs)
	d.keys(r, st.strs)
	st.release()
	d.enforcement(r)
}

// stringTable is a report's string table as it is read: scratch, kept in
// stringTables for the next report once the rows refer to its strings.
type stringTable struct {
	strs  []string
	parts [][]byte
}

// stringTables keeps string tables for reuse, at most pooledTables of at
// most pooledStrings strings (2.6 MB). Not a sync.Pool, so that what a
// decode allocates does not depend on a collection or on the race
// detector (which drops a pool's items at random); and last in, first
// out, so that decodes one after another take the same, grown table
// rather than going round every table other decodes left behind.
var stringTables struct {
	mu   sync.Mutex
	free []*stringTable
}

const (
	pooledTables  = 64
	pooledStrings = 1024
)

func takeStringTable() *stringTable {
	st := &stringTables
	st.mu.Lock()
	defer st.mu.Unlock()
	if n := len(st.free); n > 0 {
		t := st.free[n-1]
		st.free[n-1] = nil
		st.free = st.free[:n-1]
		return t
	}
	return new(stringTable)
}

func (t *stringTable) release() {
	clear(t.strs)
	clear(t.parts)
	if cap(t.strs) > pooledStrings {
		return
	}
	st := &stringTables
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.free) < pooledTables {
		st.free = append(st.free, t)
	}
}

// stringTable reads the string table of a report. Its strings share one
// allocation (substrings of one string), where a string each was a fifth
// of what a collector allocated per report; a string kept from the
// report keeps all the table's bytes (a few KB for 100 rows) alive.
func (d *Reader) stringTable() *stringTable {
	t := takeStringTable()
	n := d.Count("strings", MaxStrings, 1)
	parts, total := slices.Grow(t.parts[:0], n), 0
	for range n {
		p := d.stringBytes("string")
		if d.err != nil {
			break
		}
		parts = append(parts, p)
		total += len(p)
	}
	t.parts = parts
	var sb strings.Builder
	sb.Grow(total)
	for _, p := range parts {
		sb.Write(p)
	}
	all := sb.String()
	t.strs = slices.Grow(t.strs[:0], len(parts))[:len(parts)]
	off := 0
	for i, p := range parts {
		t.strs[i] = all[off : off+len(p)]
		off += len(p)
	}
	return t
}

// ref reads an index into table.
func (d *Reader) ref(table []string, what string) string {
	i := d.Uvarint(what)
	if d.err != nil {
		return ""
	}
	if i >= uint64(len(table)) {
		d.Fail(fmt.Errorf("%w: %s refers to string %d of %d", ErrMalformed, what, i, len(table)))
		return ""
	}
	return table[i]
}

// rows reads the rows into r.Rows, reusing its capacity.
func (d *Reader) rows(r *Report, table []string) {
	rows := r.Rows[:0]
	n := d.Count("rows", MaxRows, minRowLen)
	if d.err == nil && n > d.wire+rowSlack {
		d.Fail(fmt.Errorf("%w: %d rows in a body of %d bytes (at most one row per byte received, plus %d)", ErrTooLarge, n, d.wire, rowSlack))
		n = 0
	}
	if n > cap(rows) {
		rows = make([]Row, n)
	} else {
		rows = rows[:n]
		for i := range rows {
			rows[i].Latency.Reset()
		}
	}
	r.Rows = rows
	for i := range r.Rows {
		row := &r.Rows[i]
		row.Tenant = d.ref(table, "row tenant")
		row.Route = d.ref(table, "row route")
		row.Tier = tenant.Tier(d.Byte("row tier"))
		row.Kind = Kind(d.Byte("row kind"))
		row.Count = d.Uvarint("row count")
		row.Errors = d.Uvarint("row errors")
		dur := d.Uvarint("row duration")
		row.RU = d.Float("row ru")
		row.Bytes = d.Uvarint("row bytes")
		row.Rows = d.Uvarint("row rows")
		d.histogram(&row.Latency)
		if d.err != nil {
			break
		}
		switch {
		case row.Tier != tenant.TierUnset && !row.Tier.Valid():
			d.Fail(fmt.Errorf("%w: row %d: tier %d", ErrMalformed, i, uint8(row.Tier)))
		case !row.Kind.Valid():
			d.Fail(fmt.Errorf("%w: row %d: kind %d", ErrMalformed, i, uint8(row.Kind)))
		case row.Errors > row.Count:
			d.Fail(fmt.Errorf("%w: row %d: %d errors of %d records", ErrMalformed, i, row.Errors, row.Count))
		case dur > math.MaxInt64:
			d.Fail(fmt.Errorf("%w: row %d: duration %d ns", ErrMalformed, i, dur))
		case row.Count > MaxCount:
			d.Fail(fmt.Errorf("%w: row %d (tenant %q): count %d, at most %d", ErrRange, i, row.Tenant, row.Count, uint64(MaxCount)))
		case row.Bytes > MaxBytes || row.Rows > MaxBytes:
			d.Fail(fmt.Errorf("%w: row %d (tenant %q): %d bytes, %d rows, at most %d each", ErrRange, i, row.Tenant, row.Bytes, row.Rows, uint64(MaxBytes)))
		case dur > uint64(max(row.Count, 1))*uint64(MaxRecordDuration):
			d.Fail(fmt.Errorf("%w: row %d (tenant %q): duration %v for %d records, at most %v each", ErrRange, i, row.Tenant, time.Duration(dur), row.Count, MaxRecordDuration))
		case row.RU > float64(max(row.Count, 1))*MaxRecordRU:
			d.Fail(fmt.Errorf("%w: row %d (tenant %q): %g RU for %d records, at most %g each", ErrRange, i, row.Tenant, row.RU, row.Count, MaxRecordRU))
		}
		row.Duration = time.Duration(dur)
	}

}

// keys reads the key sketch and the key tenants.
func (d *Reader) keys(r *Report, table []string) {
	if n := d.Uvarint("key sketch length"); n > 0 {
		if n-1 > MaxSketchBytes {
			d.Fail(fmt.Errorf("%w: key sketch of %d bytes, at most %d", ErrTooLarge, n-1, MaxSketchBytes))
		}
		if kb := d.Bytes(n-1, "key sketch"); d.err == nil {
			s := new(spacesaving.Sketch)
			if err := s.UnmarshalBinary(kb); err != nil {
				d.Fail(fmt.Errorf("%w: key sketch: %v", ErrMalformed, err))
			} else {
				r.Keys = s
			}
		}
	}
	if n := d.Count("key tenants", MaxKeyTenants, 2); n > 0 {
		r.KeyTenants = make(map[string]string, n)
		for range n {
			k := d.String("key")
			r.KeyTenants[k] = d.ref(table, "key tenant")
		}
	}

}

// enforcement reads the enforcement counters and price multipliers.
func (d *Reader) enforcement(r *Report) {
	e := &r.Enforcement
	for _, a := range [...]*[tenant.NumTiers]uint64{&e.Admitted, &e.Throttled, &e.Shed, &e.ShadowThrottled, &e.ShadowShed} {
		for i := range a {
			a[i] = d.Uvarint("enforcement counter")
			if a[i] > MaxCount {
				d.Fail(fmt.Errorf("%w: enforcement counter %d, at most %d", ErrRange, a[i], uint64(MaxCount)))
			}
		}
	}
	for i := range e.PriceMultiplier {
		e.PriceMultiplier[i] = d.Float("price multiplier")
		if e.PriceMultiplier[i] > MaxPriceMultiplier {
			d.Fail(fmt.Errorf("%w: price multiplier of T%d %g, at most %g", ErrRange, i, e.PriceMultiplier[i], MaxPriceMultiplier))
		}
	}
}

// histogram reads what appendHistogram wrote into h: the buckets, checked
// as they come, then all at once into h (n buckets, each of 2 bytes at
// least, so a forged count costs at most 4 times the bytes left).
func (d *Reader) histogram(h *histogram.Sparse) {
	n := d.Count("histogram buckets", histogram.NumBuckets, 2)
	if d.err != nil {
		return
	}
	if cap(d.idx) < n {
		k := min(max(n, 2*cap(d.idx)), histogram.NumBuckets)
		d.idx, d.cnt = make([]uint16, 0, k), make([]uint64, 0, k)
	}
	// The hot loop of a decode: varints read in place, into locals.
	idx, cnt, b := d.idx[:n], d.cnt[:n], d.b
	next := uint64(0)
	for k := range n {
		gap, m := binary.Uvarint(b)
		if m <= 0 {
			d.Fail(fmt.Errorf("%w: bucket gap: truncated or overlong varint", ErrMalformed))
			return
		}
		b = b[m:]
		c, m := binary.Uvarint(b)
		if m <= 0 {
			d.Fail(fmt.Errorf("%w: bucket count: truncated or overlong varint", ErrMalformed))
			return
		}
		b = b[m:]
		i := next + gap
		if i >= histogram.NumBuckets || i < next {
			d.Fail(fmt.Errorf("%w: histogram bucket %d (at most %d buckets, increasing)", ErrMalformed, i, histogram.NumBuckets))
			return
		}
		if c > MaxCount {
			d.Fail(fmt.Errorf("%w: histogram bucket %d counts %d, at most %d", ErrRange, i, c, uint64(MaxCount)))
			return
		}
		idx[k], cnt[k] = uint16(i), c
		next = i + 1
	}
	d.b = b
	if err := h.SetPairs(idx, cnt); err != nil { // checked above: never
		d.Fail(fmt.Errorf("%w: histogram: %v", ErrMalformed, err))
	}
}
