package tui

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/pgactivity"
	"github.com/qtop-dev/qtop/tenant"
)

// groupKey is one group of one grouping.
type groupKey struct {
	by  int // index in api.Groups
	key string
}

// groupKeys read a session's key under each grouping of api.Groups. A
// value named like the overflow row ("other") is its stand-in
// (tenant.EscapeValue), as a tenant's is where the sampler reads it, so
// that it is a row of its own.
var groupKeys = [numGroups]func(tags *pgactivity.Backend) string{
	func(b *pgactivity.Backend) string { return b.Tenant },
	func(b *pgactivity.Backend) string { return tenant.EscapeValue(b.Application) },
	func(b *pgactivity.Backend) string { return tenant.EscapeValue(b.User) },
	func(b *pgactivity.Backend) string { return tenant.EscapeValue(b.Database) },
	func(b *pgactivity.Backend) string { return tenant.EscapeValue(b.Client) },
	func(b *pgactivity.Backend) string { return tenant.EscapeValue(pgactivity.Fingerprint(b.Query)) },
}

// pgRecent turns pg_stat_activity samples into live snapshots, under every
// grouping at once (so that switching loses no history). The load is
// pgactivity's: one Aggregator per grouping, cut after each sample, and
// the last pgWindowLen cuts merged (pgactivity.MergeTenants); pgRecent
// adds each group's history and the latest sample's statements, blocking
// pairs and xmin holders. It is pure (no I/O) so that it can be tested on
// built samples.
type pgRecent struct {
	n        int64 // samples added
	interval time.Duration
	aggs     [numGroups]*pgactivity.Aggregator
	ring     [pgWindowLen][numGroups]pgactivity.Window // by sample number mod pgWindowLen
	groups   map[groupKey]*pgGroup
	latest   pgLatest
}

// pgGroup is one group's history.
type pgGroup struct {
	hist [api.HistoryLen]float64 // by sample number mod HistoryLen
	last int64                   // the last sample it was active in
	tier tenant.Tier
}

func newPGRecent() *pgRecent {
	w := &pgRecent{groups: map[groupKey]*pgGroup{}}
	for by := range w.aggs {
		w.aggs[by] = pgactivity.NewAggregator(pgactivity.GroupBy(groupKeys[by]))
	}
	return w
}

// sessionKeys returns the keys of a backend under every grouping; tags is
// the backend whose tags and session fields count (a worker's leader).
func sessionKeys(tags *pgactivity.Backend) [numGroups]string {
	var keys [numGroups]string
	for by, key := range groupKeys {
		keys[by] = key(tags)
	}
	return keys
}

// add accounts one sample. A parallel worker adds to the load of its
// leader's group but is not listed as a statement.
func (w *pgRecent) add(s pgactivity.Snapshot, interval time.Duration) {
	w.interval = interval
	slot := &w.ring[w.n%pgWindowLen]
	for by, a := range w.aggs {
		a.Add(s)
		slot[by] = a.Cut(s.Time)
	}
	w.latest.set(s)
	h := w.n % api.HistoryLen
	for by := range slot {
		for _, l := range slot[by].Tenants {
			g := w.groups[groupKey{by, l.Tenant}]
			if g == nil {
				g = &pgGroup{}
				w.groups[groupKey{by, l.Tenant}] = g
			}
			g.last = w.n
			if l.Tier != tenant.TierUnset {
				g.tier = l.Tier
			}
		}
	}
	for gk, g := range w.groups {
		if w.n-g.last >= api.HistoryLen {
			delete(w.groups, gk)
			continue
		}
		g.hist[h] = 0
	}
	for by := range slot {
		for _, l := range slot[by].Tenants {
			w.groups[groupKey{by, l.Tenant}].hist[h] = l.AAS
		}
	}
	w.n++
}

// snapshot returns the load of the window: groups by DB load (the only
// measure PostgreSQL gives), the top q.Top and then "other".
func (w *pgRecent) snapshot(at time.Time, q Query, samplerErr string) api.Snapshot {
	by := max(groupIndex(q.GroupBy), 0)
	samples := min(w.n, pgWindowLen)
	s := w.latest.snapshot(by)
	s.Time, s.Window, s.GroupBy = at.UTC(), time.Duration(samples)*w.interval, api.Groups[by]
	s.Collector = api.CollectorStatus{Sampler: true, SamplerError: samplerErr}
	if samples == 0 {
		return s
	}
	ws := make([]pgactivity.Window, 0, samples)
	for i := range samples {
		ws = append(ws, w.ring[(w.n-1-i+pgWindowLen)%pgWindowLen][by])
	}
	loads := pgactivity.MergeTenants(ws...)
	s.TenantsSeen = len(loads)
	var total float64
	for _, l := range loads {
		total += l.AAS
	}
	top := q.Top
	if top <= 0 {
		top = DefaultTop
	}
	var other *api.TenantRow
	for i, l := range loads {
		r := pgTenantRow(l)
		if total > 0 {
			r.Share = r.DBLoad / total
		}
		if i >= top && !r.Untagged { // the untagged row is always shown
			if other == nil {
				other = &api.TenantRow{Tenant: api.OtherTenant, History: make([]float64, api.HistoryLen)}
			}
			other.DBLoad += r.DBLoad
			other.Share += r.Share
			continue
		}
		w.history(&r, by)
		s.Tenants = append(s.Tenants, r)
	}
	if other != nil {
		s.Tenants = append(s.Tenants, *other)
	}
	return s
}

// history fills the history (and, by tenant, the tier) of row r.
func (w *pgRecent) history(r *api.TenantRow, by int) {
	g := w.groups[groupKey{by, r.Tenant}]
	if g == nil {
		return
	}
	if by == 0 {
		r.Tier = g.tier.String()
	}
	r.History = make([]float64, api.HistoryLen)
	for j := range api.HistoryLen {
		k := w.n - api.HistoryLen + int64(j)
		if k >= 0 {
			r.History[j] = g.hist[k%api.HistoryLen]
		}
	}
}

// pgTenantRow is a group's row: its load, waits and top 10 routes.
func pgTenantRow(l pgactivity.TenantLoad) api.TenantRow {
	r := api.TenantRow{Tenant: l.Tenant, Untagged: l.Tenant == "", DBLoad: l.AAS, Waits: l.Waits}
	for k, v := range l.Routes {
		r.Routes = append(r.Routes, api.RouteRow{Route: k, DBLoad: v})
	}
	slices.SortFunc(r.Routes, func(a, b api.RouteRow) int {
		if c := cmp.Compare(b.DBLoad, a.DBLoad); c != 0 {
			return c
		}
		return strings.Compare(a.Route, b.Route)
	})
	if len(r.Routes) > 10 {
		r.Routes = r.Routes[:10]
	}
	return r
}

// pgLatest is what the latest sample shows as it is: its statements (the
// pgStatementsMax longest, with their keys under every grouping), its
// blocking pairs, the sessions holding the xmin horizon back, and its
// parallel workers.
type pgLatest struct {
	stmts   []api.StatementRow
	keys    [][numGroups]string // of stmts, by grouping
	blocked []api.BlockRow
	xmin    []api.StatementRow
	workers int
}

// set takes sample s.
func (p *pgLatest) set(s pgactivity.Snapshot) {
	byPID := make(map[int32]*pgactivity.Backend, len(s.Backends))
	for i := range s.Backends {
		byPID[s.Backends[i].PID] = &s.Backends[i]
	}
	p.statements(s, byPID)
	p.blocked = p.blocked[:0]
	for i := range s.Backends {
		b := &s.Backends[i]
		for _, pid := range b.BlockedBy {
			blocking := api.StatementRow{PID: pid}
			if o := byPID[pid]; o != nil {
				blocking = o.Row()
			}
			p.blocked = append(p.blocked, api.BlockRow{Blocked: b.Row(), Blocking: blocking})
		}
	}
	p.xmin = p.xmin[:0]
	for i := range s.Backends {
		if b := &s.Backends[i]; b.XminAge >= 0 && b.LeaderPID == 0 && !b.Hidden() {
			p.xmin = append(p.xmin, b.Row())
		}
	}
	slices.SortFunc(p.xmin, func(a, b api.StatementRow) int {
		if c := cmp.Compare(b.XminAge, a.XminAge); c != 0 {
			return c
		}
		return cmp.Compare(a.PID, b.PID)
	})
	p.xmin = p.xmin[:min(len(p.xmin), pgXminMax)]
}

// statements keeps the pgStatementsMax longest running statements of s
// (leaders, each with its count of workers) and their keys.
func (p *pgLatest) statements(s pgactivity.Snapshot, byPID map[int32]*pgactivity.Backend) {
	var stmts []api.StatementRow
	var keys [][numGroups]string
	workers := map[int32]int{}
	p.workers = 0
	for i := range s.Backends {
		b := &s.Backends[i]
		switch {
		case !b.Active():
		case b.LeaderPID != 0:
			p.workers++
			workers[b.LeaderPID]++
		default:
			stmts = append(stmts, b.Row())
			keys = append(keys, sessionKeys(b))
		}
	}
	idx := make([]int, len(stmts))
	for i := range idx {
		idx[i] = i
		stmts[i].Workers = workers[stmts[i].PID]
	}
	slices.SortFunc(idx, func(a, b int) int {
		if c := cmp.Compare(stmts[b].Duration, stmts[a].Duration); c != 0 {
			return c
		}
		return cmp.Compare(stmts[a].PID, stmts[b].PID)
	})
	idx = idx[:min(len(idx), pgStatementsMax)]
	p.stmts, p.keys = make([]api.StatementRow, len(idx)), make([][numGroups]string, len(idx))
	for i, j := range idx {
		p.stmts[i], p.keys[i] = stmts[j], keys[j]
	}
}

// snapshot returns a snapshot of the latest sample's rows, the statements
// grouped by grouping by.
func (p *pgLatest) snapshot(by int) api.Snapshot {
	s := api.Snapshot{
		Source: api.SourcePostgres, Measure: api.MeasureDB, Tenants: []api.TenantRow{}, HotKeys: []api.HotKeyRow{},
		Statements: append([]api.StatementRow{}, p.stmts...), Blocked: append([]api.BlockRow(nil), p.blocked...),
		Services: []api.ServiceRow{}, ParallelWorkers: p.workers,
		XminHolders: append([]api.StatementRow(nil), p.xmin...),
	}
	for i := range s.Statements {
		s.Statements[i].Group = p.keys[i][by]
	}
	for t := range tenant.NumTiers {
		s.Enforcement.Tiers[t] = api.TierRow{Tier: tenant.Tier(t + 1).String(), PriceMultiplier: 1}
	}
	return s
}
