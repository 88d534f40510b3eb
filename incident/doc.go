// Package incident says who is hurting whom in a stream of live snapshots
// (api.Snapshot): the offenders, rows driving load far above their own
// baseline, and the victims, tenants whose latency grew while their own
// load did not. It is the headline qtop shows under its tabs and the
// evidence the autopilot acts on: both read the same Tracker.
//
// Feed a Tracker every snapshot of one source, in order:
//
//	var tr incident.Tracker
//	for s := range snapshots {
//		h := tr.Add(&s)
//		fmt.Println(h.Line) // "bigcorp 60% of RU, ×9.1 its baseline · victims: 20 tenants, p95 ×2.6 (key 8)"
//	}
//
// Offenders: rows with at least DriverShare of the measure whose load
// over the last DriverRecent seconds of their history is at least
// DriverFactor times their own baseline: the source's
// (api.TenantRow.BaselineRUPerSec, or BaselineDBLoad for a row judged on
// DB load, from a collector that keeps baselines: the same for every
// client), else the mean of the same
// history before those seconds (a source's 120 s, so about 110 s). A row
// with no load in its baseline is "new" (Factor 0) — unless no row had
// load then: histories that begin before the source's first load (a
// collector started before its fleet) are cut to the seconds since it,
// so a fleet that starts after its collector is not new load, while a
// row whose load starts later than the others' is. A source that watched
// before the tracker started (a restarted collector's baselines) tells
// it what a row's load was then (Tracker.Before). Once flagged, an
// offender keeps the baseline it was flagged against and stays flagged
// until its recent load is back under DriverClear times it (or its share
// under half DriverShare): an import that runs for an hour is named for
// the hour, not for the two minutes its rise stays in the history. After
// MaxFlag (an hour) the level is the new normal and is judged afresh. A row
// the source flagged itself (api.TenantRow.FlaggedSince: a collector runs
// this detector on its baselines) is an offender as the source says, so
// a client started late, or reading once, names it too: on a headline of
// DB load as on one of RU, and the untagged row as a tenant. The
// line says how old a baseline this tracker froze is ("×9.1 its baseline
// of 4m ago"). The measure is RU, or DB load when the source is
// PostgreSQL alone or no tenant has RU, whatever measure orders the rows.
// A row with DB load and no RU (load no process reports: a batch job,
// pgbench, a service with no agent, seen by the PostgreSQL sampler) is
// judged on its share of DB load instead, and its Offender says so
// (Measure "DB load"): "pgnoisy 57% of DB load, new load". A row first
// seen after the tracker started had no load before (new load); a
// collector sends such a row's DB-load baseline, or the DB load it was
// flagged against (api.TenantRow.BaselineDBLoad).
//
// Victims: tenants whose p95 latency is at least VictimP95 times their
// own baseline while their load, as their share of RU, is at most
// VictimLoad times its baseline: a tenant whose own work grew faster than
// the others' is not a victim. (The share, not the rate: rates climb for
// everyone while a source's window fills after a start.) A tenant's
// baseline is the one the snapshot carries (api.TenantRow's
// BaselineP95Seconds, from a collector that keeps baselines), else what
// the Tracker saw of it between BaselineSpan and BaselineRecent snapshots
// ago (or, while it has watched for less than that, its first BaselineMin
// snapshots): the lower quartile of its p95 (so that an incident filling
// part of that span does not become the baseline at once) and the median
// of its share. While an offender is flagged, what the tenants show does
// not teach their baselines. Offenders are never victims. PostgreSQL alone knows no
// latency: a postgres source has no victims.
//
// Against its own baselines the Tracker also follows each tenant's routes
// (api.TenantRow.Routes): a tenant whose p95 rose only because its mix
// moved toward its slow routes (a few more 50 ms reports among 2 ms
// lists) is no victim once a route of it has a baseline; a victim is
// one with a route slower than that route's own baseline (among its
// routes with MinRouteRequests in the window), and its Routes name those. A collector that keeps baselines serves its routes'
// too (api.RouteRow.BaselineP95Seconds); against a collector's tenant
// baseline only those count, so every qtop reading that collector names
// the same victims. A tenant of a few requests a window is named a victim
// only when the snapshot corroborates it or its slowness outlasts the
// window (thin.go; Victim.Since, api.TenantRow.SlowSince), a dip of a
// second or two under the line (under VictimDip of the window) being no
// break in it.
package incident
