package incident

import (
	"time"
)

// Victims on a few requests. A tenant's p95 over a few requests is about
// its slowest: one slow call in ten seconds, which a quiet fleet shows
// somewhere most minutes, passes the victim test for the whole window,
// and so do two slow reports among a small tenant's fast lists. A
// tenant is judged on a few requests when none of its routes with a
// baseline has MinRouteRequests in the window: then on those routes
// (each against its own baseline, as usual p95s of a few requests are
// learnt), or, with no route's baseline known, on its p95 if it has
// fewer than MinRouteRequests requests in all. Such a tenant is named a
// victim only when something corroborates it:
//
//   - the same snapshot names an offender, or a victim judged on enough
//     requests (a neighbour slows the small tenants with the large ones),
//     or
//   - it has passed the test for longer than the window without a break
//     (Victim.Since), so more than one of its requests was slow.
//
// A small tenant slowed alone is named a window later than a large one;
// one slow call names nobody. The source's detector says how long it has
// seen a tenant slow (api.TenantRow.SlowSince), so a qtop started late,
// or reading once, names the same small victims as one that watched.

// corroborate returns h's victims with those of thin that something
// corroborates.
func (in *Tracker) corroborate(h Headline, thin []Victim) []Victim {
	if len(thin) == 0 {
		return h.Victims
	}
	all := len(h.Victims) > 0 || len(h.Offenders) > 0
	window := time.Duration(in.window * float64(time.Second))
	for _, v := range thin {
		if all || (!v.Since.IsZero() && in.now.Sub(v.Since) > window) {
			h.Victims = append(h.Victims, v)
		}
	}
	return h.Victims
}

// slow follows the tenant's run of snapshots passing the victim test
// (slow: snapshot n, at now, passes it; source: when the source says the
// run began, zero if it does not) and returns when the run began (zero:
// no run).
func (b *tenantBaseline) slow(slow bool, n int64, now, source time.Time) time.Time {
	if !slow {
		b.slowSince = time.Time{}
		return b.slowSince
	}
	if b.slowSince.IsZero() || b.slowAt != n-1 {
		b.slowSince = now
	}
	if !source.IsZero() && source.Before(b.slowSince) {
		b.slowSince = source
	}
	b.slowAt = n
	return b.slowSince
}

// SlowSince returns when tenant's p95 began to pass the victim test in
// the snapshots added, without a break (zero: it did not pass it in the
// last one). A collector serves it (api.TenantRow.SlowSince) so that its
// readers judge a tenant on a few requests as it does.
func (in *Tracker) SlowSince(tenant string) time.Time {
	if b := in.rows[tenant]; b != nil && b.slowAt == in.n {
		return b.slowSince
	}
	return time.Time{}
}
