package meter

import (
	"time"

	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/tenant"
)

// Record is one finished unit of work: a request served, a statement
// run, a job done. Everything downstream aggregates records.
type Record struct {
	// Time is when the work finished.
	Time time.Time
	// Tags say whom the work was for. A record without a tenant is
	// counted under report.UnknownTenant. A tenant or route named like
	// the overflow row (report.OtherTenant, report.OtherRoute) is counted
	// under its stand-in (tenant.Escape, tenant.EscapeValue), a row of its
	// own: pass names as the application knows them (a stand-in passed
	// in is kept as it is). A route above tenant.MaxRouteLen is counted
	// under its stand-in (tenant.SubstituteRoute).
	Tags tenant.Tags
	Kind report.Kind
	// Duration is the wall time of the work.
	Duration time.Duration
	// Rows is the number of rows read or written (db), or items processed.
	Rows int64
	// Bytes is the payload size (response body, result set, job input).
	Bytes int64
	// Err is true when the work failed.
	Err bool
	// RU is the request units charged for the work (see package enforce).
	RU float64
	// Refused is true when the process refused the work itself, without
	// doing it (a throttle's 429, a shed's 503): it is counted, but its
	// duration is not, so that a throttled tenant's instant refusals do
	// not lower the latency the victims are judged by.
	Refused bool
}
