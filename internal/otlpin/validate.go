package otlpin

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/qtop-dev/qtop/meter"
	"github.com/qtop-dev/qtop/report"
)

// Why a span is refused alone (partial success), never with its request:
// a value the collector would refuse in a report would otherwise make the
// collector refuse the source's whole window, and with it every
// acknowledged span of that second.
const (
	rejectNone     = iota
	rejectTime     // a zero start, or an end before the start
	rejectDuration // end − start above meter.MaxRecordDuration
	rejectRU       // qtop.ru NaN, infinite, negative or above meter.MaxRecordRU
	rejectSize     // a byte or row count beyond meter.MaxBytes (or not a number)
	numRejects
)

// rejectNames are the label values of qtop_otlp_spans_rejected_total.
var rejectNames = [numRejects]string{"", "time", "duration", "ru", "size"}

var rejectText = [numRejects]string{
	"",
	"a zero start time or an end before the start",
	fmt.Sprintf("a duration above %v", report.MaxRecordDuration),
	fmt.Sprintf("a qtop.ru that is not a number from 0 to %g", float64(report.MaxRecordRU)),
	fmt.Sprintf("a byte or row count above %d", int64(report.MaxBytes)),
}

// check says why sp, mapped into r, cannot be recorded (rejectNone: it
// can): every value must be within the bounds the collector checks per
// record in a report (meter.MaxRecordDuration, MaxRecordRU, MaxBytes).
func check(sp *rawSpan, r *meter.Record) int {
	switch {
	case sp.start == 0 || sp.end < sp.start:
		return rejectTime
	case sp.end-sp.start > uint64(report.MaxRecordDuration):
		return rejectDuration
	case math.IsNaN(r.RU) || r.RU < 0 || r.RU > report.MaxRecordRU:
		return rejectRU
	case r.Bytes < 0 || r.Bytes > report.MaxBytes || r.Rows < 0 || r.Rows > report.MaxBytes:
		return rejectSize
	}
	return rejectNone
}

// Which way a span's end is far from the receiver's clock; the label
// values of qtop_otlp_spans_skewed_total.
const (
	skewPast = iota
	skewFuture
	numSkews
	skewNone = -1
)

var skewNames = [numSkews]string{"past", "future"}

// skewOf says whether end (Unix ns) is further than skew from now, and
// which way (skewNone: it is not).
func skewOf(end uint64, now time.Time, skew time.Duration) int {
	n := now.UnixNano()
	switch {
	case end > math.MaxInt64 || int64(end) > n && int64(end)-n > int64(skew):
		return skewFuture
	case int64(end) < n && n-int64(end) > int64(skew):
		return skewPast
	}
	return skewNone
}

// rejectMessage is the partial success message for the counts by reason.
func rejectMessage(why *[numRejects]int) string {
	var b strings.Builder
	for i := rejectNone + 1; i < numRejects; i++ {
		if why[i] == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%d span(s) with %s", why[i], rejectText[i])
	}
	if b.Len() > 0 {
		b.WriteString(": refused alone, the request's other spans were kept")
	}
	return b.String()
}

// bound keeps each row of a window's report within what the collector
// accepts of a report, whatever many valid spans added up to (every span
// is within the per-record bounds, but their sums in one row of one
// second are not checked as they are added): a sum that would be refused
// stops at its bound instead, so one source's window is never refused
// for its sums. It returns the number of rows changed.
func bound(rep *report.Report) int {
	changed := 0
	for i := range rep.Rows {
		row := &rep.Rows[i]
		n := max(row.Count, 1)
		was := *row
		if row.Count > report.MaxCount {
			row.Count = report.MaxCount
		}
		if row.Errors > row.Count {
			row.Errors = row.Count
		}
		limit := time.Duration(math.MaxInt64)
		if n <= uint64(math.MaxInt64/int64(report.MaxRecordDuration)) {
			limit = time.Duration(n) * report.MaxRecordDuration
		}
		if row.Duration < 0 || row.Duration > limit {
			row.Duration = limit // a sum that wrapped is as large as allowed
		}
		if ru := float64(n) * report.MaxRecordRU; math.IsNaN(row.RU) || row.RU > ru {
			row.RU = ru
		}
		row.Bytes = min(row.Bytes, report.MaxBytes)
		row.Rows = min(row.Rows, report.MaxBytes)
		if row.Count != was.Count || row.Errors != was.Errors || row.Duration != was.Duration ||
			row.RU != was.RU || row.Bytes != was.Bytes || row.Rows != was.Rows {
			changed++
		}
	}
	return changed
}

// folded counts the records of rep's rows under report.OtherTenant: those
// the recorder folded once the window held its maximum of tenants.
func folded(rep *report.Report) uint64 {
	var n uint64
	for i := range rep.Rows {
		if rep.Rows[i].Tenant == report.OtherTenant {
			n += max(rep.Rows[i].Count, 1)
		}
	}
	return n
}
