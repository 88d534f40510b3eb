package api

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// collectorSnap builds what one collector shows of its load: its top
// tenants by RU, then "other" with the exact rest; its top keys.
func collectorSnap(load map[string]float64, keys map[string]uint64, top, topKeys int) Snapshot {
	var rows []TenantRow
	for t, v := range load {
		rows = append(rows, TenantRow{Tenant: t, RUPerSec: v, ReqPerSec: 1, P95Seconds: v / 1000, History: []float64{v}})
	}
	slices.SortFunc(rows, func(a, b TenantRow) int { return int(math.Copysign(1, b.RUPerSec-a.RUPerSec)) })
	s := Snapshot{TenantsSeen: len(rows)}
	if len(rows) > top {
		other := TenantRow{Tenant: OtherTenant}
		for _, r := range rows[top:] {
			other.RUPerSec += r.RUPerSec
			other.ReqPerSec += r.ReqPerSec
		}
		rows = append(rows[:top], other)
	}
	s.Tenants = rows
	var total uint64
	for k, c := range keys {
		s.HotKeys = append(s.HotKeys, HotKeyRow{Key: k, Count: c})
		total += c
	}
	slices.SortFunc(s.HotKeys, func(a, b HotKeyRow) int { return int(b.Count) - int(a.Count) })
	if len(s.HotKeys) > topKeys {
		s.HotKeys = s.HotKeys[:topKeys]
	}
	for i := range s.HotKeys {
		s.HotKeys[i].Share = float64(s.HotKeys[i].Count) / float64(total)
	}
	return s
}

// TestMergeFleet: three collectors, each with part of the load of 60
// tenants and 50 keys; the fleet's totals are exact, tenants every
// collector listed are exact, and every key's true count lies in
// [Count−Err, Count].
func TestMergeFleet(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	trueRU := map[string]float64{}
	trueKeys := map[string]uint64{}
	var snaps []Snapshot
	for range 3 {
		load, keys := map[string]float64{}, map[string]uint64{}
		for i := range 60 {
			if rng.IntN(4) == 0 {
				continue
			}
			t := fmt.Sprintf("t%02d", i)
			v := float64(rng.IntN(1000)) / float64(i+1)
			load[t] = v
			trueRU[t] += v
		}
		for i := range 50 {
			k := fmt.Sprintf("k%02d", i)
			c := uint64(rng.IntN(500) / (i + 1))
			if c == 0 {
				continue
			}
			keys[k] = c
			trueKeys[k] += c
		}
		snaps = append(snaps, collectorSnap(load, keys, 20, 20))
	}
	got := Merge(snaps, MeasureRU, 10)
	if len(got.Tenants) != 11 || got.Tenants[10].Tenant != OtherTenant {
		t.Fatalf("%d rows, last %q; want 10 tenants and other", len(got.Tenants), got.Tenants[len(got.Tenants)-1].Tenant)
	}
	var sum, want, shares float64
	for _, r := range got.Tenants {
		sum += r.RUPerSec
		shares += r.Share
	}
	for _, v := range trueRU {
		want += v
	}
	if math.Abs(sum-want) > 1e-6*want || math.Abs(shares-1) > 1e-9 {
		t.Fatalf("fleet RU %v, want %v; shares sum to %v", sum, want, shares)
	}
	listedEverywhere := func(name string) bool {
		for _, s := range snaps {
			if !slices.ContainsFunc(s.Tenants, func(r TenantRow) bool { return r.Tenant == name }) {
				return false
			}
		}
		return true
	}
	for _, r := range got.Tenants[:10] {
		if listedEverywhere(r.Tenant) && math.Abs(r.RUPerSec-trueRU[r.Tenant]) > 1e-9 {
			t.Errorf("%s: %v, want %v", r.Tenant, r.RUPerSec, trueRU[r.Tenant])
		}
		if r.History[0] != r.RUPerSec {
			t.Errorf("%s: history %v not summed like the rate %v", r.Tenant, r.History, r.RUPerSec)
		}
	}
	for i := 1; i < 10; i++ {
		if got.Tenants[i].RUPerSec > got.Tenants[i-1].RUPerSec {
			t.Fatal("tenants not ordered by the measure")
		}
	}
	if len(got.HotKeys) == 0 {
		t.Fatal("no hot keys")
	}
	for _, k := range got.HotKeys {
		tc := trueKeys[k.Key]
		if tc > k.Count || k.Count-k.Err > tc {
			t.Errorf("key %s: true count %d outside [%d, %d]", k.Key, tc, k.Count-k.Err, k.Count)
		}
	}
}

func TestMergeServicesAndStatus(t *testing.T) {
	a := Snapshot{Services: []ServiceRow{{Service: "api", Ratio: 0.9, History: []float64{1, 0.9}, ReqPerSec: 10, Processes: 2}},
		Collector: CollectorStatus{Sources: 2, ReportsPerSec: 2, StoreHealthy: true}}
	b := Snapshot{Services: []ServiceRow{{Service: "api", Ratio: 0.4, History: []float64{0, 0.4}, ReqPerSec: 5, Processes: 1, Degraded: true}},
		Collector: CollectorStatus{Sources: 1, ReportsPerSec: 1, StoreHealthy: false, StoreError: "down"}}
	got := Merge([]Snapshot{a, b}, MeasureRU, 10)
	sv := got.Services[0]
	if sv.Ratio != 0.4 || !sv.Degraded || sv.ReqPerSec != 15 || sv.Processes != 3 || !slices.Equal(sv.History, []float64{1, 0.4}) {
		t.Fatalf("service %+v", sv)
	}
	if c := got.Collector; c.Sources != 3 || c.ReportsPerSec != 3 || c.StoreHealthy || c.StoreError != "down" {
		t.Fatalf("status %+v", c)
	}
	if a.Services[0].Ratio != 0.9 || a.Services[0].History[1] != 0.9 {
		t.Fatal("Merge changed its input")
	}
}

// TestMergeParts: pool waits, budget counters and the processes that
// apply the policy add up across collectors; the database's facts are the
// newest sampler's, not a sum; the autopilot's status is the acting
// collector's.
func TestMergeParts(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	a := Snapshot{Time: t0,
		PoolWait:  []PoolWaitRow{{Tenant: "acme", WaitPerSec: 0.5, AcquirePerSec: 10, MaxSeconds: 0.2}, {Tenant: "globex", WaitPerSec: 0.25, AcquirePerSec: 3, MaxSeconds: 0.05}},
		Budgets:   []BudgetRow{{ID: "b1", Mode: "enforce", Enforce: true, Admitted: 10, Refused: 2}, {ID: "r1", Runaway: true, Mode: "cancel", Cancelled: 1}},
		AppliedBy: &AppliedBy{OTLPServices: 1, Agents: 2},
		Autopilot: &AutopilotStatus{Rules: 1, Note: "another collector holds the autopilot lock"},
		Server:    &ServerRow{}, TopSQL: []TopSQLRow{{Query: "old"}}, GroupBy: GroupTenant,
	}
	b := Snapshot{Time: t0.Add(time.Second),
		PoolWait:  []PoolWaitRow{{Tenant: "globex", WaitPerSec: 0.5, AcquirePerSec: 1, MaxSeconds: 0.3}},
		Budgets:   []BudgetRow{{ID: "b1", Mode: "enforce", Enforce: true, Admitted: 5, Refused: 1, InTx: 1}},
		AppliedBy: &AppliedBy{Gates: 1, RateLimitService: true},
		Autopilot: &AutopilotStatus{Rules: 1, Acting: true, Recent: []string{"throttled bigcorp"}},
		Server:    &ServerRow{}, TopSQL: []TopSQLRow{{Query: "new"}}, XminHolders: []StatementRow{{PID: 7}},
	}
	m := Merge([]Snapshot{a, b}, MeasureRU, 10)
	wantWait := []PoolWaitRow{{Tenant: "globex", WaitPerSec: 0.75, AcquirePerSec: 4, MaxSeconds: 0.3}, {Tenant: "acme", WaitPerSec: 0.5, AcquirePerSec: 10, MaxSeconds: 0.2}}
	if !slices.Equal(m.PoolWait, wantWait) {
		t.Errorf("pool wait %+v, want %+v", m.PoolWait, wantWait)
	}
	wantBudgets := []BudgetRow{{ID: "b1", Mode: "enforce", Enforce: true, Admitted: 15, Refused: 3, InTx: 1}, {ID: "r1", Runaway: true, Mode: "cancel", Cancelled: 1}}
	if !slices.Equal(m.Budgets, wantBudgets) {
		t.Errorf("budgets %+v, want %+v", m.Budgets, wantBudgets)
	}
	if m.AppliedBy == nil || *m.AppliedBy != (AppliedBy{OTLPServices: 1, Agents: 2, Gates: 1, RateLimitService: true}) {
		t.Errorf("applied by %+v", m.AppliedBy)
	}
	if m.Autopilot == nil || !m.Autopilot.Acting {
		t.Errorf("autopilot %+v, want the acting collector's", m.Autopilot)
	}
	if m.Server != b.Server || len(m.TopSQL) != 1 || m.TopSQL[0].Query != "new" || len(m.XminHolders) != 1 || m.GroupBy != GroupTenant {
		t.Errorf("database facts: server %p (want %p), top SQL %+v, xmin %+v, group %q", m.Server, b.Server, m.TopSQL, m.XminHolders, m.GroupBy)
	}
	if m := Merge([]Snapshot{{}, {}}, MeasureRU, 10); m.AppliedBy != nil || m.Autopilot != nil || m.Budgets != nil || m.PoolWait != nil {
		t.Errorf("nothing to merge: %+v", m)
	}
}

// TestMergeSourceTimes: a tenant two collectors list is flagged, and
// slow, since the earlier of the times they serve (a zero says nothing):
// the merged p95 is the higher one, so a tenant one of them sees slow is
// slow in the sum, and a qtop reading several collectors once names a
// small victim whose slowness one of them has seen outlast the window.
func TestMergeSourceTimes(t *testing.T) {
	at := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	row := func(flagged, slow time.Duration) TenantRow {
		r := TenantRow{Tenant: "acme", RUPerSec: 1}
		if flagged > 0 {
			r.FlaggedSince = at.Add(flagged)
		}
		if slow > 0 {
			r.SlowSince = at.Add(slow)
		}
		return r
	}
	for _, tc := range []struct {
		a, b          TenantRow
		flagged, slow time.Time
	}{
		{row(0, 0), row(20*time.Second, 30*time.Second), at.Add(20 * time.Second), at.Add(30 * time.Second)},
		{row(20*time.Second, 30*time.Second), row(0, 0), at.Add(20 * time.Second), at.Add(30 * time.Second)},
		{row(20*time.Second, 10*time.Second), row(10*time.Second, 30*time.Second), at.Add(10 * time.Second), at.Add(10 * time.Second)},
		{row(0, 0), row(0, 0), time.Time{}, time.Time{}},
	} {
		got := Merge([]Snapshot{{Tenants: []TenantRow{tc.a}}, {Tenants: []TenantRow{tc.b}}}, MeasureRU, 10).Tenants[0]
		if !got.FlaggedSince.Equal(tc.flagged) || !got.SlowSince.Equal(tc.slow) {
			t.Errorf("%v and %v: flagged since %v, slow since %v; want %v and %v", tc.a, tc.b, got.FlaggedSince, got.SlowSince, tc.flagged, tc.slow)
		}
	}
}

// TestMergeKeepsTheUntaggedRow: the untagged rows of two collectors are
// one untagged row of the fleet, with its flag (a qtop judges it as the
// untagged load: no victim test, its own label), never merged with a row
// of a tenant that carries the same text.
func TestMergeKeepsTheUntaggedRow(t *testing.T) {
	flagged := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	a := Snapshot{Tenants: []TenantRow{{Tenant: "(untagged)", Untagged: true, DBLoad: 3, FlaggedSince: flagged}, {Tenant: "acme", DBLoad: 1}}}
	b := Snapshot{Tenants: []TenantRow{{Tenant: "(untagged)", Untagged: true, DBLoad: 1}, {Tenant: "(untagged)", DBLoad: 0.5}}}
	got := Merge([]Snapshot{a, b}, MeasureDB, 10).Tenants
	if len(got) != 3 || !got[0].Untagged || got[0].DBLoad != 4 || !got[0].FlaggedSince.Equal(flagged) || got[2].Untagged || got[2].DBLoad != 0.5 {
		t.Fatalf("merged rows %+v; want the untagged row (DB load 4, flagged), acme, and the tenant row apart", got)
	}
}
