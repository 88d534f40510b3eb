// Package sqlmeter records the statements of a sqlcomment-wrapped
// database handle into a meter.Recorder (SQLObserver).
package sqlmeter

import (
	"context"
	"fmt"

	"github.com/qtop-dev/qtop/meter"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/sqlcomment"
)

// SQLObserver returns a sqlcomment observer that records every statement,
// begin, commit, rollback and prepare as a report.KindDB record of the tags of
// its context (or of its OTel baggage, as the comment), so that database time per tenant
// is measured even in an application without tracing. Pings are not
// recorded. Install it with sqlcomment.WithObserver.
//
// Do not also record database client spans of the same statements
// through the SpanProcessor, or they count twice: an application that has
// both passes WithDBSpans(false) to NewSpanProcessor.
//
// It returns meter.ErrInvalid for a nil Recorder.
func SQLObserver(rec *meter.Recorder) (sqlcomment.Observer, error) {
	if rec == nil {
		return nil, fmt.Errorf("%w: nil Recorder", meter.ErrInvalid)
	}
	return func(ctx context.Context, e sqlcomment.Event) {
		if e.Op == sqlcomment.OpPing {
			return
		}
		// e.Tags are the tags the statement's comment carries (found with
		// tenant.Lookup), so the record and the comment always agree.
		r := meter.Record{
			Time:     e.Start.Add(e.Duration),
			Tags:     e.Tags,
			Kind:     report.KindDB,
			Duration: e.Duration,
			Err:      e.Err != nil,
		}
		if e.Rows > 0 {
			r.Rows = e.Rows
		}
		rec.Record(r)
	}, nil
}
