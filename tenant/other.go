package tenant

// Other is the name of the overflow row wherever qtop keeps a top N of
// tenants: the row that holds, with exact totals, the load of every
// tenant beyond the N (a report's rows, the live view, the store, cost
// reports, top-N Prometheus labels). No tenant is counted in it by name:
// a tenant really named "other" counts under its stand-in, [Escape]. The
// overflow rows of routes and of qtop's other groupings have the same
// name, and a value really named so the same stand-in, [EscapeValue]; a
// route that is not valid has a stand-in of its own ([SubstituteRoute]),
// so no route but those beyond the limit is ever counted in "other".
const Other = "other"

// Escape returns the name qtop counts tenant s under wherever it
// aggregates by tenant: s itself, except for the names qtop's own rows
// have, which come back as their stand-ins, formed as [Substitute] forms
// a bad name's:
//
//	"other"           other#d9298a10d1b07358   (the overflow row)
//	"~abcdefghijkl"   ~abcdefghijkl#…          (the form of a session id)
//
// A session id ([IsSessionID]) is the name session tagging writes in
// PostgreSQL's application_name for a tenant whose name does not fit
// there; the sampler counts a session under its id until it learns the
// name. A tenant really named like an id is escaped, so a row named like
// an id is always one.
//
// Every door where load enters qtop (a meter.Recorder's records, the
// agent's and the gate's metrics and pool waits, OpenTelemetry spans,
// sampled PostgreSQL sessions, Envoy descriptors) and every place that
// names a tenant to act on (policy rules, erasure) escapes the same way,
// so a tenant named "other" is one row of its own everywhere, billed and
// throttled under its stand-in. The tags in a request's context keep the
// name as given (the application reads it back unchanged, and SQL
// comments carry it). Escape allocates only for a name of an id's form.
func Escape(s string) string {
	switch {
	case s == Other:
		return otherStandIn
	case IsSessionID(s):
		return standIn(s)
	}
	return s
}

// EscapeValue returns the name qtop counts v under in a grouping other
// than the tenant (a route, an application_name, a user, a database): v
// itself, except [Other], the name of every overflow row, which comes back
// as its stand-in, as a tenant's does (other#d9298a10d1b07358). So a route
// or an application really named "other" is a row of its own, never
// inside the row of the routes or applications beyond the top ones.
// EscapeValue is idempotent (a stand-in comes back as it is), so a door
// may escape a value that a meter.Recorder, which escapes every route it
// is given, escapes again. Database budgets and runaway rules name their
// counters so too (api.BudgetName).
func EscapeValue(v string) string {
	if v == Other {
		return otherStandIn
	}
	return v
}

// IsSessionID reports whether s has the form of the short id session
// tagging writes for a tenant (sqlcomment.TenantID): '~' and 12 of
// a–z, 2–7 (60 bits of the name's SHA-256 in base32).
func IsSessionID(s string) bool {
	if len(s) != 13 || s[0] != '~' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '2' && c <= '7') {
			return false
		}
	}
	return true
}

// otherStandIn is Escape(Other), computed once.
var otherStandIn = standIn(Other)
