package api

import (
	"cmp"
	"slices"
)

// The parts of a fleet snapshot besides tenants, keys, statements,
// services and enforcement (Merge).

// mergeDatabase takes what a collector's sampler read from PostgreSQL —
// the server's header, Top SQL, the xmin holders, the parallel workers
// and the grouping — from the newest snapshot that has a server header:
// collectors sampling the same database see the same facts, so adding
// them would count the database once per collector.
func mergeDatabase(out *Snapshot, snaps []Snapshot) {
	var from *Snapshot
	for i := range snaps {
		s := &snaps[i]
		if out.GroupBy == "" {
			out.GroupBy = s.GroupBy
		}
		if s.Server != nil && (from == nil || s.Time.After(from.Time)) {
			from = s
		}
	}
	if from == nil {
		for i := range snaps { // no header: the first sampler's error, if any
			if snaps[i].TopSQLError != "" {
				out.TopSQLError = snaps[i].TopSQLError
				break
			}
		}
		return
	}
	out.Server, out.TopSQL, out.TopSQLError = from.Server, from.TopSQL, from.TopSQLError
	out.XminHolders, out.ParallelWorkers = from.XminHolders, from.ParallelWorkers
}

// mergePoolWait adds each tenant's pool wait across collectors (each
// holds its own processes' pools): waits and acquisitions add, the
// longest wait is the largest; most waited first, at most
// MaxPoolWaitRows.
func mergePoolWait(snaps []Snapshot) []PoolWaitRow {
	var out []PoolWaitRow
	at := map[string]int{}
	for _, s := range snaps {
		for _, r := range s.PoolWait {
			i, ok := at[r.Tenant]
			if !ok {
				at[r.Tenant] = len(out)
				out = append(out, r)
				continue
			}
			a := &out[i]
			a.WaitPerSec += r.WaitPerSec
			a.AcquirePerSec += r.AcquirePerSec
			a.MaxSeconds = max(a.MaxSeconds, r.MaxSeconds)
		}
	}
	slices.SortStableFunc(out, func(a, b PoolWaitRow) int {
		return cmp.Or(cmp.Compare(b.WaitPerSec, a.WaitPerSec), cmp.Compare(a.Tenant, b.Tenant))
	})
	if len(out) > MaxPoolWaitRows {
		out = out[:MaxPoolWaitRows]
	}
	return out
}

// mergeBudgets adds each budget's and runaway rule's counters across
// collectors (the processes that count them report to one collector
// each); its mode is the policy's, the same on every collector.
func mergeBudgets(snaps []Snapshot) []BudgetRow {
	var out []BudgetRow
	type key struct {
		id      string
		runaway bool
	}
	at := map[key]int{}
	for _, s := range snaps {
		for _, b := range s.Budgets {
			k := key{b.ID, b.Runaway}
			if i, ok := at[k]; ok {
				out[i].Add(&b)
				continue
			}
			at[k] = len(out)
			out = append(out, b)
		}
	}
	return out
}

// mergeUnapplied keeps the rules some collector found unapplied whose
// tenant no collector lists with requests (they reported to another
// collector: a process there applies the rule), their DB load added.
func mergeUnapplied(snaps []Snapshot) []Unapplied {
	served := map[string]bool{}
	for _, s := range snaps {
		for _, r := range s.Tenants {
			if r.ReqPerSec > 0 {
				served[r.Tenant] = true
			}
		}
	}
	var out []Unapplied
	at := map[string]int{}
	for _, s := range snaps {
		for _, u := range s.Unapplied {
			if served[u.Tenant] {
				continue
			}
			if i, ok := at[u.Rule]; ok {
				out[i].DBLoad += u.DBLoad
				continue
			}
			at[u.Rule] = len(out)
			out = append(out, u)
		}
	}
	return out
}

// mergeAppliedBy adds the processes that can apply the policy, over the
// collectors they report to; nil when no collector said.
func mergeAppliedBy(snaps []Snapshot) *AppliedBy {
	var out *AppliedBy
	for _, s := range snaps {
		if s.AppliedBy == nil {
			continue
		}
		if out == nil {
			out = new(AppliedBy)
		}
		out.OTLPServices += s.AppliedBy.OTLPServices
		out.Agents += s.AppliedBy.Agents
		out.Gates += s.AppliedBy.Gates
		out.RateLimitService = out.RateLimitService || s.AppliedBy.RateLimitService
	}
	return out
}

// mergeAutopilot is the status of the collector that runs the autopilot
// (it holds the fleet's lock: Acting), else the first collector's.
func mergeAutopilot(snaps []Snapshot) *AutopilotStatus {
	var out *AutopilotStatus
	for _, s := range snaps {
		if s.Autopilot == nil {
			continue
		}
		if s.Autopilot.Acting {
			return s.Autopilot
		}
		if out == nil {
			out = s.Autopilot
		}
	}
	return out
}
