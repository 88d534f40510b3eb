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
//
// A break is a dip under the line longer than VictimDip of the window
// (3 s of a collector's 10 s): a tenant that passes the test again
// within that of the last snapshot it passed it in (a second or two just
// under the line) is slow without a break, and its run keeps its start.
// A p95 near 1.5× its baseline crosses the line back and forth as single
// requests enter and leave the window while none of them got faster:
// the windows on either side of such a dip share at least 7 of their 10
// seconds, mostly the same slow requests, and ending the run there left
// a small tenant slowed for minutes unnamed (each run shorter than the
// window) and counted as recovered by the autopilot, which reads these
// victims. A tenant fast for longer than that has recovered: its next
// run starts afresh. The bound stays well inside the window, so one slow
// call still names nobody: it keeps a small tenant slow for exactly the
// window, and only a second slow call within the bound after the first
// left it, two in 13 s, makes one run longer than the window. The dip
// itself names nobody (its p95 is under the line); Since, and the FOR
// column of qtop that shows it, go on from the run's start.

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
// (slow: the snapshot at now passes it; source: when the source says the
// run began, zero if it does not; dip: the longest break the run goes on
// through) and returns when the run began (zero: this snapshot does not
// pass). A clock that steps back keeps the run, its start no later than
// now.
func (b *tenantBaseline) slow(slow bool, now, source time.Time, dip time.Duration) time.Time {
	if !slow {
		return time.Time{}
	}
	if b.slowSince.IsZero() || now.Sub(b.slowLast) > dip {
		b.slowSince = now
	}
	if b.slowSince.After(now) {
		b.slowSince = now
	}
	if !source.IsZero() && source.Before(b.slowSince) {
		b.slowSince = source
	}
	b.slowLast = now
	return b.slowSince
}

// dip is the longest break a run of snapshots passing the victim test
// goes on through: VictimDip of the window.
func (in *Tracker) dip() time.Duration {
	return time.Duration(VictimDip * in.window * float64(time.Second))
}

// SlowSince returns when tenant's p95 began to pass the victim test in
// the snapshots added, without a break longer than VictimDip of the
// window: the start of the run it is in, through a dip too (zero: it has
// not passed the test in the last VictimDip of the window). A collector
// serves it (api.TenantRow.SlowSince) so that its readers judge a tenant
// on a few requests as it does: a reader whose snapshot the tenant passes
// in takes it as its run's start, whether the collector's detector had
// judged that second yet or still stood in the dip before it.
func (in *Tracker) SlowSince(tenant string) time.Time {
	if b := in.rows[tenant]; b != nil && !b.slowSince.IsZero() && in.now.Sub(b.slowLast) <= in.dip() {
		return b.slowSince
	}
	return time.Time{}
}
