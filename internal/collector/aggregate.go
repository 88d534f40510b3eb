package collector

import (
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/spacesaving"
	"github.com/qtop-dev/qtop/tenant"
	"github.com/qtop-dev/qtop/topn"
)

// numShards is the number of aggregator shards: enough that reports
// merging on every core rarely wait for one another.
const numShards = 16

// aggregator is the per-tenant part of the collector's state — each open
// minute's rollup rows and each tenant's live windows — split into shards
// by a hash of the tenant, each under a lock of its own. A report's rows
// are put in shard order before any lock is taken (decoded.prepare), then
// each shard that has rows of the report is locked once, so reports of
// different processes merge on every core at once and no lock is held
// across the whole report.
//
// Everything that is one per report or per process (admission, the
// duplicate filter, the write-ahead log, services, hot keys) is the
// Server's, under Server.mu, or a feature's, under its own lock
// (feature.go); the aggregator never takes those locks, and a caller
// holding any of them may take a shard's. A shard's lock is taken last:
// nothing is locked while it is held.
type aggregator struct {
	seed       maphash.Seed
	shards     [numShards]shard
	tenants    atomic.Int64 // live tenants tracked, across shards
	maxTenants int64
	maxRows    int64
	met        *metrics
	guard      *guardMetrics
	// dbt scales the live DB time of statement shapes as their last
	// written minute was (dbtime.go); nil: the clients' time.
	dbt *dbTimes
}

type shard struct {
	mu      sync.Mutex
	minutes map[int64]map[rowKey]*rowAgg // rollup rows by minute (Unix seconds)
	tenants map[string]*tenantLive
	// lat is the latency of every live row of the shard's tenants, by
	// second (only its lat is used): the live view's "other" is this,
	// over all shards, less the tenants shown, so that making it costs
	// the same at 100,000 tenants as at 100 (aggregator.latency).
	lat window10
	// names holds the service and route names the rows' keys share, so
	// a new row allocates neither.
	names map[string]string
	// cands are the tenants beyond MaxTenants folded into "other" since
	// candFrom (a Unix second), by RU: the heaviest take the places of
	// the lightest live tenants (aggregator.promote). nil until one is
	// folded.
	cands    *spacesaving.Sketch
	candFrom int64
	// overflowRows: rows counted under "other" since the last prune.
	overflowRows int64
	_            [64]byte // keep shards' locks on their own cache lines
}

func newAggregator(cfg Config, met *metrics, guard *guardMetrics) *aggregator {
	g := &aggregator{seed: maphash.MakeSeed(), maxTenants: int64(cfg.MaxTenants), maxRows: int64(cfg.MaxMinuteRows),
		met: met, guard: guard}
	for i := range g.shards {
		g.shards[i].minutes = make(map[int64]map[rowKey]*rowAgg)
		g.shards[i].tenants = make(map[string]*tenantLive)
	}
	return g
}

func (g *aggregator) shardOf(tenant string) int {
	return int(maphash.String(g.seed, tenant) % numShards)
}

// shardOrder is the order in which a report's rows are merged: row
// indexes grouped by shard, shard i's in idx[start[i]:start[i+1]].
type shardOrder struct {
	idx   []int32
	start [numShards + 1]int32
	of    []uint8
}

// sort fills o for rows (a counting sort: two passes, no allocation once
// the slices have grown).
func (o *shardOrder) sort(g *aggregator, rows []report.Row) {
	n := len(rows)
	if cap(o.of) < n {
		o.of = make([]uint8, n, max(n, 2*cap(o.of)))
		o.idx = make([]int32, n, cap(o.of))
	}
	o.of, o.idx = o.of[:n], o.idx[:n]
	var count [numShards + 1]int32
	for i := range rows {
		sh := uint8(g.shardOf(rows[i].Tenant))
		o.of[i] = sh
		count[sh+1]++
	}
	for i := 1; i <= numShards; i++ {
		count[i] += count[i-1]
	}
	o.start = count
	for i := range rows {
		sh := o.of[i]
		o.idx[count[sh]] = int32(i)
		count[sh]++
	}
}

// merge adds rep's rows (in shard order o) to minute m and, when live,
// to the tenants' live windows at now. Server.mu is not held.
func (g *aggregator) merge(rep *report.Report, o *shardOrder, m *minute, now time.Time, live bool) {
	var merged int
	// Reports start at different shards, so that two merging at once do
	// not queue behind each other shard after shard.
	first := int(rep.Seq % numShards)
	for k := range numShards {
		sh := (first + k) % numShards
		idx := o.idx[o.start[sh]:o.start[sh+1]]
		if len(idx) == 0 {
			continue
		}
		g.shards[sh].merge(g, rep, idx, m, now, live)
		merged += len(idx)
	}
	if live {
		g.met.rows.Add(float64(merged))
	}
}

func (sh *shard) merge(g *aggregator, rep *report.Report, idx []int32, m *minute, now time.Time, live bool) {
	sec := now.Unix()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	rows := sh.minutesRows(m)
	for _, i := range idx {
		row := &rep.Rows[i]
		lat := &row.Latency
		tn, route := row.Tenant, row.Route // checked by screen
		a, folded := g.row(sh, rows, m, rowKey{rep.Source.Service, tn, route, row.Kind})
		if i := row.Tier.Index(); i >= 0 {
			addSat(&a.tiers[i], max(row.Count, 1))
		}
		if sat := addSat(&a.count, row.Count); addSat(&a.errors, row.Errors) || addSat(&a.bytes, row.Bytes) ||
			addSat(&a.rows, row.Rows) || sat {
			g.guard.saturated.Inc()
		}
		a.dur = finiteSum(a.dur, row.Duration.Seconds())
		a.ru = finiteSum(a.ru, row.RU)
		a.lat.Merge(lat)
		if !live {
			continue
		}
		tl, rw := a.tl, a.rw
		if folded || tl == nil || tl.gone || rw.gone {
			tl = sh.tenant(g, tn)
			rw = routeWindow(tl, route)
			if tl.other && tn != report.OtherTenant {
				// Beyond MaxTenants: looked up again on each row, so that
				// it is its own once promoted (promote).
				sh.candidate(tn, row.RU)
			} else if !folded {
				a.tl, a.rw = tl, rw
			}
		}
		if row.Tier != tenant.TierUnset {
			tl.tier = row.Tier
		}
		// The latency goes into the route's window only (and the shard's,
		// for the live view's "other"): the tenant's is the sum of its
		// routes' (tenantLive.latencies), one merge fewer per row.
		db := row.Duration.Seconds() // a statement shape's, as PostgreSQL measures it where known
		if row.Kind == report.KindDB && g.dbt != nil {
			db *= g.dbt.liveScale(route)
		}
		j := rw.slot(sec)
		rw.add(j, row, db)
		tl.w.add(tl.w.slot(sec), row, db)
		if row.Kind != report.KindDB {
			rw.lat[j].Merge(lat)
			sh.lat.lat[sh.lat.slot(sec)].Merge(lat)
		}
		var v topn.Values
		v[topn.RU] = row.RU
		v[topn.Bytes] = float64(row.Bytes)
		if row.Kind == report.KindDB {
			v[topn.DBTime] = db
		} else {
			v[topn.Requests] = float64(row.Count)
			v[topn.Errors] = float64(row.Errors)
		}
		tl.ranked.Add(v)
		tl.ranks = true
		tl.hru.add(sec, row.RU)
		tl.touch(sec)
		if row.Kind == report.KindDB {
			tl.dbHistory().add(sec, db)
		}
	}
}

// minutesRows returns the shard's rows of minute m, made if new: as
// large as the largest open minute's (the one before it, still in its
// grace), so that at 100,000 tenants it is not grown and rehashed step
// by step while reports wait on the shard's lock. The shard's lock is
// held.
func (sh *shard) minutesRows(m *minute) map[rowKey]*rowAgg {
	rows := sh.minutes[m.start.Unix()]
	if rows == nil {
		hint := 0
		for _, r := range sh.minutes {
			hint = max(hint, len(r))
		}
		rows = make(map[rowKey]*rowAgg, hint)
		sh.minutes[m.start.Unix()] = rows
	}
	return rows
}

// maxNames bounds a shard's shared service and route names.
const maxNames = 4096

// name returns s as held in the shard's names, cloned (and added while
// there is room) if new. The shard's lock is held.
func (sh *shard) name(s string) string {
	if n, ok := sh.names[s]; ok {
		return n
	}
	n := strings.Clone(s)
	if len(sh.names) < maxNames {
		if sh.names == nil {
			sh.names = make(map[string]string)
		}
		sh.names[n] = n
	}
	return n
}

// row returns the rollup row of k in rows (a shard's part of minute m),
// made if new; once m has Config.MaxMinuteRows rows, a new tenant×route
// is folded into the "other" row of its service and kind (folded). That
// row may be in several shards: the minute's emission adds them up
// (build). The shard's lock is held.
func (g *aggregator) row(sh *shard, rows map[rowKey]*rowAgg, m *minute, k rowKey) (a *rowAgg, folded bool) {
	if a := rows[k]; a != nil {
		return a, false
	}
	if m.nrows.Add(1) > g.maxRows {
		m.nrows.Add(-1)
		g.met.foldedRows.Inc()
		k.tenant, k.route = report.OtherTenant, report.OtherRoute
		folded = true
		if a := rows[k]; a != nil {
			return a, true
		}
	}
	k.service, k.tenant, k.route = sh.name(k.service), strings.Clone(k.tenant), sh.name(k.route)
	a = &rowAgg{}
	rows[k] = a
	return a, folded
}

// tenant returns the live state of tenant name, or of "other" once
// Config.MaxTenants tenants are tracked (an "other" may then be in each
// shard; the snapshot adds them up). The shard's lock is held.
func (sh *shard) tenant(g *aggregator, name string) *tenantLive {
	if tl := sh.tenants[name]; tl != nil {
		return tl
	}
	// Read first: at 100,000 tenants most rows find the view full, and
	// would all write the shared count twice.
	full := g.tenants.Load() >= g.maxTenants
	if !full && g.tenants.Add(1) > g.maxTenants {
		g.tenants.Add(-1)
		full = true
	}
	if full {
		sh.overflowRows++ // counted once a second (prune): a row's atomic add would be shared by all cores
		name = report.OtherTenant
		if tl := sh.tenants[name]; tl != nil {
			return tl
		}
		g.tenants.Add(1) // "other" is tracked like a tenant
	}
	tl := &tenantLive{routes: make(map[string]*window10), other: name == report.OtherTenant}
	sh.tenants[strings.Clone(name)] = tl
	return tl
}

// withTenant calls fn with the live state of tenant name (made if new)
// under its shard's lock.
func (g *aggregator) withTenant(name string, fn func(*tenantLive)) {
	sh := &g.shards[g.shardOf(name)]
	sh.mu.Lock()
	fn(sh.tenant(g, name))
	sh.mu.Unlock()
}

// eachTenant calls fn with every live tenant and the index of its
// shard, shard by shard, under each shard's lock.
func (g *aggregator) eachTenant(fn func(shard int, name string, tl *tenantLive)) {
	for i := range g.shards {
		sh := &g.shards[i]
		sh.mu.Lock()
		for name, tl := range sh.tenants {
			fn(i, name, tl)
		}
		sh.mu.Unlock()
	}
}

// tenantShard calls fn with the live state of tenant name, if tracked,
// under its shard's lock.
func (g *aggregator) tenantShard(name string, fn func(*tenantLive)) {
	sh := &g.shards[g.shardOf(name)]
	sh.mu.Lock()
	if tl := sh.tenants[name]; tl != nil {
		fn(tl)
	}
	sh.mu.Unlock()
}

// lock and unlock take and release shard i's lock (the snapshot reads a
// tenant's details under the lock of the shard eachTenant found it in:
// an "other" of the tenants beyond Config.MaxTenants may be in any).
func (g *aggregator) lock(i int)   { g.shards[i].mu.Lock() }
func (g *aggregator) unlock(i int) { g.shards[i].mu.Unlock() }

// withRow calls fn with the rollup row of k in minute m (made if new,
// or the "other" it is folded into), under its tenant's shard's lock
// (the PostgreSQL sampler's rows).
func (g *aggregator) withRow(m *minute, k rowKey, fn func(a *rowAgg)) {
	sh := &g.shards[g.shardOf(k.tenant)]
	sh.mu.Lock()
	a, _ := g.row(sh, sh.minutesRows(m), m, k)
	fn(a)
	sh.mu.Unlock()
}

// rows calls fn with every rollup row of minute m, adding up the "other"
// rows several shards may hold for one key.
func (g *aggregator) rows(m *minute, fn func(k rowKey, a *rowAgg)) {
	var other map[rowKey]*rowAgg
	for i := range g.shards {
		sh := &g.shards[i]
		sh.mu.Lock()
		for k, a := range sh.minutes[m.start.Unix()] {
			if k.tenant != report.OtherTenant || k.route != report.OtherRoute {
				fn(k, a)
				continue
			}
			if other == nil {
				other = make(map[rowKey]*rowAgg)
			}
			o := other[k]
			if o == nil {
				o = new(rowAgg)
				other[k] = o
			}
			o.add(a)
		}
		sh.mu.Unlock()
	}
	for k, a := range other {
		fn(k, a)
	}
}

// dropMinute forgets minute m's rows in every shard.
func (g *aggregator) dropMinute(m *minute) {
	for i := range g.shards {
		sh := &g.shards[i]
		sh.mu.Lock()
		delete(sh.minutes, m.start.Unix())
		sh.mu.Unlock()
	}
}

// dropAllMinutes forgets every minute's rows (what a killed collector
// loses; tests).
func (g *aggregator) dropAllMinutes() {
	for i := range g.shards {
		sh := &g.shards[i]
		sh.mu.Lock()
		clear(sh.minutes)
		sh.mu.Unlock()
	}
}

// minuteRows is the number of rollup rows of minute m across shards.
func (g *aggregator) minuteRows(m *minute) int {
	n := 0
	for i := range g.shards {
		sh := &g.shards[i]
		sh.mu.Lock()
		n += len(sh.minutes[m.start.Unix()])
		sh.mu.Unlock()
	}
	return n
}

// flushRanking hands what each tenant did since the last call to the
// metrics' ranking and per-tenant series (Server.Tick, once a second).
func (g *aggregator) flushRanking(now time.Time) {
	for i := range g.shards {
		sh := &g.shards[i]
		sh.mu.Lock()
		for name, tl := range sh.tenants {
			if tl.ranks {
				g.met.ranking.Add(name, tl.ranked)
				g.met.tenants.add(name, tl.ranked, now)
				tl.ranked, tl.ranks = topn.Values{}, false
			}
		}
		sh.mu.Unlock()
	}
}

// prune forgets live tenants and routes idle for longer than any view
// shows.
func (g *aggregator) prune(sec int64) {
	// Only a full view folds tenants: else the lightest are not looked for.
	c := candidates{full: g.tenants.Load() >= g.maxTenants}
	defer g.promote(&c)
	for i := range g.shards {
		sh := &g.shards[i]
		sh.mu.Lock()
		for name, tl := range sh.tenants {
			if sec-tl.seen > histN+rateN {
				sh.forget(g, name, tl)
				continue
			}
			for r, w := range tl.routes {
				if sec-maxStamp(&w.counts10) > rateN+1 {
					delete(tl.routes, r)
					w.gone = true
				}
			}
		}
		sh.collect(i, sec, &c)
		overflow := sh.overflowRows
		sh.overflowRows = 0
		sh.mu.Unlock()
		g.met.tenantOverflow.Add(float64(overflow))
	}
}

// forget drops live tenant name (tl) from the shard: rows holding it look
// it up again. The shard's lock is held.
func (sh *shard) forget(g *aggregator, name string, tl *tenantLive) {
	delete(sh.tenants, name)
	tl.gone = true
	for _, w := range tl.routes {
		w.gone = true
	}
	g.tenants.Add(-1)
}

// add adds b's sums to a.
func (a *rowAgg) add(b *rowAgg) {
	for i := range a.tiers {
		addSat(&a.tiers[i], b.tiers[i])
	}
	addSat(&a.count, b.count)
	addSat(&a.errors, b.errors)
	addSat(&a.bytes, b.bytes)
	addSat(&a.rows, b.rows)
	a.dur = finiteSum(a.dur, b.dur)
	a.ru = finiteSum(a.ru, b.ru)
	a.active = finiteSum(a.active, b.active)
	a.lat.Merge(&b.lat)
}

// latencies appends the latency histograms of the tenant's rateN complete
// seconds before sec: its routes' (every row of the tenant is in one
// route's window, "other" routes included). The shard's lock is held.
func (tl *tenantLive) latencies(sec int64, dst []*sparse) []*sparse {
	for _, w := range tl.routes {
		for j := range ringN {
			if w.inWindow(j, sec) && w.lat[j].Len() > 0 {
				dst = append(dst, &w.lat[j])
			}
		}
	}
	return dst
}

// p95 is the tenant's p95 latency over the window before sec; lats is
// scratch space. The shard's lock is held.
func (tl *tenantLive) p95(sec int64, lats []*sparse) (float64, []*sparse) {
	lats = tl.latencies(sec, lats[:0])
	if len(lats) == 0 {
		return 0, lats
	}
	return quantileOf(0.95, lats...), lats
}

func routeWindow(tl *tenantLive, route string) *window10 {
	if w := tl.routes[route]; w != nil {
		return w
	}
	if len(tl.routes) >= maxRoutesLive {
		route = report.OtherRoute
		if w := tl.routes[route]; w != nil {
			return w
		}
	}
	w := new(window10)
	tl.routes[strings.Clone(route)] = w
	return w
}
