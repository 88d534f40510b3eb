// Package autopilot closes the noisy-neighbour loop without a human: it
// runs the autopilot rules of the policy (policy.Autopilot) over the live
// view, second by second, and decides when to limit an offender, how to
// relax the limit as its victims recover, and when to lift it.
//
// The evidence is package incident's headline — the same victims and
// offenders qtop shows — plus each tenant's load of the rule's resource
// against its own baseline. A rule fires when its victims are hurt (at
// least victims_min tenants with p95 ≥ victim_p95_factor × their
// baseline, or a service's latency ratio below ratio_below) and one
// tenant drives at least min_share of its resource at min_factor × its
// own baseline or more. The action (a fleet quota, a throttle, a
// database budget, a price multiplier) is scaled from the offender's
// baseline frozen when it begins, so that the baseline never chases the
// load the limit holds down. It lasts at most for_seconds; it relaxes one
// step (× relax_factor) each hold_seconds the victims stay recovered
// (below recover_p95_factor and above ratio_recover: a band under the
// thresholds that act), tightens back a step if they are hurt again
// while the offender still uses more than half its limit, and lifts when
// the offender's load is back under lift_factor × its baseline and half
// its limit. An offender gone quiet (under half its limit) is not the
// cause of a slowdown then: its action relaxes on as if its victims had
// recovered, towards its lift. No change comes sooner than hold_seconds
// after the previous one; no new action sooner than interval_seconds
// after the last, nor while a restarted collector's window fills (its
// rates climb from nothing then; its actions wait for real figures too). T0 tenants and allowed tenants are never acted on.
//
// Every rule starts in shadow: its decisions are made and recorded the
// same way, and the policy parts they write are shadow rules (or warn
// budgets), counted but not applied. A rule switched to enforce rewrites
// its active actions' parts at once (KindMode), so a shadow action that
// named the offender enforces without waiting for its end. The Engine takes its time from the
// snapshots, so replaying a recording decides exactly as the live stream
// did:
//
//	e, err := autopilot.New(*pol.Autopilot)
//	...
//	for s := range snapshots { // one a second
//		for _, d := range e.Step(&s) {
//			log.Print(d) // "… would apply quota rule=… tenant=bigcorp limit=62 RU/s · …"
//			// write d.PolicyRule or d.Budget into the policy, audited
//		}
//	}
package autopilot
