package tenant

// Other is the name of the overflow row wherever qtop keeps a top N of
// tenants: the row that holds, with exact totals, the load of every
// tenant beyond the N (a report's rows, the live view, the store, cost
// reports, top-N Prometheus labels). No tenant is counted in it by name:
// a tenant really named "other" counts under its stand-in, [Escape].
const Other = "other"

// Escape returns the name qtop counts tenant s under wherever it
// aggregates by tenant: s itself, except for a tenant named [Other],
// which would otherwise merge with the overflow row. That one comes
// back as its stand-in, formed as [Substitute] forms a bad name's:
//
//	"other"   other#d9298a10d1b07358
//
// Every door where load enters qtop (a meter.Recorder's records, the
// agent's and the gate's metrics and pool waits, OpenTelemetry spans,
// sampled PostgreSQL sessions, Envoy descriptors) and every place that
// names a tenant to act on (policy rules, erasure) escapes the same way,
// so a tenant named "other" is one row of its own everywhere, billed and
// throttled under its stand-in. The tags in a request's context keep the
// name as given (the application reads it back unchanged, and SQL
// comments carry it). Escape does not allocate.
func Escape(s string) string {
	if s == Other {
		return otherStandIn
	}
	return s
}

// otherStandIn is Escape(Other), computed once.
var otherStandIn = standIn(Other)
