package collector

import (
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/budget"
	"github.com/qtop-dev/qtop/gcra"
	"github.com/qtop-dev/qtop/ratio"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/spacesaving"
	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/tenant"
	"github.com/qtop-dev/qtop/topn"
)

// Capacities of the merged key sketches and of the key → tenant maps.
const (
	keyCapacity      = 1000
	maxKeyTenants    = 10_000
	hotKeysPerMinute = 100
	maxServices      = 256
	maxStmtsMinute   = 200
	slowStatement    = time.Second
)

type rowKey struct {
	service, tenant, route string
	kind                   report.Kind
}

type rowAgg struct {
	// tiers counts the records of each tier (tenant.Tier.Index); the
	// rollup's tier is the one with most records, a tie going to the more
	// critical tier (see tier). Not the last report's: that would make the
	// store's tier attribution depend on arrival order.
	tiers         [tenant.NumTiers]uint64
	count, errors uint64
	dur, ru       float64
	active        float64 // pg: active-session seconds
	bytes, rows   uint64
	lat           sparse
	// tl and rw are the live state of the row's tenant and route, kept
	// so that a row of a known tenant×route skips their two map lookups;
	// looked up again once pruned (gone). Never set on a folded row.
	tl *tenantLive
	rw *window10
}

// minute is one open minute of rollups: its hot keys, sampled
// statements and write-ahead log, under Server.mu; its rows are in the
// aggregator's shards.
type minute struct {
	start      time.Time
	keys       *spacesaving.Sketch
	keyTenants map[string]string
	stmts      map[stmtKey]store.Statement
	wal        *walFile
	// dirty says the minute changed since its last emission; set after a
	// report's rows are in the shards, cleared before an emission reads
	// them, so a report merged during an emission is emitted again.
	dirty atomic.Bool
	// writing counts the emissions of the minute being written: with
	// dirty, it says rows of the minute are not in the store yet
	// (unwrittenFrom).
	writing atomic.Int32
	// merging counts reports taken into the minute (from before their
	// write-ahead log record) whose rows are not yet in the shards: the
	// minute is not dropped while any are.
	merging atomic.Int32
	nrows   atomic.Int64 // rows across shards (Config.MaxMinuteRows)
}

type stmtKey struct {
	pid   int32
	start int64
}

func newMinute(start time.Time) *minute { return &minute{start: start} }

// tenantLive is one tenant's live view: about 2.6 KB, plus a route
// window (window10) and its latency histograms for each route active in
// the last seconds (tenantLiveBytes).
type tenantLive struct {
	tier tenant.Tier
	w    counts10
	hru  history
	// hdb is the reported DB time's history, made on the tenant's first
	// DB row (most tenants of a request-only service never have one);
	// hpg the sampled active backends', made on its first sample. Its
	// DB load history is their larger value each second (dbSeries), as
	// its DB load is the larger of the two rates.
	hdb, hpg *history
	seen     int64 // the last second the tenant was merged or sampled
	routes   map[string]*window10
	waits    map[string]float64
	// ranked is what the tenant did since the last tick, for the metrics'
	// ranking and per-tenant series: they take it once a second
	// (aggregator.flushRanking), not once per row.
	ranked topn.Values
	ranks  bool
	gone   bool // pruned: rows holding it look it up again
	other  bool // the shard's "other": the tenants beyond MaxTenants
}

const maxRoutesLive = 50

// touch records that the tenant was merged or sampled at sec (prune reads
// it instead of every stamp of its rings).
func (tl *tenantLive) touch(sec int64) { tl.seen = max(tl.seen, sec) }

// dbHistory is the tenant's reported DB-time history, made if new.
func (tl *tenantLive) dbHistory() *history {
	if tl.hdb == nil {
		tl.hdb = new(history)
	}
	return tl.hdb
}

// pgHistory is the tenant's sampled-backends history, made if new.
func (tl *tenantLive) pgHistory() *history {
	if tl.hpg == nil {
		tl.hpg = new(history)
	}
	return tl.hpg
}

// dbSeries is the tenant's DB load over the histN complete seconds before
// sec, oldest first: each second the larger of its reported DB time and
// its sampled active backends.
func (tl *tenantLive) dbSeries(sec int64) []float64 {
	out := make([]float64, histN)
	tl.dbAddTo(out, sec)
	return out
}

// dbAddTo adds dbSeries to dst (len histN) without allocating.
func (tl *tenantLive) dbAddTo(dst []float64, sec int64) {
	if tl.hpg == nil {
		tl.hdb.addTo(dst, sec)
		return
	}
	for k := range histN {
		s := sec - histN + int64(k)
		dst[k] = finiteSum(dst[k], max(tl.hdb.at(s), tl.hpg.at(s)))
	}
}

// liveView is the live view beside the tenants (which are the
// aggregator's) and the features': each service's latency signal, rates
// and processes, the hot keys of the last seconds, reports per second,
// and the snapshots already made this second. Under Server.mu.
type liveView struct {
	services   map[string]*serviceLive
	keys       [ringN]*spacesaving.Sketch
	keyStamp   [ringN]int64
	keyTenants map[string]string
	reportsSec [ringN]countSlot
	snapCache  map[snapKey]*api.Snapshot
}

// tick is the live view's once-a-second work at now: each service's
// latency ratio into its history, the snapshots made in the last second
// forgotten.
func (v *liveView) tick(now time.Time) {
	for _, sv := range v.services {
		if r, ok := sv.sig.ValueAt(now); ok && !math.IsNaN(r) && !math.IsInf(r, 0) {
			sv.ratio.set(now.Unix()-1, r)
		}
	}
	clear(v.snapCache)
}

func newLiveView() liveView {
	return liveView{
		services:   make(map[string]*serviceLive),
		keyTenants: make(map[string]string),
		snapCache:  make(map[snapKey]*api.Snapshot),
	}
}

// serviceLive is one service's live view.
type serviceLive struct {
	sig    *ratio.Signal
	ratio  history
	w      window10
	shed   [ringN]int
	shedAt [ringN]int64
	procs  map[string]int64 // instance → last second seen
	seen   int64            // last second with a report (or warm-up)
}

// source is one reporting process: admission bucket and duplicate filter.
type source struct {
	key      string
	first    int64 // Unix second of the first report
	accepted int
	est      bool        // established: never evicted by a newcomer (sources.go)
	pending  []uint64    // sequence numbers being logged (sources.go)
	bucket   gcra.Bucket // admission: rate reports a second, a burst of 4 s
	last     time.Time   // the last report (a replayed one: the replay's time, so that it is kept)
	heard    time.Time   // the last report that came in (not from the write-ahead log)
	budgets  time.Time   // the last report that came in with a budgets section (appliedby.go)
	max      uint64
	seen     [seqWindow / 64]uint64
	any      bool
}

const seqWindow = 1024

// sawSections notes what the sections of rep, which came in at now, say
// of the process: a budgets section, that it applies database budgets.
func (s *source) sawSections(rep *report.Report, now time.Time) {
	if _, ok := report.SectionOf[budget.Window](rep); ok {
		s.budgets = now
	}
}

// seqState says whether seq is new, already merged, or too old to tell.
type seqState int

const (
	seqNew seqState = iota
	seqDup
	seqStale
)

func (s *source) check(seq uint64) seqState {
	switch {
	case !s.any || seq > s.max:
		return seqNew
	case s.max-seq >= seqWindow:
		return seqStale
	case s.seen[(seq%seqWindow)/64]&(1<<(seq%64)) != 0:
		return seqDup
	}
	return seqNew
}

func (s *source) mark(seq uint64) {
	if !s.any || seq > s.max {
		from := s.max + 1
		if !s.any || seq-s.max >= seqWindow {
			s.seen = [seqWindow / 64]uint64{}
		} else {
			for q := from; q < seq; q++ {
				s.seen[(q%seqWindow)/64] &^= 1 << (q % 64)
			}
		}
		s.max, s.any = seq, true
	}
	s.seen[(seq%seqWindow)/64] |= 1 << (seq % 64)
}

// admit takes one token from the source's bucket (rate a second, a burst
// of four seconds' worth); it returns how long to wait when there is none.
func (s *source) admit(now time.Time, rate float64) (time.Duration, bool) {
	s.last, s.heard = now, now
	r, err := gcra.NewRate(rate, 4*rate)
	if err != nil {
		return 0, true // Config makes the rate a number > 0
	}
	if !s.bucket.AllowAt(now, r, 1) {
		return s.bucket.WaitAt(now, r, 1), false
	}
	s.bucket.ChargeAt(now, r, 1)
	return 0, true
}

func sourceKey(src report.Source) string {
	return src.Service + "\x00" + src.Instance + "\x00" + src.Host
}

// merge adds what is one per report to minute m and the live view at
// now: the hot keys; when live, the service's latency, counts and shed
// level and the reports/s. The rows are the aggregator's (merged without
// Server.mu), the sections the features'. Server.mu is held.
func (v *liveView) merge(d *decoded, m *minute, now time.Time, live bool) {
	rep := &d.rep
	v.mergeKeys(rep, m, now.Unix(), live)
	if !live {
		return
	}
	sec := now.Unix()
	j := int(uint64(sec) % ringN)
	if svc := v.service(rep.Source.Service); svc != nil {
		svc.merge(d, now, shedLevel(&rep.Enforcement))
	}
	rs := &v.reportsSec[j]
	if rs.stamp != sec {
		*rs = countSlot{stamp: sec}
	}
	rs.n++
}

// reportsPerSec is the reports merged per second over the rateN complete
// seconds before sec.
func (v *liveView) reportsPerSec(sec int64) float64 {
	var n uint64
	for _, c := range v.reportsSec {
		if c.stamp >= sec-rateN && c.stamp < sec {
			n += c.n
		}
	}
	return float64(n) / rateN
}

// mergeKeys adds a report's hot keys to minute m and, when live, to
// second sec of the live view.
func (v *liveView) mergeKeys(rep *report.Report, m *minute, sec int64, live bool) {
	if rep.Keys == nil || rep.Keys.Total() == 0 {
		return
	}
	if m.keys == nil {
		m.keys = spacesaving.New(keyCapacity)
	}
	m.keys.Merge(rep.Keys)
	if m.keyTenants == nil {
		m.keyTenants = make(map[string]string)
	}
	addKeyTenants(m.keyTenants, rep.KeyTenants)
	if live {
		j := int(uint64(sec) % ringN)
		if v.keyStamp[j] != sec || v.keys[j] == nil {
			v.keyStamp[j] = sec
			v.keys[j] = spacesaving.New(keyCapacity)
		}
		v.keys[j].Merge(rep.Keys)
		addKeyTenants(v.keyTenants, rep.KeyTenants)
	}
}

// merge adds a live report of the service at now: its process, its
// requests' latency, and its shed level.
func (svc *serviceLive) merge(d *decoded, now time.Time, level int) {
	rep := &d.rep
	sec := now.Unix()
	if _, ok := svc.procs[rep.Source.Instance]; !ok {
		rep.Source.Instance = strings.Clone(rep.Source.Instance)
	}
	svc.procs[rep.Source.Instance] = sec
	svc.seen = sec
	if d.svc.reqRows > 0 {
		j := svc.w.slot(sec)
		svc.w.req[j] += d.svc.req
		svc.w.err[j] += d.svc.err
		svc.w.lat[j].Merge(&d.svc.lat)
		svc.sig.MergeSparseAt(now, &d.svc.lat)
	}
	j := int(uint64(sec) % ringN)
	if svc.shedAt[j] != sec {
		svc.shedAt[j], svc.shed[j] = sec, 0
	}
	svc.shed[j] = max(svc.shed[j], level)
}

// tier is the tier of a rollup row: the tier with most records, a tie
// going to the more critical one; TierUnset when no record had one.
func (a *rowAgg) tier() tenant.Tier {
	best, n := tenant.TierUnset, uint64(0)
	for i, c := range a.tiers {
		if c > n {
			best, n = tenant.T0+tenant.Tier(i), c
		}
	}
	return best
}

type countSlot struct {
	stamp int64
	n     uint64
}

func addKeyTenants(dst, src map[string]string) {
	for k, t := range src {
		if len(dst) >= maxKeyTenants {
			if _, ok := dst[k]; !ok {
				continue
			}
		}
		if _, ok := dst[k]; !ok {
			k = strings.Clone(k)
		}
		dst[k] = strings.Clone(t)
	}
}

// service returns the live view of the service name, adding it unless
// maxServices are kept (then nil).
func (v *liveView) service(name string) *serviceLive {
	if sv := v.services[name]; sv != nil {
		return sv
	}
	if len(v.services) >= maxServices {
		return nil
	}
	sv := &serviceLive{sig: ratio.NewSignal(), procs: make(map[string]int64)}
	v.services[strings.Clone(name)] = sv
	return sv
}

// prune forgets services idle for longer than any view shows (tenants
// are the aggregator's: aggregator.prune).
func (v *liveView) prune(now time.Time) {
	sec := now.Unix()
	for name, sv := range v.services {
		for inst, last := range sv.procs {
			if sec-last > rateN {
				delete(sv.procs, inst)
			}
		}
		if len(sv.procs) == 0 && sec-sv.seen > histN+rateN {
			delete(v.services, name)
		}
	}
	if len(v.keyTenants) >= maxKeyTenants {
		clear(v.keyTenants)
	}
}

func maxStamp(w *counts10) int64 {
	var m int64
	for _, s := range w.stamp {
		m = max(m, s)
	}
	return m
}

// finiteSum adds without overflowing to +Inf, which no store accepts: a
// sum saturates at the largest float64.
func finiteSum(a, b float64) float64 {
	if s := a + b; s <= math.MaxFloat64 {
		return s
	}
	return math.MaxFloat64
}
