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
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/spacesaving"
	"github.com/qtop-dev/qtop/tenant"
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
	s.mu.Lock()
	if c := s.view.snapCache[key]; c != nil {
		s.mu.Unlock()
		return *c
	}
	s.mu.Unlock()
	dropped := s.droppedRows() // gathers metrics: not under s.mu
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := s.snapshotLocked(now, measure, n)
	snap.Collector.DroppedRows = dropped
	if len(s.view.snapCache) > 64 {
		clear(s.view.snapCache)
	}
	s.view.snapCache[key] = &snap
	return snap
}

func (s *Server) snapshotLocked(now time.Time, measure string, n int) api.Snapshot {
	sec := now.Unix()
	snap := api.Snapshot{
		Time:    time.Unix(sec, 0).UTC(),
		Window:  rateN * time.Second,
		Source:  api.SourceCollector,
		Measure: measure,
	}
	switch {
	case s.cfg.Demo:
		snap.Source = api.SourceDemo
	case s.cfg.Postgres != "" && len(s.in.sources) == 0:
		snap.Source = api.SourcePostgres
	}
	active := s.policy.Active(now)
	snap.Policy = policy.Policy{Version: s.policy.Version, Rules: active, Updated: s.policy.Updated}
	throttled := make(map[string]bool)
	for _, r := range active {
		if r.Tenant != "" && !r.Shadow {
			throttled[r.Tenant] = true
		}
	}

	// Tenants.
	type trow struct {
		name string
		sh   int // the shard it is in
		tl   *tenantLive
		r    rates
	}
	// The rates of every tenant first (shard by shard), then the details
	// of those shown, each under its shard's lock again.
	rows := make([]trow, 0, s.agg.tenants.Load())
	var total float64
	var lats []*sparse
	s.agg.eachTenant(func(sh int, name string, tl *tenantLive) {
		r := tl.w.ratesP95(sec, false)
		if !r.active {
			return
		}
		if measure == api.MeasureP95 {
			r.p95, lats = tl.p95(sec, lats)
		}
		rows = append(rows, trow{name, sh, tl, r})
		total = finiteSum(total, measureOf(r, measure))
	})
	snap.TenantsSeen = len(rows)
	slices.SortFunc(rows, func(a, b trow) int {
		ma, mb := measureOf(a.r, measure), measureOf(b.r, measure)
		if ma != mb {
			if ma > mb {
				return -1
			}
			return 1
		}
		return strings.Compare(a.name, b.name)
	})
	share := func(v float64) float64 {
		if total <= 0 || measure == api.MeasureP95 {
			return 0
		}
		return v / total
	}
	var other api.TenantRow
	var otherLat sparse
	otherHist := make([]float64, histN)
	hasOther := false
	for i, tr := range rows {
		if i >= n || tr.name == report.OtherTenant {
			s.agg.lock(tr.sh)
			hasOther = true
			other.DBLoad = finiteSum(other.DBLoad, tr.r.db)
			other.RUPerSec = finiteSum(other.RUPerSec, tr.r.ru)
			other.ReqPerSec += tr.r.req
			other.ErrPerSec += tr.r.err
			other.Share += share(measureOf(tr.r, measure))
			for _, l := range tr.tl.latencies(sec, lats[:0]) {
				otherLat.Merge(l)
			}
			h := &tr.tl.hru
			if measure == api.MeasureDB {
				h = &tr.tl.hdb
			}
			for k, v := range h.series(sec) {
				otherHist[k] = finiteSum(otherHist[k], v)
			}
			s.agg.unlock(tr.sh)
			continue
		}
		s.agg.lock(tr.sh)
		if measure != api.MeasureP95 {
			tr.r.p95, lats = tr.tl.p95(sec, lats)
		}
		row := api.TenantRow{
			Tenant: tr.name, Untagged: tr.name == report.UnknownTenant, Tier: tr.tl.tier.String(),
			DBLoad: tr.r.db, RUPerSec: tr.r.ru, ReqPerSec: tr.r.req, ErrPerSec: tr.r.err, P95Seconds: tr.r.p95,
			Share: share(measureOf(tr.r, measure)), Throttled: throttled[tr.name],
		}
		if measure == api.MeasureDB {
			row.History = tr.tl.hdb.series(sec)
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
		s.agg.unlock(tr.sh)
		snap.Tenants = append(snap.Tenants, row)
	}
	if hasOther {
		other.Tenant = api.OtherTenant
		if otherLat.Count() > 0 {
			other.P95Seconds = otherLat.Quantile(0.95)
		}
		other.History = otherHist
		snap.Tenants = append(snap.Tenants, other)
	}
	if snap.Tenants == nil {
		snap.Tenants = []api.TenantRow{}
	}

	// Hot keys over the window.
	merged := spacesaving.New(keyCapacity)
	for j := range ringN {
		if ks := s.view.keys[j]; ks != nil && s.view.keyStamp[j] >= sec-rateN && s.view.keyStamp[j] < sec {
			merged.Merge(ks)
		}
	}
	snap.HotKeys = []api.HotKeyRow{}
	for _, c := range merged.Top(hotKeysShown) {
		hk := api.HotKeyRow{Key: s.cleanKey(c.Key), Tenant: s.view.keyTenants[c.Key], Count: c.Count, Err: c.Err}
		if t := merged.Total(); t > 0 {
			hk.Share = float64(c.Count) / float64(t)
		}
		snap.HotKeys = append(snap.HotKeys, hk)
	}

	// Services.
	snap.Services = []api.ServiceRow{}
	for name, sv := range s.view.services {
		r := sv.w.rates(sec)
		v, ok := sv.sig.ValueAt(now)
		if !ok || math.IsNaN(v) || math.IsInf(v, 0) {
			v = 0
		}
		level := 0
		for j := range ringN {
			if sv.shedAt[j] >= sec-rateN {
				level = max(level, sv.shed[j])
			}
		}
		snap.Services = append(snap.Services, api.ServiceRow{
			Service: name, Ratio: v, History: sv.ratio.series(sec),
			Enter: 0.5, Exit: 0.65, Degraded: sv.sig.DegradedAt(now),
			ShedLevel: level, ReqPerSec: r.req, P95Seconds: r.p95, Processes: len(sv.procs),
		})
	}
	slices.SortFunc(snap.Services, func(a, b api.ServiceRow) int { return strings.Compare(a.Service, b.Service) })

	// Enforcement.
	for t := range tenant.NumTiers {
		tr := &snap.Enforcement.Tiers[t]
		tr.Tier = tenant.Tier(t + 1).String()
		tr.PriceMultiplier = 1
		for j := range ringN {
			es := &s.view.enf[j]
			if es.stamp < sec-rateN || es.stamp >= sec {
				continue
			}
			tr.PriceMultiplier = max(tr.PriceMultiplier, es.e.PriceMultiplier[t])
			tr.Admitted += es.e.Admitted[t]
			tr.Throttled += es.e.Throttled[t]
			tr.Shed += es.e.Shed[t]
			tr.ShadowThrottled += es.e.ShadowThrottled[t]
			tr.ShadowShed += es.e.ShadowShed[t]
			tr.Dropped += es.drop.Dropped[t]
			tr.ShadowDropped += es.drop.ShadowDropped[t]
		}
	}
	snap.PoolWait = poolRows(&s.view.enf, sec)

	s.budgetSnapshotLocked(&snap, now, sec) // budgets.go

	// Sampler.
	snap.Statements = append([]api.StatementRow{}, s.pg.statements...)
	snap.Blocked = append([]api.BlockRow(nil), s.pg.blocked...)

	// Collector.
	var reports uint64
	for _, c := range s.view.reportsSec {
		if c.stamp >= sec-rateN && c.stamp < sec {
			reports += c.n
		}
	}
	sources := 0
	for _, src := range s.in.sources {
		if now.Sub(src.last) <= rateN*time.Second {
			sources++
		}
	}
	cs := api.CollectorStatus{
		Uptime:        now.Sub(s.start),
		ReportsPerSec: float64(reports) / rateN,
		Sources:       sources,
		Rejected:      sumCounterVec(s.met.rejected),
		Duplicates:    uint64(counterValue(s.met.duplicates)),
		Store:         redactStore(s.cfg.Store),
		StoreHealthy:  s.store != nil && s.storeErr == "",
		StoreError:    s.storeErr,
		Sampler:       s.cfg.Postgres != "",
		SamplerError:  s.pg.err,
	}
	if s.spool != nil {
		st := s.spool.Stats()
		cs.SpoolBytes, cs.DeadLetters = st.Bytes, st.DeadLetters
		if !st.Oldest.IsZero() {
			cs.SpoolOldestSeconds = time.Since(st.Oldest).Seconds()
		}
	}
	cs.MalformedComments, cs.TruncatedStatements = s.pg.metrics.Counts()
	snap.Collector = cs
	return snap
}

func (s *Server) parseLiveQuery(r *http.Request) (string, int, error) {
	q := r.URL.Query()
	measure := q.Get("by")
	switch measure {
	case "":
		measure = api.MeasureRU
	case api.MeasureRU, api.MeasureDB, api.MeasureReq, api.MeasureErr, api.MeasureP95:
	default:
		return "", 0, fmt.Errorf("by=%q: want ru, db, req, err or p95", measure)
	}
	n := defaultTop
	if v := q.Get("n"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		if err != nil || n < 1 || n > maxTop {
			return "", 0, fmt.Errorf("n=%q: want 1…%d", v, maxTop)
		}
	}
	return measure, n, nil
}

func (s *Server) handleLive(w http.ResponseWriter, r *http.Request) {
	measure, n, err := s.parseLiveQuery(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error(), 0)
		return
	}
	writeJSON(w, http.StatusOK, s.Snapshot(s.cfg.Now(), measure, n))
}

// doneChan is closed when the background work stops (Shutdown); streams
// end with it so that http.Server.Shutdown does not wait for them.
func (s *Server) doneChan() <-chan struct{} {
	s.doneOnce.Do(func() { s.done = make(chan struct{}) })
	return s.done
}
