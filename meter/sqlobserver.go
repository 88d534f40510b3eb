package meter

import (
	"context"
	"fmt"

	"github.com/qtop-dev/qtop/sqlcomment"
)

// SQLObserver returns a sqlcomment observer that records every statement,
// begin, commit, rollback and prepare as a KindDB record of the tags of
// its context (or of its OTel baggage, as the comment), so that database time per tenant
// is measured even in an application without tracing. Pings are not
// recorded. Install it with sqlcomment.WithObserver.
//
// Do not also record database client spans of the same statements
// through the SpanProcessor, or they count twice: an application that has
// both passes WithDBSpans(false) to NewSpanProcessor.
//
// It returns ErrInvalid for a nil Recorder.
func SQLObserver(rec *Recorder) (sqlcomment.Observer, error) {
	if rec == nil {
		return nil, fmt.Errorf("%w: nil Recorder", ErrInvalid)
	}
	return func(ctx context.Context, e sqlcomment.Event) {
		if e.Op == sqlcomment.OpPing {
			return
		}
		// e.Tags are the tags the statement's comment carries (found with
		// tenant.Lookup), so the record and the comment always agree.
		r := Record{
			Time:     e.Start.Add(e.Duration),
			Tags:     e.Tags,
			Kind:     KindDB,
			Duration: e.Duration,
			Err:      e.Err != nil,
		}
		if e.Rows > 0 {
			r.Rows = e.Rows
		}
		rec.Record(r)
	}, nil
}
