package api

import (
	"cmp"
	"slices"
	"time"
)

// PeerStatus says whether one collector's snapshot is part of a fleet
// snapshot (see Merge).
type PeerStatus struct {
	Collector string `json:"collector"`
	OK        bool   `json:"ok"`
	Error     string `json:"error,omitempty"`
	// Time is the time of the collector's snapshot.
	Time time.Time `json:"time,omitzero"`
}

// ScopeLocal is the value of the scope query parameter that asks a
// collector for its own snapshot only (not merged with its peers): what
// collectors ask each other, so a fleet view never recurses.
const ScopeLocal = "local"

// Merge returns the fleet's snapshot from the snapshots of several
// collectors, each holding the load of the processes that report to it,
// with tenants ordered by measure, the top n, then "other".
//
// Sums are exact where each collector listed a tenant, a route or a key
// (ask each for up to 1000 tenants): rates, DB load, enforcement counters,
// reports and sources add up; every "other" row adds to the fleet's
// "other", so the fleet's totals are exact. What cannot be added is
// bounded instead:
//   - a tenant's p95 is the largest of the collectors' p95s, an upper bound
//     of the fleet's (the 95th percentile of a union is at most the largest
//     of its parts');
//   - a hot key missing from a collector's list may still have counted
//     there up to that list's smallest count: that much is added to its
//     Count and to its Err, so the true count stays in [Count−Err, Count];
//   - a service's latency ratio is the lowest (worst) of the collectors';
//   - TenantsSeen is a lower bound (a tenant may be counted by several);
//   - what the collectors' samplers read from PostgreSQL (the server's
//     header, Top SQL, xmin holders) is the newest collector's, not a sum:
//     they sample the same database;
//   - the autopilot's status is that of the collector running it.
//
// Pool waits, budget counters and the processes that apply the policy
// (AppliedBy) add up.
func Merge(snaps []Snapshot, measure string, n int) Snapshot {
	if len(snaps) == 0 {
		return Snapshot{Measure: measure}
	}
	out := Snapshot{Window: snaps[0].Window, Source: SourceCollector, Measure: measure}
	for _, s := range snaps {
		if s.Time.After(out.Time) {
			out.Time = s.Time
		}
		if s.Policy.Version >= out.Policy.Version {
			out.Policy = s.Policy
		}
		out.TenantsSeen = max(out.TenantsSeen, s.TenantsSeen)
	}
	out.Tenants, out.TenantsSeen = mergeTenants(snaps, measure, n, out.TenantsSeen)
	out.HotKeys = mergeKeys(snaps)
	out.Statements, out.Blocked = mergeStatements(snaps)
	out.Services = mergeServices(snaps)
	out.Enforcement = mergeEnforcement(snaps)
	out.Collector = mergeStatus(snaps)
	out.PoolWait = mergePoolWait(snaps)
	out.Budgets = mergeBudgets(snaps)
	out.AppliedBy = mergeAppliedBy(snaps)
	out.Unapplied = mergeUnapplied(snaps)
	out.Autopilot = mergeAutopilot(snaps)
	mergeDatabase(&out, snaps)
	return out
}

func measureValue(r TenantRow, m string) float64 {
	switch m {
	case MeasureDB:
		return r.DBLoad
	case MeasureReq:
		return r.ReqPerSec
	case MeasureErr:
		return r.ErrPerSec
	case MeasureP95:
		return r.P95Seconds
	}
	return r.RUPerSec
}

func addSeries(dst, src []float64) []float64 {
	if len(dst) < len(src) {
		dst = append(dst, make([]float64, len(src)-len(dst))...)
	}
	// Series end at their snapshot's time: align them on the last point.
	off := len(dst) - len(src)
	for i, v := range src {
		dst[off+i] += v
	}
	return dst
}

// earliest is the earlier of two times a source says something began,
// zero meaning it does not say.
func earliest(a, b time.Time) time.Time {
	if !b.IsZero() && (a.IsZero() || b.Before(a)) {
		return b
	}
	return a
}

func addTenant(a *TenantRow, b TenantRow) {
	a.DBLoad += b.DBLoad
	a.RUPerSec += b.RUPerSec
	a.ReqPerSec += b.ReqPerSec
	a.ErrPerSec += b.ErrPerSec
	a.P95Seconds = max(a.P95Seconds, b.P95Seconds)
	// Each collector of a fleet keeps baselines of the fleet's view; the
	// highest is the one the merged p95 (also the highest) compares with.
	a.BaselineP95Seconds = max(a.BaselineP95Seconds, b.BaselineP95Seconds)
	a.BaselineShare = max(a.BaselineShare, b.BaselineShare)
	a.BaselineRUPerSec = max(a.BaselineRUPerSec, b.BaselineRUPerSec)
	a.BaselineDBLoad = max(a.BaselineDBLoad, b.BaselineDBLoad)
	a.FlaggedSince, a.SlowSince = earliest(a.FlaggedSince, b.FlaggedSince), earliest(a.SlowSince, b.SlowSince)
	a.Throttled = a.Throttled || b.Throttled
	if a.Tier == "" {
		a.Tier = b.Tier
	}
	for k, v := range b.Waits {
		if a.Waits == nil {
			a.Waits = map[string]float64{}
		}
		a.Waits[k] += v
	}
	a.History = addSeries(a.History, b.History)
	for _, r := range b.Routes {
		i := slices.IndexFunc(a.Routes, func(x RouteRow) bool { return x.Route == r.Route })
		if i < 0 {
			a.Routes = append(a.Routes, r)
			continue
		}
		x := &a.Routes[i]
		x.DBLoad += r.DBLoad
		x.RUPerSec += r.RUPerSec
		x.ReqPerSec += r.ReqPerSec
		x.ErrPerSec += r.ErrPerSec
		x.P95Seconds = max(x.P95Seconds, r.P95Seconds)
		x.BaselineP95Seconds = max(x.BaselineP95Seconds, r.BaselineP95Seconds)
	}
}

func mergeTenants(snaps []Snapshot, measure string, n, seen int) ([]TenantRow, int) {
	// The untagged row is keyed apart: it stays untagged, and is never
	// merged with a tenant of any name.
	type key struct {
		tenant   string
		untagged bool
	}
	byName := map[key]*TenantRow{}
	var names []key
	var other TenantRow
	hasOther := false
	for _, s := range snaps {
		for _, r := range s.Tenants {
			if r.Tenant == OtherTenant && !r.Untagged {
				addTenant(&other, r)
				hasOther = true
				continue
			}
			k := key{r.Tenant, r.Untagged}
			a := byName[k]
			if a == nil {
				a = &TenantRow{Tenant: r.Tenant, Untagged: r.Untagged}
				byName[k] = a
				names = append(names, k)
			}
			addTenant(a, r)
		}
	}
	rows := make([]TenantRow, 0, len(names))
	for _, k := range names {
		rows = append(rows, *byName[k])
	}
	slices.SortFunc(rows, func(a, b TenantRow) int {
		if c := cmp.Compare(measureValue(b, measure), measureValue(a, measure)); c != 0 {
			return c
		}
		return cmp.Compare(a.Tenant, b.Tenant)
	})
	seen = max(seen, len(rows))
	if n > 0 && len(rows) > n {
		for _, r := range rows[n:] {
			addTenant(&other, r)
		}
		rows, hasOther = rows[:n], true
	}
	if hasOther {
		other.Tenant, other.Routes, other.Throttled, other.Tier = OtherTenant, nil, false, ""
		rows = append(rows, other)
	}
	total := 0.0
	for _, r := range rows {
		total += measureValue(r, measure)
	}
	for i := range rows {
		rows[i].Share = 0
		if total > 0 && measure != MeasureP95 {
			rows[i].Share = measureValue(rows[i], measure) / total
		}
		slices.SortFunc(rows[i].Routes, func(a, b RouteRow) int { return cmp.Compare(b.RUPerSec, a.RUPerSec) })
		if len(rows[i].Routes) > 10 {
			rows[i].Routes = rows[i].Routes[:10]
		}
	}
	return rows, seen
}

func mergeKeys(snaps []Snapshot) []HotKeyRow {
	type acc struct {
		row     HotKeyRow
		present []bool
	}
	byKey := map[string]*acc{}
	var keys []string
	floor := make([]uint64, len(snaps)) // the smallest count each list shows
	total := 0.0                        // keyed work, from Count/Share
	for i, s := range snaps {
		for _, k := range s.HotKeys {
			if floor[i] == 0 || k.Count < floor[i] {
				floor[i] = k.Count
			}
			a := byKey[k.Key]
			if a == nil {
				a = &acc{row: HotKeyRow{Key: k.Key, Tenant: k.Tenant}, present: make([]bool, len(snaps))}
				byKey[k.Key] = a
				keys = append(keys, k.Key)
			}
			a.row.Count += k.Count
			a.row.Err += k.Err
			a.present[i] = true
		}
		for _, k := range s.HotKeys {
			if k.Share > 0 {
				total += float64(k.Count) / k.Share
				break
			}
		}
	}
	out := make([]HotKeyRow, 0, len(keys))
	for _, k := range keys {
		a := byKey[k]
		for i, p := range a.present {
			if !p {
				a.row.Count += floor[i]
				a.row.Err += floor[i]
			}
		}
		if total > 0 {
			a.row.Share = float64(a.row.Count) / total
		}
		out = append(out, a.row)
	}
	slices.SortFunc(out, func(a, b HotKeyRow) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	})
	if len(out) > 20 {
		out = out[:20]
	}
	return out
}

// mergeStatements keeps each backend once: collectors sampling the same
// PostgreSQL see the same statements.
func mergeStatements(snaps []Snapshot) ([]StatementRow, []BlockRow) {
	byPID := map[int32]StatementRow{}
	type pair struct{ a, b int32 }
	blocks := map[pair]BlockRow{}
	for _, s := range snaps {
		for _, st := range s.Statements {
			if old, ok := byPID[st.PID]; !ok || st.Duration > old.Duration {
				byPID[st.PID] = st
			}
		}
		for _, b := range s.Blocked {
			blocks[pair{b.Blocked.PID, b.Blocking.PID}] = b
		}
	}
	var stmts []StatementRow
	for _, st := range byPID {
		stmts = append(stmts, st)
	}
	slices.SortFunc(stmts, func(a, b StatementRow) int {
		if c := cmp.Compare(b.Duration, a.Duration); c != 0 {
			return c
		}
		return cmp.Compare(a.PID, b.PID)
	})
	if len(stmts) > 20 {
		stmts = stmts[:20]
	}
	var bl []BlockRow
	for _, b := range blocks {
		bl = append(bl, b)
	}
	slices.SortFunc(bl, func(a, b BlockRow) int {
		if c := cmp.Compare(a.Blocked.PID, b.Blocked.PID); c != 0 {
			return c
		}
		return cmp.Compare(a.Blocking.PID, b.Blocking.PID)
	})
	return stmts, bl
}

func minRatio(a, b float64) float64 {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	}
	return min(a, b)
}

func mergeServices(snaps []Snapshot) []ServiceRow {
	byName := map[string]*ServiceRow{}
	var names []string
	for _, s := range snaps {
		for _, sv := range s.Services {
			a := byName[sv.Service]
			if a == nil {
				c := sv
				c.History = slices.Clone(sv.History)
				byName[sv.Service] = &c
				names = append(names, sv.Service)
				continue
			}
			a.Ratio = minRatio(a.Ratio, sv.Ratio)
			if len(a.History) < len(sv.History) {
				a.History = append(make([]float64, len(sv.History)-len(a.History)), a.History...)
			}
			off := len(a.History) - len(sv.History)
			for i, v := range sv.History {
				a.History[off+i] = minRatio(a.History[off+i], v)
			}
			a.Degraded = a.Degraded || sv.Degraded
			a.ShedLevel = max(a.ShedLevel, sv.ShedLevel)
			a.ReqPerSec += sv.ReqPerSec
			a.P95Seconds = max(a.P95Seconds, sv.P95Seconds)
			a.BaselineP95Seconds = max(a.BaselineP95Seconds, sv.BaselineP95Seconds)
			a.Processes += sv.Processes
		}
	}
	slices.Sort(names)
	out := make([]ServiceRow, 0, len(names))
	for _, n := range names {
		out = append(out, *byName[n])
	}
	return out
}

func mergeEnforcement(snaps []Snapshot) EnforcementRow {
	var e EnforcementRow
	for _, s := range snaps {
		for t, r := range s.Enforcement.Tiers {
			a := &e.Tiers[t]
			if a.Tier == "" {
				a.Tier = r.Tier
			}
			a.PriceMultiplier = max(a.PriceMultiplier, r.PriceMultiplier)
			a.Admitted += r.Admitted
			a.Throttled += r.Throttled
			a.Shed += r.Shed
			a.ShadowThrottled += r.ShadowThrottled
			a.ShadowShed += r.ShadowShed
		}
	}
	return e
}

func mergeStatus(snaps []Snapshot) CollectorStatus {
	c := snaps[0].Collector
	c.StoreHealthy = true
	c.ReportsPerSec, c.Sources, c.Rejected, c.Duplicates, c.SpoolBytes, c.DroppedRows = 0, 0, 0, 0, 0, 0
	for _, s := range snaps {
		x := s.Collector
		c.ReportsPerSec += x.ReportsPerSec
		c.Sources += x.Sources
		c.Rejected += x.Rejected
		c.Duplicates += x.Duplicates
		c.SpoolBytes += x.SpoolBytes
		c.DroppedRows += x.DroppedRows
		c.StoreHealthy = c.StoreHealthy && x.StoreHealthy
		if c.StoreError == "" {
			c.StoreError = x.StoreError
		}
		c.Sampler = c.Sampler || x.Sampler
		if c.SamplerError == "" {
			c.SamplerError = x.SamplerError
		}
	}
	return c
}
