package report

import (
	"encoding/binary"
	"errors"
	"time"
	"unsafe"

	"github.com/qtop-dev/qtop/histogram"
	"github.com/qtop-dev/qtop/spacesaving"
	"github.com/qtop-dev/qtop/tenant"
)

// Errors of the package; test with errors.Is. Every error returned by the
// package wraps one of them behind a "report:" prefix.
var (
	// ErrVersion: the report was written by a newer (or unknown) version
	// of the format than this decoder understands.
	ErrVersion = errors.New("report: unsupported report version")
	// ErrMalformed: the bytes are not a report (bad magic, truncated,
	// out-of-range field, trailing bytes, bad compression).
	ErrMalformed = errors.New("report: malformed report")
	// ErrTooLarge: a body, a decompressed body, a count or a string is
	// above its limit.
	ErrTooLarge = errors.New("report: report too large")
	// ErrInvalid: a value cannot be encoded (or an option is out of range).
	ErrInvalid = errors.New("report: invalid value")
	// ErrRange: a count, duration, RU or byte sum is above what one
	// process can report for one window (see MaxCount), so it would
	// wrap or swamp every sum it joins.
	ErrRange = errors.New("report: value out of range")
)

// OtherTenant is the tenant of the row that holds, with exact totals, the
// load of every tenant beyond the recorder's tenant sketch (tenant.Other:
// a tenant really named so is sent under its stand-in, tenant.Escape, so
// a row of this name is always the overflow). OtherRoute plays the same
// role for routes beyond a tenant's route limit: a route really named so
// is sent under its stand-in (tenant.EscapeValue), and a route that is not
// valid under one of its own (tenant.SubstituteRoute), never in it.
const (
	OtherTenant = tenant.Other
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
	// Sections are the optional parts of the report (version 2), at most
	// one per tag, each defined by the package of the feature it reports
	// (see Section); SectionOf reads one, SetSection sets one. A section
	// is set only when it has something to say.
	Sections []Section
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
