package collector

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/histogram"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/spacesaving"
)

const (
	defaultTop     = 20
	maxTop         = 1000
	hotKeysShown   = 20
	routesShown    = 10
	statementsShow = 20
)

type snapKey struct {
	sec     int64
	measure string
	n       int
}

// Live returns the live snapshot now, tenants by RU, top 20.
func (s *Server) Live() api.Snapshot {
	return s.Snapshot(s.cfg.Now(), api.MeasureRU, defaultTop)
}

func measureOf(r rates, m string) float64 {
	switch m {
	case api.MeasureDB:
		return r.db
	case api.MeasureReq:
		return r.req
	case api.MeasureErr:
		return r.err
	case api.MeasureP95:
		return r.p95
	}
	return r.ru
}

// Snapshot returns the live view at now with tenants ordered by measure,
// the top n of them, then "other".
func (s *Server) Snapshot(now time.Time, measure string, n int) api.Snapshot {
	sec := now.Unix()
	key := snapKey{sec, measure, n}
	source := api.SourceCollector
	s.mu.Lock()
	if c := s.view.snapCache[key]; c != nil {
		s.mu.Unlock()
		return *c
	}
	switch {
	case s.cfg.Demo:
		source = api.SourceDemo
	case s.cfg.Postgres != "" && len(s.in.sources) == 0:
		source = api.SourcePostgres
	}
	s.mu.Unlock()
	dropped := droppedRows(s.cfg.Gatherer) // gathers metrics: not under s.mu
	snap := api.Snapshot{
		Time:    time.Unix(sec, 0).UTC(),
		Window:  rateN * time.Second,
		Source:  source,
		Measure: measure,
	}
	s.policy.read(func(p *policy.Policy) {
		snap.Policy = policy.Policy{Version: p.Version, Rules: p.Active(now), Updated: p.Updated}
	})
	limited := make(map[string]int64)
	for _, r := range snap.Policy.Rules {
		if r.Tenant != "" && !r.Shadow {
			limited[r.Tenant] = max(limited[r.Tenant], rulesFrom(r, sec))
		}
	}
	// The tenants are the aggregator's: their rows take only its shards'
	// locks, one at a time, so reports go on merging while they are made
	// (under Server.mu every report waited for them: tens of milliseconds
	// at 10,000 tenants, once a second for the autopilot).
	quiet := tenantRows(s.agg, &snap, sec, measure, n, limited)
	snap.Unapplied = unapplied(snap.Policy.Rules, quiet)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snapshotLocked(&snap, now)
	snap.Collector.DroppedRows = dropped
	if len(s.view.snapCache) > 64 {
		clear(s.view.snapCache)
	}
	s.view.snapCache[key] = &snap
	return snap
}

// snapshotLocked fills the rest of the live view at now (its tenants
// are in snap) from every part. s.mu is held; the features' and the
// pg sampler's locks are taken inside.
func (s *Server) snapshotLocked(snap *api.Snapshot, now time.Time) {
	sec := now.Unix()
	applied := s.in.appliedBy(now)
	applied.RateLimitService = s.rls.usedSince(now.Add(-appliedByWindow))
	snap.AppliedBy = &applied
	s.view.snapshot(snap, now, s.guard)
	s.feat.snapshot(snap, now)
	s.pg.snapshot(snap)
	snap.Collector = api.CollectorStatus{
		Uptime:        now.Sub(s.start),
		ReportsPerSec: s.view.reportsPerSec(sec),
		Sources:       s.in.active(now),
		Rejected:      sumCounterVec(s.met.rejected),
		Duplicates:    uint64(counterValue(s.met.duplicates)),
		Store:         redactStore(s.cfg.Store),
		Sampler:       s.cfg.Postgres != "",
	}
	s.em.status(&snap.Collector)
	s.pg.status(&snap.Collector)
}

// trow is a tenant's rates at a second, and where the tenant is.
type trow struct {
	name string
	sh   int // the shard it is in
	tl   *tenantLive
	r    rates
}

// rulesFrom is the second from which a tenant's rates are taken under
// throttle r: the second after the one whose reports the processes sent
// before they held r (they apply it from the reply to their next
// report), while that is less than rateN seconds ago, so that a
// throttle's effect shows in the live view as soon as the processes
// apply it instead of fading in over the rate window; 0 (the whole
// window) otherwise.
//
// Throttles only: a fleet quota is admitted against the fleet's sums, so
// its first seconds (the usage before it, counted as debt) are no
// measure of the rate it holds a tenant to.
func rulesFrom(r policy.Rule, sec int64) int64 {
	if r.Created.IsZero() || r.Action != policy.Throttle {
		return 0
	}
	if from := r.Created.Unix() + 2; from < sec && sec-from < rateN {
		return from
	}
	return 0
}

// rankTenants returns the active tenants at sec ordered by measure, and
// their total, taking each shard's lock once. A tenant of limited with a
// second in it has its rates from that second (rulesFrom).
func rankTenants(agg *aggregator, sec int64, measure string, limited map[string]int64) ([]trow, float64) {
	rows := make([]trow, 0, agg.tenants.Load())
	var total float64
	var lats []*sparse
	agg.eachTenant(func(sh int, name string, tl *tenantLive) {
		r := tl.w.rates(sec)
		if from := limited[name]; from > 0 && r.active {
			r = tl.w.ratesFrom(sec, from)
			r.active = true
		}
		if !r.active {
			return
		}
		if measure == api.MeasureP95 {
			r.p95, lats = tl.p95(sec, lats)
		}
		rows = append(rows, trow{name, sh, tl, r})
		total = finiteSum(total, measureOf(r, measure))
	})
	if u, was := untaggedOverlap(rows); u >= 0 {
		if measure == api.MeasureDB {
			total = finiteSum(total, rows[u].r.db-was)
		}
		if r := rows[u].r; r.db == 0 && r.ru == 0 && r.req == 0 && r.err == 0 {
			rows = slices.Delete(rows, u, u+1) // sessions the tenants' statements account for, and nothing else
		}
	}
	// Ties go to DB load, then the name: a collector that only samples
	// PostgreSQL has no RU, and ranked by RU alone its tenants came in
	// name order, the top n cut there, so the tenant loading the database
	// could land in "other".
	slices.SortFunc(rows, func(a, b trow) int {
		if c := cmpDesc(measureOf(a.r, measure), measureOf(b.r, measure)); c != 0 {
			return c
		}
		if c := cmpDesc(a.r.db, b.r.db); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	return rows, total
}

// cmpDesc orders larger values first.
func cmpDesc(a, b float64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

// untaggedOverlap takes from the untagged row's DB load the sessions
// that tenants' statement rows already count, by the rule the cost
// report follows minute by minute (pgOverlap): an OTLP service whose
// sessions carry no tenant has its statements counted under its tenants
// and seen again by the sampler as untagged sessions. The untagged row
// keeps its own statement rows' time and the sessions beyond what they
// and the tenants' statements beyond their own sessions hold. It returns
// the untagged row's index and its DB load before, or -1 when it changed
// nothing.
func untaggedOverlap(rows []trow) (u int, was float64) {
	u = -1
	var beyond float64 // tenants' statement time their own sessions do not show
	for i := range rows {
		if rows[i].name == report.UnknownTenant {
			u = i
			continue
		}
		beyond += max(0, rows[i].r.stmt-rows[i].r.pg)
	}
	if u < 0 || beyond <= 0 || rows[u].r.pg <= 0 {
		return -1, 0
	}
	r := &rows[u].r
	was = r.db
	r.db = r.stmt + r.pg - min(r.pg, r.stmt+beyond)
	return u, was
}

// tenantRows fills the tenants of a snapshot: the top n by measure, each
// with its details (under its shard's lock again), then "other". The
// rows' History is of DB load when sorted by it, or when PostgreSQL's
// sampler is the only source (api.Snapshot.Source "postgres": the load
// has no RU), else of RU.
func tenantRows(agg *aggregator, snap *api.Snapshot, sec int64, measure string, n int, limited map[string]int64) (quiet map[string]float64) {
	histDB := measure == api.MeasureDB || snap.Source == api.SourcePostgres
	rows, total := rankTenants(agg, sec, measure, limited)
	quiet = dbOnly(rows, limited)
	snap.TenantsSeen = len(rows)
	share := func(v float64) float64 {
		if total <= 0 || measure == api.MeasureP95 {
			return 0
		}
		return v / total
	}
	var other otherTenants
	var lats []*sparse
	shown := rows[:min(n, len(rows))]
	if len(shown) < len(rows) || slices.ContainsFunc(shown, func(tr trow) bool { return tr.name == report.OtherTenant }) {
		other.lat = agg.latency(sec) // the shown tenants' are taken out below
	}
	for i, tr := range rows {
		agg.lock(tr.sh)
		if i >= n || tr.name == report.OtherTenant {
			other.add(tr, sec, histDB, share(measureOf(tr.r, measure)))
		} else {
			var row api.TenantRow
			row, lats = tenantRow(tr, sec, measure, histDB, lats)
			_, row.Throttled = limited[tr.name]
			row.Share = share(measureOf(tr.r, measure))
			snap.Tenants = append(snap.Tenants, row)
			if other.lat != nil {
				lats = tr.tl.latencies(sec, lats[:0])
				for _, l := range lats {
					l.Buckets(other.sub)
				}
			}
		}
		agg.unlock(tr.sh)
	}
	if other.any {
		snap.Tenants = append(snap.Tenants, other.row())
	}
	if snap.Tenants == nil {
		snap.Tenants = []api.TenantRow{}
	}
	return quiet
}

// dbOnly is, of the limited tenants, those with database sessions and no
// request reported, and their DB load.
func dbOnly(rows []trow, limited map[string]int64) map[string]float64 {
	if len(limited) == 0 {
		return nil
	}
	var quiet map[string]float64
	for _, tr := range rows {
		if _, ok := limited[tr.name]; ok && tr.r.req == 0 && tr.r.db > 0 {
			if quiet == nil {
				quiet = map[string]float64{}
			}
			quiet[tr.name] = tr.r.db
		}
	}
	return quiet
}

// unapplied are the tenant rules in force whose tenant's load is all
// database sessions with no request reported (dbOnly): nothing applies
// them to it.
func unapplied(rules []policy.Rule, quiet map[string]float64) []api.Unapplied {
	var out []api.Unapplied
	for _, r := range rules {
		if db, ok := quiet[r.Tenant]; ok && r.Tenant != "" && !r.Shadow {
			out = append(out, api.Unapplied{Rule: r.ID, Tenant: r.Tenant, DBLoad: db})
		}
	}
	return out
}

// tenantRow is a shown tenant's row; its shard's lock is held.
func tenantRow(tr trow, sec int64, measure string, histDB bool, lats []*sparse) (api.TenantRow, []*sparse) {
	if measure != api.MeasureP95 {
		tr.r.p95, lats = tr.tl.p95(sec, lats)
	}
	row := api.TenantRow{
		Tenant: tr.name, Untagged: tr.name == report.UnknownTenant, Tier: tr.tl.tier.String(),
		DBLoad: tr.r.db, RUPerSec: tr.r.ru, ReqPerSec: tr.r.req, ErrPerSec: tr.r.err, P95Seconds: tr.r.p95,
	}
	if histDB {
		row.History = tr.tl.dbSeries(sec)
	} else {
		row.History = tr.tl.hru.series(sec)
	}
	if len(tr.tl.waits) > 0 {
		row.Waits = make(map[string]float64, len(tr.tl.waits))
		for k, v := range tr.tl.waits {
			row.Waits[k] = v
		}
	}
	type rrow struct {
		name string
		r    rates
	}
	var rr []rrow
	for name, w := range tr.tl.routes {
		if r := w.rates(sec); r.active {
			rr = append(rr, rrow{name, r})
		}
	}
	slices.SortFunc(rr, func(a, b rrow) int {
		ma, mb := measureOf(a.r, measure), measureOf(b.r, measure)
		if ma != mb {
			if ma > mb {
				return -1
			}
			return 1
		}
		return strings.Compare(a.name, b.name)
	})
	for _, x := range rr[:min(len(rr), routesShown)] {
		row.Routes = append(row.Routes, api.RouteRow{Route: x.name, DBLoad: x.r.db, RUPerSec: x.r.ru,
			ReqPerSec: x.r.req, ErrPerSec: x.r.err, P95Seconds: x.r.p95})
	}
	return row, lats
}

// otherTenants sums the tenants beyond the top n. Every active tenant
// beyond the top passes through add once a second (the autopilot's
// view), so add costs little and allocates nothing: the history is added
// in place, and the latency is not merged tenant by tenant but is every
// tenant's (aggregator.latency) less the shown tenants' (sub).
type otherTenants struct {
	sum  api.TenantRow
	lat  []uint64 // dense bucket counts (histogram.NumBuckets)
	hist []float64
	any  bool
}

// add sums a tenant into "other"; its shard's lock is held.
func (o *otherTenants) add(tr trow, sec int64, histDB bool, share float64) {
	if o.hist == nil {
		o.hist = make([]float64, histN)
	}
	o.any = true
	o.sum.DBLoad = finiteSum(o.sum.DBLoad, tr.r.db)
	o.sum.RUPerSec = finiteSum(o.sum.RUPerSec, tr.r.ru)
	o.sum.ReqPerSec += tr.r.req
	o.sum.ErrPerSec += tr.r.err
	o.sum.Share += share
	if histDB {
		tr.tl.dbAddTo(o.hist, sec)
	} else {
		tr.tl.hru.addTo(o.hist, sec)
	}
}

// sub takes a shown tenant's bucket out of the latency of all tenants
// (a report merged between the two reads may leave less than it takes).
func (o *otherTenants) sub(i int, c uint64) {
	o.lat[i] -= min(o.lat[i], c)
}

func (o *otherTenants) row() api.TenantRow {
	r := o.sum
	r.Tenant = api.OtherTenant
	var h histogram.Histogram
	if o.lat != nil && h.AddDense(o.lat) == nil && h.Count() > 0 {
		r.P95Seconds = h.Quantile(0.95)
	}
	r.History = o.hist
	return r
}

// snapshot fills the hot keys and the services of a snapshot at now.
func (v *liveView) snapshot(snap *api.Snapshot, now time.Time, guard *guardMetrics) {
	sec := now.Unix()
	merged := spacesaving.New(keyCapacity)
	for j := range ringN {
		if ks := v.keys[j]; ks != nil && v.keyStamp[j] >= sec-rateN && v.keyStamp[j] < sec {
			merged.Merge(ks)
		}
	}
	snap.HotKeys = []api.HotKeyRow{}
	for _, c := range merged.Top(hotKeysShown) {
		hk := api.HotKeyRow{Key: guard.cleanKey(c.Key), Tenant: v.keyTenants[c.Key], Count: c.Count, Err: c.Err}
		if t := merged.Total(); t > 0 {
			hk.Share = float64(c.Count) / float64(t)
		}
		snap.HotKeys = append(snap.HotKeys, hk)
	}
	snap.Services = []api.ServiceRow{}
	for name, sv := range v.services {
		r := sv.w.rates(sec)
		ratio, ok := sv.sig.ValueAt(now)
		if !ok || math.IsNaN(ratio) || math.IsInf(ratio, 0) {
			ratio = 0
		}
		level := 0
		for j := range ringN {
			if sv.shedAt[j] >= sec-rateN {
				level = max(level, sv.shed[j])
			}
		}
		snap.Services = append(snap.Services, api.ServiceRow{
			Service: name, Ratio: ratio, History: sv.ratio.series(sec),
			Enter: 0.5, Exit: 0.65, Degraded: sv.sig.DegradedAt(now),
			ShedLevel: level, ReqPerSec: r.req, P95Seconds: r.p95, Processes: len(sv.procs),
		})
	}
	slices.SortFunc(snap.Services, func(a, b api.ServiceRow) int { return strings.Compare(a.Service, b.Service) })
}

func (s httpAPI) parseLiveQuery(r *http.Request) (string, int, error) {
	q, err := strictQuery(r.URL.RawQuery, liveParamNames)
	if err != nil {
		return "", 0, err
	}
	// scope: the fleet's view (empty) or this collector's own (local);
	// withFleet (fleet.go) routes on it.
	if sc := q.Get("scope"); sc != "" && sc != api.ScopeLocal {
		return "", 0, fmt.Errorf("scope=%q: want %s (this collector's own view) or no scope (the fleet's)", clip(sc), api.ScopeLocal)
	}
	measure := q.Get("by")
	switch measure {
	case "":
		measure = api.MeasureRU
	case api.MeasureRU, api.MeasureDB, api.MeasureReq, api.MeasureErr, api.MeasureP95:
	default:
		return "", 0, fmt.Errorf("by=%q: want ru, db, req, err or p95", clip(measure))
	}
	n := defaultTop
	if v := q.Get("n"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		if err != nil || n < 1 || n > maxTop {
			return "", 0, fmt.Errorf("n=%q: want 1…%d", clip(v), maxTop)
		}
	}
	return measure, n, nil
}

// liveParamNames are the parameters of GET /v1/live and /v1/stream.
var liveParamNames = []string{"by", "n", "scope"}

func (s httpAPI) handleLive(w http.ResponseWriter, r *http.Request) {
	s.serveLive(w, r, func(measure string, n int) any { return s.Snapshot(s.cfg.Now(), measure, n) })
}

// serveLive answers GET /v1/live with the view snap makes for the
// query's measure and top n: this collector's (handleLive) or the
// fleet's (fleet.go).
func (s httpAPI) serveLive(w http.ResponseWriter, r *http.Request, snap func(measure string, n int) any) {
	if !readOnly(w, r) {
		return
	}
	measure, n, err := s.parseLiveQuery(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error(), 0)
		return
	}
	writeJSON(w, http.StatusOK, snap(measure, n))
}

// latency is the latency of every live row over the rateN complete
// seconds before sec, as dense bucket counts, taking each shard's lock
// once.
func (g *aggregator) latency(sec int64) []uint64 {
	d := make([]uint64, histogram.NumBuckets)
	for i := range g.shards {
		sh := &g.shards[i]
		sh.mu.Lock()
		for j := range ringN {
			if sh.lat.inWindow(j, sec) {
				sh.lat.lat[j].Buckets(func(b int, c uint64) { d[b] += c })
			}
		}
		sh.mu.Unlock()
	}
	return d
}
