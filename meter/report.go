package meter

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"
	"unsafe"

	"github.com/klauspost/compress/zstd"

	"github.com/qtop-dev/qtop/histogram"
	"github.com/qtop-dev/qtop/quota"
	"github.com/qtop-dev/qtop/spacesaving"
	"github.com/qtop-dev/qtop/tenant"
)

// Errors of the package; test with errors.Is. Every error returned by the
// package wraps one of them behind an "ingest:" prefix.
var (
	// ErrVersion: the report was written by a newer (or unknown) version
	// of the format than this decoder understands.
	ErrVersion = errors.New("ingest: unsupported report version")
	// ErrMalformed: the bytes are not a report (bad magic, truncated,
	// out-of-range field, trailing bytes, bad compression).
	ErrMalformed = errors.New("ingest: malformed report")
	// ErrTooLarge: a body, a decompressed body, a count or a string is
	// above its limit.
	ErrTooLarge = errors.New("ingest: report too large")
	// ErrInvalid: a value cannot be encoded (or an option is out of range).
	ErrInvalid = errors.New("ingest: invalid value")
	// ErrRange: a count, duration, RU or byte sum is above what one
	// process can report for one window (see MaxCount), so it would
	// wrap or swamp every sum it joins.
	ErrRange = errors.New("ingest: value out of range")
	// ErrShutdown: the reporter or span processor has been shut down.
	ErrShutdown = errors.New("ingest: shut down")
)

// OtherTenant is the tenant of the row that holds, with exact totals, the
// load of every tenant beyond the recorder's tenant sketch. OtherRoute
// plays the same role for routes beyond a tenant's route limit.
const (
	OtherTenant = "other"
	OtherRoute  = "other"
	// UnknownTenant counts records that carried no tenant (or an
	// invalid one): tenant.Untagged, a name no tenant can have.
	UnknownTenant = tenant.Untagged
)

// Source identifies the process that sent a report.
type Source struct {
	// Service is the application's name, e.g. "billing-api".
	Service string
	// Instance is unique per process lifetime (a restart gets a new one),
	// so that Seq restarting from 1 is never taken for a duplicate.
	Instance string
	// Host is the machine or pod name.
	Host string
}

// Row is the aggregate of one tenant × route × kind over a report's window.
type Row struct {
	Tenant string
	Route  string
	// Tier is the tier of the most recent record of the row.
	Tier tenant.Tier
	Kind Kind
	// Count and Errors count records.
	Count, Errors uint64
	// Duration is the sum of the records' durations.
	Duration time.Duration
	// RU is the sum of the records' request units.
	RU float64
	// Bytes and Rows are sums.
	Bytes, Rows uint64
	// Latency is the histogram of the records' durations, sparse: a row
	// costs memory for its non-empty buckets only (ratio.SparseIndexBytes
	// plus 8 bytes each). Empty means no latency was recorded (a row of
	// the pg sampler, a row of durations only). A copy of a Row shares
	// its Latency's memory: Clone it to keep one apart.
	Latency histogram.Sparse
}

// Enforcement is what the enforce package did during the window, per tier
// (index tenant.Tier.Index(): 0 for T0 … 3 for T3).
type Enforcement struct {
	Admitted, Throttled, Shed   [tenant.NumTiers]uint64
	ShadowThrottled, ShadowShed [tenant.NumTiers]uint64
	PriceMultiplier             [tenant.NumTiers]float64
	// Dropped and ShadowDropped (CoDel drops, apart from Shed) travel in
	// the enforcement detail section (enforcedetail.go).
	Dropped, ShadowDropped [tenant.NumTiers]uint64
}

// Report is what a process sends per window. See the package
// documentation for its encoding.
type Report struct {
	// Version is the format version the report was decoded from; 0 or
	// CurrentVersion when encoding.
	Version uint16
	Source  Source
	// Seq increases by one per report of a Source; the collector drops a
	// report whose (Source.Instance, Seq) it has already merged, which
	// happens when a reply was lost and the reporter retried.
	Seq uint64
	// Start and End bound the window: [Start, End).
	Start, End time.Time
	// Rows are the tenant × route × kind aggregates, at most one per
	// combination, in no particular order.
	Rows []Row
	// Keys are the hot keys of the window (key → number of records that
	// touched it), with Space-Saving error bounds; nil when no record
	// carried a key.
	Keys *spacesaving.Sketch
	// KeyTenants maps a top key to a tenant that touched it in the window
	// (the last one seen by one of the recorder's shards); optional and
	// possibly partial.
	KeyTenants map[string]string
	// Enforcement holds the enforce package's counters of the window.
	Enforcement Enforcement
	// PoolWait is the connection-pool wait per tenant of the window, in
	// the enforcement detail section (enforcedetail.go).
	PoolWait []PoolWait
	// Quota is the per-tenant quota usage of the window (section 2, see
	// quota.go); nil when the process has no quota gate.
	Quota []quota.Usage
	// Budgets are the database budget counters of the window and
	// BudgetActions its runaway actions (section 4, budgets.go); nil when
	// none.
	Budgets       []BudgetCounter
	BudgetActions []BudgetAction
	// Freshness is what the freshness middleware saw (section 3); nil
	// when it has nothing to say.
	Freshness *Freshness
}

// Format constants. See the package documentation for the layout.
const (
	// CurrentVersion is the format version MarshalBinary writes.
	CurrentVersion uint16 = 2
	// ContentType is the media type of a report body (POST /v1/reports).
	// The compression is named inside the body's header, so no
	// Content-Encoding is needed.
	ContentType = "application/vnd.qtop.report"

	// MaxReportBytes bounds an encoded (compressed) report; the collector
	// rejects a larger body with 413 before reading it all.
	MaxReportBytes = 4 << 20
	// MaxDecodedBytes bounds a report once decompressed.
	MaxDecodedBytes = 32 << 20
	// MaxRows bounds the rows of one report, and so what a forged body
	// can make the decoder allocate for its rows (RowBytes each, plus
	// what their latency buckets take: see DecodeBudget).
	MaxRows = 16_384
	// MaxStrings bounds the string table of one report.
	MaxStrings = 2 * MaxRows
	// MaxStringLen bounds every string of a report (tenant, route, key,
	// source fields).
	MaxStringLen = 1024
	// MaxSketchBytes bounds the encoded key sketch.
	MaxSketchBytes = 8 << 20
	// MaxKeyTenants bounds Report.KeyTenants.
	MaxKeyTenants = 100_000

	// MaxExpansion bounds how much larger than the body received a
	// report may be once decompressed (above a floor of MinDecodedBytes):
	// a zstd bomb is refused from its header, before anything is
	// allocated. Real reports expand 1.5 to 20 times.
	MaxExpansion = 64
	// MinDecodedBytes is what any body may decompress to.
	MinDecodedBytes = 64 << 10
	// rowSlack: a report holds at most one row per byte received, plus
	// rowSlack, as a decoded row costs RowBytes whatever its encoding;
	// real reports take 1.6 bytes or more per row (distinct tenants).
	rowSlack = 64
)

// Bounds of the values of one row of one report, checked by the decoder
// (ErrRange): far above what a process records in a window, far below
// what would make a sum of a fleet's reports wrap or swamp every other
// tenant's share.
const (
	// MaxCount bounds Count, Errors and each latency bucket of a row, and
	// each enforcement counter (2^40, about 10^12).
	MaxCount = 1 << 40
	// MaxBytes bounds Bytes and Rows of a row (2^50, a PiB).
	MaxBytes = 1 << 50
	// MaxRecordDuration bounds a row's Duration per record counted (a row
	// with Count 0 may hold one such duration).
	MaxRecordDuration = 24 * time.Hour
	// MaxRecordRU bounds a row's RU per record counted.
	MaxRecordRU = 1e6
	// MaxPriceMultiplier bounds an enforcement price multiplier.
	MaxPriceMultiplier = 1e6
)

// RowBytes is the most memory one decoded Row takes besides its latency
// counts: the Row and the index of its sparse latency. The counts take 8
// bytes per non-empty bucket, and each bucket takes at least 2 bytes of
// the decompressed body.
const RowBytes = int64(unsafe.Sizeof(Row{})) + int64(histogram.SparseIndexBytes)

// DecodeBudget is the most UnmarshalBinary allocates for body b, within a
// small constant, read from its header without decoding it: the
// decompressed body (as claimed, which is checked to be at most
// MaxExpansion × len(b), or MinDecodedBytes), the rows (at most one per
// byte received plus 64, and one per minimal row of the claimed length, of
// RowBytes each) and their latency counts (8 bytes per bucket of at least
// 2 bytes, so 4 times the decompressed length). So memory follows the
// bytes actually received, never a count the body claims. A collector
// bounds the memory of concurrent decodes with it.
func DecodeBudget(b []byte) int64 {
	n := int64(len(b))
	raw := min(int64(MaxDecodedBytes), max(int64(MinDecodedBytes), int64(MaxExpansion)*n))
	if len(b) > headerLen {
		if claim, k := binary.Uvarint(b[headerLen:]); k > 0 && claim < uint64(raw) {
			raw = int64(claim)
		}
	}
	rows := min(int64(MaxRows), n+rowSlack, raw/minRowLen+1)
	return n + raw + rows*RowBytes + 4*raw
}

// The compression of a body, byte 6 of the header.
const (
	codecNone byte = 0
	codecZstd byte = 1
)

var magic = [4]byte{'q', 't', 'r', 'p'}

const headerLen = 8

// The encoder is safe for concurrent EncodeAll and serves the whole
// process. Decoding uses a bounded set of decoders (decoders), so that one
// slow body never holds up the others.
var (
	zenc = sync.OnceValue(func() *zstd.Encoder {
		e, err := zstd.NewWriter(nil,
			zstd.WithEncoderConcurrency(1),
			zstd.WithEncoderLevel(zstd.SpeedDefault),
			zstd.WithEncoderCRC(false),
			zstd.WithLowerEncoderMem(true))
		if err != nil {
			panic("ingest: zstd encoder: " + err.Error()) // only on bad options
		}
		return e
	})
	zdecs = sync.OnceValue(func() chan *zstd.Decoder {
		return make(chan *zstd.Decoder, maxDecoders)
	})
)

// maxDecoders bounds the zstd decoders kept for reuse; more decode at
// once, each with a decoder of its own made for the call.
const maxDecoders = 16

func newDecoder() *zstd.Decoder {
	d, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxMemory(MaxDecodedBytes),
		zstd.WithDecoderMaxWindow(MaxDecodedBytes),
		zstd.WithDecodeAllCapLimit(true))
	if err != nil {
		panic("ingest: zstd decoder: " + err.Error()) // only on bad options
	}
	return d
}

// Decompression buffers are kept for reuse: a decoded report holds no
// reference to its raw bytes (strings and sketches are copied out), so
// UnmarshalBinary hands the buffer back once the report is read. At most
// maxRawKept are kept, each of at most maxRawKeptBytes.
const (
	maxRawKept      = 64
	maxRawKeptBytes = 1 << 20
)

var rawBufs = make(chan []byte, maxRawKept)

// rawBuf returns an empty buffer of capacity n or more.
func rawBuf(n uint64) []byte {
	select {
	case b := <-rawBufs:
		if uint64(cap(b)) >= n {
			return b[:0]
		}
	default:
	}
	return make([]byte, 0, n)
}

func putRawBuf(b []byte) {
	if cap(b) > maxRawKeptBytes {
		return
	}
	select {
	case rawBufs <- b:
	default:
	}
}

// decompress decodes a zstd body into a buffer of capacity limit, which
// the decoder never grows (a bomb stops at the limit).
func decompress(body []byte, limit uint64) ([]byte, error) {
	var d *zstd.Decoder
	select {
	case d = <-zdecs():
	default:
		d = newDecoder()
	}
	raw, err := d.DecodeAll(body, rawBuf(limit))
	select {
	case zdecs() <- d:
	default:
		d.Close()
	}
	return raw, err
}

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

// DecodeReport decodes a body written by MarshalBinary into a new Report.
// It never panics and never allocates more than a bounded amount,
// whatever b holds. A report of a newer format version gives ErrVersion;
// anything else that is not a report gives ErrMalformed or ErrTooLarge.
func DecodeReport(b []byte) (*Report, error) {
	r := new(Report)
	if err := r.UnmarshalBinary(b); err != nil {
		return nil, err
	}
	return r, nil
}

// UnmarshalBinary decodes b like DecodeReport, into r. It reuses r.Rows
// (and their histograms' memory) when it has the capacity, so a collector
// that decodes into one Report per worker allocates little per report.
// Nothing of r refers to b afterwards. On error r is left empty and
// usable.
func (r *Report) UnmarshalBinary(b []byte) error {
	raw, v, pooled, err := openBody(b)
	if err == nil {
		d := decoder{b: raw, wire: len(b)}
		d.report(r)
		if v >= 2 {
			d.sections(r)
		}
		err = d.err
		if err == nil && len(d.b) != 0 {
			err = fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(d.b))
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

// decoder reads the raw body; the first error sticks and every later read
// returns zero values.
type decoder struct {
	b    []byte
	wire int // bytes received (before decompression)
	err  error
	// idx and cnt hold the buckets of the histogram being read.
	idx []uint16
	cnt []uint64
}

func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
		d.b = nil
	}
}

func (d *decoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(fmt.Errorf("%w: %s: truncated or overlong varint", ErrMalformed, what))
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint(what string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail(fmt.Errorf("%w: %s: truncated or overlong varint", ErrMalformed, what))
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes(n uint64, what string) []byte {
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail(fmt.Errorf("%w: %s: %d bytes wanted, %d left", ErrMalformed, what, n, len(d.b)))
		return nil
	}
	p := d.b[:n]
	d.b = d.b[n:]
	return p
}

func (d *decoder) byte(what string) byte {
	p := d.bytes(1, what)
	if p == nil {
		return 0
	}
	return p[0]
}

func (d *decoder) float(what string) float64 {
	p := d.bytes(8, what)
	if p == nil {
		return 0
	}
	f := math.Float64frombits(binary.LittleEndian.Uint64(p))
	if !finite(f) || f < 0 {
		d.fail(fmt.Errorf("%w: %s: %v (want a finite number ≥ 0)", ErrMalformed, what, f))
		return 0
	}
	return f
}

func (d *decoder) string(what string) string {
	n := d.uvarint(what)
	if n > MaxStringLen {
		d.fail(fmt.Errorf("%w: %s of %d bytes, at most %d", ErrTooLarge, what, n, MaxStringLen))
		return ""
	}
	return string(d.bytes(n, what))
}

// count reads an element count, checked against its limit and against
// the bytes left (each element takes at least minSize bytes), so that a
// forged count never makes the decoder allocate.
func (d *decoder) count(what string, limit uint64, minSize int) int {
	n := d.uvarint(what)
	if d.err != nil {
		return 0
	}
	if n > limit {
		d.fail(fmt.Errorf("%w: %d %s, at most %d", ErrTooLarge, n, what, limit))
		return 0
	}
	if n > uint64(len(d.b)/minSize) {
		d.fail(fmt.Errorf("%w: %d %s in %d bytes", ErrMalformed, n, what, len(d.b)))
		return 0
	}
	return int(n)
}

// minRowLen is the smallest encoded row: 2 indexes, tier, kind, 5 varints,
// the RU and the bucket count.
const minRowLen = 2 + 2 + 5 + 8 + 1

func (d *decoder) report(r *Report) {
	rows := r.Rows[:0]
	*r = Report{}
	r.Source.Service = d.string("source service")
	r.Source.Instance = d.string("source instance")
	r.Source.Host = d.string("source host")
	r.Seq = d.uvarint("seq")
	start := d.varint("start")
	span := d.uvarint("window")
	if span > math.MaxInt64 || (start > 0 && int64(span) > math.MaxInt64-start) {
		d.fail(fmt.Errorf("%w: window of %d ns", ErrMalformed, span))
	}
	r.Start = time.Unix(0, start).UTC()
	r.End = r.Start.Add(time.Duration(span))

	table := make([]string, d.count("strings", MaxStrings, 1))
	for i := range table {
		table[i] = d.string("string")
	}
	ref := func(what string) string {
		i := d.uvarint(what)
		if d.err != nil {
			return ""
		}
		if i >= uint64(len(table)) {
			d.fail(fmt.Errorf("%w: %s refers to string %d of %d", ErrMalformed, what, i, len(table)))
			return ""
		}
		return table[i]
	}

	n := d.count("rows", MaxRows, minRowLen)
	if d.err == nil && n > d.wire+rowSlack {
		d.fail(fmt.Errorf("%w: %d rows in a body of %d bytes (at most one row per byte received, plus %d)", ErrTooLarge, n, d.wire, rowSlack))
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
		row.Tenant = ref("row tenant")
		row.Route = ref("row route")
		row.Tier = tenant.Tier(d.byte("row tier"))
		row.Kind = Kind(d.byte("row kind"))
		row.Count = d.uvarint("row count")
		row.Errors = d.uvarint("row errors")
		dur := d.uvarint("row duration")
		row.RU = d.float("row ru")
		row.Bytes = d.uvarint("row bytes")
		row.Rows = d.uvarint("row rows")
		d.histogram(&row.Latency)
		if d.err != nil {
			break
		}
		switch {
		case row.Tier != tenant.TierUnset && !row.Tier.Valid():
			d.fail(fmt.Errorf("%w: row %d: tier %d", ErrMalformed, i, uint8(row.Tier)))
		case !row.Kind.Valid():
			d.fail(fmt.Errorf("%w: row %d: kind %d", ErrMalformed, i, uint8(row.Kind)))
		case row.Errors > row.Count:
			d.fail(fmt.Errorf("%w: row %d: %d errors of %d records", ErrMalformed, i, row.Errors, row.Count))
		case dur > math.MaxInt64:
			d.fail(fmt.Errorf("%w: row %d: duration %d ns", ErrMalformed, i, dur))
		case row.Count > MaxCount:
			d.fail(fmt.Errorf("%w: row %d (tenant %q): count %d, at most %d", ErrRange, i, row.Tenant, row.Count, uint64(MaxCount)))
		case row.Bytes > MaxBytes || row.Rows > MaxBytes:
			d.fail(fmt.Errorf("%w: row %d (tenant %q): %d bytes, %d rows, at most %d each", ErrRange, i, row.Tenant, row.Bytes, row.Rows, uint64(MaxBytes)))
		case dur > uint64(max(row.Count, 1))*uint64(MaxRecordDuration):
			d.fail(fmt.Errorf("%w: row %d (tenant %q): duration %v for %d records, at most %v each", ErrRange, i, row.Tenant, time.Duration(dur), row.Count, MaxRecordDuration))
		case row.RU > float64(max(row.Count, 1))*MaxRecordRU:
			d.fail(fmt.Errorf("%w: row %d (tenant %q): %g RU for %d records, at most %g each", ErrRange, i, row.Tenant, row.RU, row.Count, MaxRecordRU))
		}
		row.Duration = time.Duration(dur)
	}

	if n := d.uvarint("key sketch length"); n > 0 {
		if n-1 > MaxSketchBytes {
			d.fail(fmt.Errorf("%w: key sketch of %d bytes, at most %d", ErrTooLarge, n-1, MaxSketchBytes))
		}
		if kb := d.bytes(n-1, "key sketch"); d.err == nil {
			s := new(spacesaving.Sketch)
			if err := s.UnmarshalBinary(kb); err != nil {
				d.fail(fmt.Errorf("%w: key sketch: %v", ErrMalformed, err))
			} else {
				r.Keys = s
			}
		}
	}
	if n := d.count("key tenants", MaxKeyTenants, 2); n > 0 {
		r.KeyTenants = make(map[string]string, n)
		for range n {
			k := d.string("key")
			r.KeyTenants[k] = ref("key tenant")
		}
	}

	e := &r.Enforcement
	for _, a := range [...]*[tenant.NumTiers]uint64{&e.Admitted, &e.Throttled, &e.Shed, &e.ShadowThrottled, &e.ShadowShed} {
		for i := range a {
			a[i] = d.uvarint("enforcement counter")
			if a[i] > MaxCount {
				d.fail(fmt.Errorf("%w: enforcement counter %d, at most %d", ErrRange, a[i], uint64(MaxCount)))
			}
		}
	}
	for i := range e.PriceMultiplier {
		e.PriceMultiplier[i] = d.float("price multiplier")
		if e.PriceMultiplier[i] > MaxPriceMultiplier {
			d.fail(fmt.Errorf("%w: price multiplier of T%d %g, at most %g", ErrRange, i, e.PriceMultiplier[i], MaxPriceMultiplier))
		}
	}
}

// histogram reads what appendHistogram wrote into h: the buckets, checked
// as they come, then all at once into h (n buckets, each of 2 bytes at
// least, so a forged count costs at most 4 times the bytes left).
func (d *decoder) histogram(h *histogram.Sparse) {
	n := d.count("histogram buckets", histogram.NumBuckets, 2)
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
			d.fail(fmt.Errorf("%w: bucket gap: truncated or overlong varint", ErrMalformed))
			return
		}
		b = b[m:]
		c, m := binary.Uvarint(b)
		if m <= 0 {
			d.fail(fmt.Errorf("%w: bucket count: truncated or overlong varint", ErrMalformed))
			return
		}
		b = b[m:]
		i := next + gap
		if i >= histogram.NumBuckets || i < next {
			d.fail(fmt.Errorf("%w: histogram bucket %d (at most %d buckets, increasing)", ErrMalformed, i, histogram.NumBuckets))
			return
		}
		if c > MaxCount {
			d.fail(fmt.Errorf("%w: histogram bucket %d counts %d, at most %d", ErrRange, i, c, uint64(MaxCount)))
			return
		}
		idx[k], cnt[k] = uint16(i), c
		next = i + 1
	}
	d.b = b
	if err := h.SetPairs(idx, cnt); err != nil { // checked above: never
		d.fail(fmt.Errorf("%w: histogram: %v", ErrMalformed, err))
	}
}
