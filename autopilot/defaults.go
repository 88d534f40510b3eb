package autopilot

import "github.com/qtop-dev/qtop/policy"

// Default is the rule set `collector autopilot --replay` runs without
// --policy, in shadow: when at least 3 tenants' p95 is at least twice
// their baseline, or a service's latency ratio falls below 0.7, a
// fleet-wide quota at its RU baseline (a new load's: the median tenant's)
// for the tenant that drives at least 30% of the RU at 3× its own
// baseline or more, for at most 15 minutes; relaxed twice, doubling, as
// victims recover; lifted when its load is back near its baseline.
func Default() policy.Autopilot {
	return policy.Autopilot{Rules: []policy.AutopilotRule{{
		Name:       "noisy-neighbour",
		Mode:       policy.AutopilotShadow,
		VictimsMin: 3, VictimP95Factor: 2, RatioBelow: 0.7,
		Resource: policy.ResourceRU, MinShare: 0.3, MinFactor: 3,
		Action: policy.AutopilotQuota, Factor: 1,
		ForSeconds: 900, IntervalSeconds: 30, HoldSeconds: 30, RelaxSteps: 2, RelaxFactor: 2, LiftFactor: 1.5,
	}}}
}
