package incident

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/qtop-dev/qtop/api"
)

// The thresholds of the headline (see the package documentation).
const (
	// DriverShare is the least share of the measure an offender holds.
	DriverShare = 0.2
	// DriverFactor is the least ratio of an offender's recent load to
	// its baseline.
	DriverFactor = 2.0
	// DriverClear is the ratio to its baseline under which a flagged
	// offender's recent load counts as back near it: the flag stays until
	// then (hysteresis against DriverFactor).
	DriverClear = 1.5
	// MaxFlag is how long an offender stays flagged against the baseline
	// it was flagged against: after it, its load is judged afresh (a
	// level that lasts an hour is the new normal).
	MaxFlag = time.Hour
	// DriverRecent is the seconds (points of history) that are "recent"
	// load; the rest of the history is the baseline.
	DriverRecent = 10
	// VictimP95 is the least ratio of a victim's p95 to its baseline.
	VictimP95 = 1.5
	// VictimLoad is the most ratio of a victim's share of load to its
	// baseline share: a tenant whose own work grew is not a victim.
	VictimLoad = 1.25
	// VictimDip is the longest a tenant may go from one snapshot passing
	// the victim test to the next, as a fraction of the window (3 s of
	// a collector's 10 s), with its run going on: a shorter dip is
	// noise of a p95 near the line, a longer one a recovery (thin.go).
	VictimDip = 0.3
	// BaselineMin is the fewest observations a baseline is taken from.
	BaselineMin = 5
	// BaselineSpan is the snapshots (about seconds) kept per tenant.
	BaselineSpan = 120
	// BaselineRecent is the most recent snapshots left out of a baseline.
	BaselineRecent = 30
	// MinDBLoad is the least recent DB load (average active sessions) a
	// row judged on DB load (one with no RU) is flagged at: sampled
	// sessions are few and come and go, so a share of a quiet database
	// swings ×2 from one ten seconds to the next.
	MinDBLoad = 0.5
	// MaxTracked bounds the tenants followed (a source sends at most
	// 1000 rows).
	MaxTracked = 2000
)

// observation is what a snapshot said of one tenant.
type observation struct {
	n         int64 // snapshot number
	p95, load float64
}

// tenantBaseline is a ring of a tenant's last observations.
type tenantBaseline struct {
	obs  [BaselineSpan]observation
	len  int // observations held
	head int // next slot
	// first holds the first BaselineMin observations ever seen.
	first []observation
	// The baseline moves slowly: it is recomputed every baselineEvery
	// snapshots.
	at        int64
	p95, load float64
	ok        bool
	routes    map[string]*routeBaseline // routes.go
	// slowSince is when the tenant's p95 began to pass the victim test
	// without a break longer than VictimDip (zero: it never did), slowLast
	// when it last passed it (thin.go).
	slowSince, slowLast time.Time
}

// baselineEvery is how often (in snapshots) a tenant's baseline is
// recomputed.
const baselineEvery = 10

// cached returns the baseline, recomputing it when it is stale; ps and ls
// are scratch space.
func (b *tenantBaseline) cached(now int64, ps, ls *[]float64) (p95, load float64, ok bool) {
	if !b.ok || now-b.at >= baselineEvery {
		b.p95, b.load, b.ok = b.baseline(now, ps, ls)
		b.at = now
	}
	return b.p95, b.load, b.ok
}

// add keeps o; learn false keeps it only among the first observations
// (an incident is on: its seconds are not the tenant's usual).
func (b *tenantBaseline) add(o observation, learn bool) {
	if len(b.first) < BaselineMin {
		b.first = append(b.first, o)
	}
	if !learn {
		return
	}
	b.obs[b.head] = o
	b.head = (b.head + 1) % BaselineSpan
	b.len = min(b.len+1, BaselineSpan)
}

// baseline returns the median p95 and load of the observations older
// than BaselineRecent snapshots before now, or of the first ones.
func (b *tenantBaseline) baseline(now int64, psp, lsp *[]float64) (p95, load float64, ok bool) {
	ps, ls := (*psp)[:0], (*lsp)[:0]
	defer func() { *psp, *lsp = ps, ls }()
	for i := range b.len {
		o := b.obs[(b.head-1-i+BaselineSpan)%BaselineSpan]
		if now-o.n >= BaselineRecent {
			ps, ls = append(ps, o.p95), append(ls, o.load)
		}
	}
	if len(ps) < BaselineMin {
		if len(b.first) < BaselineMin {
			return 0, 0, false
		}
		ps, ls = ps[:0], ls[:0]
		for _, o := range b.first {
			ps, ls = append(ps, o.p95), append(ls, o.load)
		}
	}
	return Quantile(ps, 0.25), median(ls), true
}

func median(v []float64) float64 { return Quantile(v, 0.5) }

// Quantile sorts v and returns its q-quantile (nearest rank); v must not
// be empty.
func Quantile(v []float64, q float64) float64 {
	slices.Sort(v)
	return v[min(int(q*float64(len(v))), len(v)-1)]
}

// Headline is who is hurting whom: the summary line under the tabs, and
// the "headline" of qtop --once --format json. It is computed from the
// data, never from the table's sort: the share of load is of RU (of DB
// load under qtop --postgres, or when no tenant has RU) whatever column
// orders the rows.
type Headline struct {
	Line string `json:"line"`
	// Measure is what Share is of: "RU" or "DB load".
	Measure   string     `json:"measure"`
	Offenders []Offender `json:"offenders"`
	Victims   []Victim   `json:"victims"`
}

// Offender is a row driving load above its own baseline.
type Offender struct {
	Name  string  `json:"name"`
	Share float64 `json:"share"`
	// Measure is what Share, Factor and Baseline are of when not the
	// headline's Measure: "DB load" for a row with DB load and no RU in
	// a headline of RU (load no process reports, such as a job's
	// sessions the PostgreSQL sampler saw), judged on DB load instead.
	Measure string `json:"measure,omitempty"`
	// Factor is its recent load over its baseline; 0 means new load.
	Factor float64 `json:"factor,omitempty"`
	// Baseline is its mean load before the recent seconds, in the
	// measure's unit (RU/s or average active sessions); 0 for new load.
	// Once flagged, an offender keeps that baseline until its load is
	// back near it (DriverClear), however long that takes.
	Baseline float64 `json:"baseline,omitempty"`
	// BaselineFrom is "collector" when the baseline is the source's
	// (api.TenantRow.BaselineRUPerSec), else "qtop": the load history
	// this tracker and the source's rows hold.
	BaselineFrom string `json:"baseline_from,omitempty"`
	// Since is when the offender was first flagged (the snapshot's time).
	Since time.Time `json:"since,omitzero"`
}

// Victim is a tenant whose p95 grew while its own share of load did not.
type Victim struct {
	Tenant             string  `json:"tenant"`
	P95Seconds         float64 `json:"p95_seconds"`
	BaselineP95Seconds float64 `json:"baseline_p95_seconds"`
	Share              float64 `json:"share"`
	BaselineShare      float64 `json:"baseline_share"`
	// Routes are the tenant's routes whose p95 is at least VictimP95
	// times their own baseline (routes.go), else, while the Tracker
	// knows no route's baseline, times the tenant's; slowest first (at
	// most 3).
	Routes []RouteHurt `json:"routes,omitempty"`
	// BaselineFrom is "collector" when the snapshot carried the
	// tenant's baseline (api.TenantRow.BaselineP95Seconds), else "qtop":
	// what this tracker saw of the tenant (see the package documentation).
	BaselineFrom string `json:"baseline_from"`
	// Since is when its p95 began to pass the victim test without a
	// break (a dip under the line shorter than VictimDip of the window is
	// none: thin.go): the source's (api.TenantRow.SlowSince) when earlier
	// than what this tracker saw.
	Since time.Time `json:"since,omitzero"`
}

// RouteHurt is one route of a victim.
type RouteHurt struct {
	Route      string  `json:"route"`
	P95Seconds float64 `json:"p95_seconds"`
}

// Factor is the victim's p95 over its baseline.
func (v Victim) Factor() float64 { return v.P95Seconds / v.BaselineP95Seconds }

// Tracker follows the tenants across snapshots and writes the headline.
// The zero value is ready to use; a Tracker is not safe for concurrent
// use. Feed it every snapshot of one source, in order.
type Tracker struct {
	n     int64
	rows  map[string]*tenantBaseline
	seen  map[string]int64
	own   map[string]*series // load per snapshot, by row label
	flags map[string]*flag   // offenders flagged, by row label
	// bySource counts the offenders the source flagged in the last
	// snapshot (api.TenantRow.FlaggedSince).
	bySource int
	head     Headline
	window   float64   // the last snapshot's, in seconds (routes.go)
	now      time.Time // the last snapshot's time
	ps       []float64 // scratch
	ls       []float64
	keys     []string    // scratch: each row's key (histories)
	hists    [][]float64 // scratch: each row's load history (histories)
}

// series is a row's load as the tracker saw it, one point per snapshot,
// oldest first (at most api.HistoryLen): the driver test's history when
// the source's is shorter (a collector that restarted knows nothing
// before its start) or of another measure (sorted by DB load, a
// collector's history is of DB load).
type series struct {
	v    []float64
	seen int64
	// known: its start is what the source knew of the row before the
	// tracker started (Before), not a history to cut at a start.
	known bool
}

// Before tells the tracker, before it first sees row r, what the source
// knew of r's load in the time before the tracker started (a collector's
// baselines, kept across its restart; 0: it had none), in a headline of
// RU: its DB load for a row with DB load and no RU, else its RU/s. The
// tracker then judges r as though it had watched that load: a job that
// began after the source's baselines formed, and which the collector's
// detector flagged before it restarted, is new load again after the
// restart, where the tracker alone, seeing it from its first snapshot,
// would take it for load there since before. A row the tracker has seen
// already is left as it is.
func (in *Tracker) Before(group string, r *api.TenantRow, load float64) {
	in.init()
	key := group + "\x00" + Label(group, r)
	if in.own[key] != nil || in.own["db\x00"+key] != nil || len(in.own) >= MaxTracked {
		return
	}
	if r.RUPerSec == 0 && r.DBLoad > 0 {
		key = "db\x00" + key
	}
	v := make([]float64, api.HistoryLen-1, api.HistoryLen)
	for i := range v {
		v[i] = load
	}
	in.own[key] = &series{v: v, seen: in.n, known: true}
}

func (s *series) add(v float64, n int64) {
	if len(s.v) == api.HistoryLen {
		s.v = append(s.v[:0], s.v[1:]...)
	}
	s.v, s.seen = append(s.v, v), n
}

// flag is an offender's baseline, frozen when it was flagged.
type flag struct {
	base  float64
	from  string
	since time.Time
	seen  int64
}

// headlineMeasure is what the headline weighs load by, and whether the
// rows' History is of it.
func headlineMeasure(s *api.Snapshot) (name string, db, historyOf bool) {
	db = s.Source == api.SourcePostgres
	if !db {
		var ru float64
		for i := range s.Tenants {
			ru += s.Tenants[i].RUPerSec
		}
		db = ru == 0
	}
	historyDB := s.Measure == api.MeasureDB || s.Source == api.SourcePostgres
	if db {
		return "DB load", true, historyDB
	}
	return "RU", false, !historyDB
}

// init makes the maps of a zero Tracker.
func (in *Tracker) init() {
	if in.rows == nil {
		in.rows, in.seen, in.own, in.flags = map[string]*tenantBaseline{}, map[string]int64{}, map[string]*series{}, map[string]*flag{}
	}
}

// Add takes the next snapshot and returns the headline it makes.
func (in *Tracker) Add(s *api.Snapshot) Headline {
	in.init()
	in.n++
	in.now = s.Time
	in.window = s.Window.Seconds()
	if in.window <= 0 {
		in.window = 10
	}
	group := s.GroupBy
	if group == "" {
		group = api.GroupTenant
	}
	measure, db, historyOf := headlineMeasure(s)
	learn := !in.incident(s.Time)
	bySource := 0
	load := func(r *api.TenantRow) float64 {
		if db {
			return r.DBLoad
		}
		return r.RUPerSec
	}
	total, dbTotal := totals(s, load)
	h := Headline{Measure: measure}
	var thin []Victim // victims on a few requests (thin.go)
	in.histories(s, group, db, historyOf, load)
	for i := range s.Tenants {
		r := &s.Tenants[i]
		if r.Tenant == api.OtherTenant && !r.Untagged {
			continue
		}
		share := 0.0
		if total > 0 {
			share = load(r) / total
		}
		name, key := Label(group, r), in.keys[i]
		var d Offender
		var drv bool
		switch base := sourceBase(group, db, r); {
		case !db && r.RUPerSec == 0 && r.DBLoad > 0:
			// Load no process reports: judged on DB load.
			d, drv = in.dbDriver(s, group, key, r, dbTotal)
		case group == api.GroupTenant && !r.FlaggedSince.IsZero():
			d, drv = flaggedBySource(r, share, load(r), base, in.hists[i])
			delete(in.flags, key)
			bySource++
		default:
			d, drv = in.driver(s, key, share, load(r), base, in.hists[i])
		}
		if len(in.flags) > 0 && (db || r.RUPerSec != 0 || r.DBLoad == 0) {
			delete(in.flags, "db\x00"+key) // judged on RU again
		}
		if drv {
			d.Name = name
			h.Offenders = append(h.Offenders, d)
		}
		if s.Source == api.SourcePostgres || group != api.GroupTenant || r.Untagged {
			continue
		}
		if v, ok, few := in.victim(r, share, drv, learn); ok && few {
			thin = append(thin, v)
		} else if ok {
			h.Victims = append(h.Victims, v)
		}
	}
	h.Victims = in.corroborate(h, thin)
	in.bySource = bySource
	in.forget()
	slices.SortFunc(h.Offenders, func(a, b Offender) int { return cmp.Compare(b.Share, a.Share) })
	slices.SortFunc(h.Victims, func(a, b Victim) int {
		return cmp.Or(cmp.Compare(b.Factor(), a.Factor()), strings.Compare(a.Tenant, b.Tenant))
	})
	h.Line = summaryLine(s, group, h)
	in.head = h
	return h
}

// sourceBase is the baseline the source sends for r's load in the
// measure r is judged on (0: none): its DB load for a row judged on DB
// load (every row of a headline of DB load, and one with DB load and no
// RU), else its RU/s. The untagged row's is the one the source flagged
// it against: a collector keeps no hour's baseline of load that names no
// tenant.
func sourceBase(group string, db bool, r *api.TenantRow) float64 {
	switch {
	case group != api.GroupTenant:
		return 0
	case db || r.RUPerSec == 0 && r.DBLoad > 0:
		return r.BaselineDBLoad
	}
	return r.BaselineRUPerSec
}

// totals sums the rows' load and their DB load.
func totals(s *api.Snapshot, load func(*api.TenantRow) float64) (total, db float64) {
	for i := range s.Tenants {
		total += load(&s.Tenants[i])
		db += s.Tenants[i].DBLoad
	}
	return total, db
}

// Headline returns the headline of the last snapshot added.
func (in *Tracker) Headline() Headline { return in.head }

// Alert reports whether the headline names offenders or victims.
func (h Headline) Alert() bool { return len(h.Offenders) > 0 || len(h.Victims) > 0 }

// histories sets, for each row of s, its key (in.keys) and, for a row
// judged on the headline's measure, its load history (in.hists; nil for
// the others). Histories that begin before any row had load (a
// collector started before its fleet, a database idle until a job) are
// cut to the seconds since that first load: zeros before it say that the
// source had no load yet, not that this row had none while the others
// had theirs, and read as an idle past they made every row of a fleet
// that starts after its collector new load — or, once the first load was
// in the baseline seconds, a rise of ×10 or more. A row whose load
// starts later, while the others had theirs (the demo's import, 5 s in),
// is new load still. A headline of DB load that the source samples
// (qtop --postgres, a collector's sampler) is not cut: the seconds
// before the first load are samples of an idle database, and the first
// job on it is new load.
func (in *Tracker) histories(s *api.Snapshot, group string, db, historyOf bool, load func(*api.TenantRow) float64) {
	in.keys, in.hists = slices.Grow(in.keys[:0], len(s.Tenants))[:len(s.Tenants)], slices.Grow(in.hists[:0], len(s.Tenants))[:len(s.Tenants)]
	span, loaded := 0, 0 // the longest history, and the most points since a first load
	for i := range s.Tenants {
		r := &s.Tenants[i]
		in.keys[i], in.hists[i] = group+"\x00"+Label(group, r), nil
		if (r.Tenant == api.OtherTenant && !r.Untagged) || (!db && r.RUPerSec == 0 && r.DBLoad > 0) {
			continue
		}
		h := in.history(s, r, in.keys[i], load(r), historyOf)
		in.hists[i] = h
		if o := in.own[in.keys[i]]; o != nil && o.known {
			continue // what the source knew: no start to cut
		}
		span = max(span, len(h))
		if j := slices.IndexFunc(h, func(v float64) bool { return v != 0 }); j >= 0 {
			loaded = max(loaded, len(h)-j)
		}
	}
	if loaded == 0 || loaded >= span || (db && (s.Source == api.SourcePostgres || s.Collector.Sampler)) {
		return // no load yet, load since the histories began, or idle seconds sampled
	}
	for i, h := range in.hists {
		if o := in.own[in.keys[i]]; len(h) > loaded && (o == nil || !o.known) {
			in.hists[i] = h[len(h)-loaded:]
		}
	}
}

// history is the row's load history for the driver test: the source's
// (when of the headline's measure, and only the seconds a collector has
// been up), or the tracker's own when that is longer. The tracker's own
// leaves out the seconds while a starting collector's window fills: its
// rates are averages over the window, so every row's climbs then, and a
// steady row judged on its own series (one with DB load and no RU, whose
// DB load the source's history of RU does not hold) was flagged "×3 its
// baseline" against the fill by a qtop that watched the start, and by no
// qtop that started later, nor by the collector, which judges no second
// of the fill either.
func (in *Tracker) history(s *api.Snapshot, r *api.TenantRow, key string, load float64, historyOf bool) []float64 {
	own := in.own[key]
	if own == nil {
		if len(in.own) >= MaxTracked {
			own = &series{}
		} else {
			own = &series{}
			in.own[key] = own
		}
	}
	if s.Collector.Uptime > 0 && s.Collector.Uptime < s.Window {
		own.seen = in.n // the window fills
	} else {
		own.add(load, in.n)
	}
	var h []float64
	if historyOf {
		h = r.History
		if up := int(s.Collector.Uptime / time.Second); s.Collector.Uptime > 0 && up < len(h) {
			h = h[len(h)-max(up, 1):]
		}
		// A postgres source sampling in this process (qtop --postgres,
		// no collector's uptime): its history holds no more samples than
		// the tracker has seen (the rest is padding, not an idle past). A
		// collector that only samples PostgreSQL keeps a history of its
		// own, cut above to its uptime.
		if s.Source == api.SourcePostgres && s.Collector.Uptime == 0 && int(in.n) < len(h) {
			h = h[len(h)-int(in.n):]
		}
	}
	if len(own.v) > len(h) {
		return own.v
	}
	return h
}

// victim follows r's baseline and says whether r is a victim now, and
// whether on a few requests (thin.go).
func (in *Tracker) victim(r *api.TenantRow, share float64, driver, learn bool) (v Victim, ok, few bool) {
	b := in.rows[r.Tenant]
	if b == nil {
		if len(in.rows) >= MaxTracked {
			return Victim{}, false, false
		}
		b = &tenantBaseline{}
		in.rows[r.Tenant] = b
	}
	in.seen[r.Tenant] = in.n
	defer func() {
		if r.P95Seconds > 0 {
			b.add(observation{n: in.n, p95: r.P95Seconds, load: share}, learn)
		}
		v.Since = b.slow(ok, in.now, r.SlowSince, in.dip())
	}()
	rv := in.routes(b, r, learn, r.BaselineP95Seconds <= 0)
	known, hurt := rv.known, rv.hurt
	if !known && rv.thinKnown {
		// Its routes each have a few requests: judged on them, as a
		// victim on a few requests (thin.go).
		known, hurt, few = true, rv.thinHurt, true
	}
	few = few || (!known && r.ReqPerSec*in.window < MinRouteRequests)
	v = Victim{Tenant: r.Tenant, P95Seconds: r.P95Seconds, Share: share, BaselineFrom: "qtop"}
	p, l, based := b.cached(in.n, &in.ps, &in.ls)
	if r.BaselineP95Seconds > 0 {
		p, l, based, v.BaselineFrom = r.BaselineP95Seconds, r.BaselineShare, true, "collector"
	}
	if !based || p <= 0 || r.P95Seconds <= 0 || driver {
		return Victim{}, false, false
	}
	if r.P95Seconds < VictimP95*p || share > VictimLoad*math.Max(l, 1e-9) || (known && len(hurt) == 0) {
		return Victim{}, false, false
	}
	v.BaselineP95Seconds, v.BaselineShare = p, l
	if known {
		v.Routes = hurt
		return v, true, few
	}
	for _, rt := range r.Routes {
		if rt.P95Seconds >= VictimP95*p {
			v.Routes = append(v.Routes, RouteHurt{Route: rt.Route, P95Seconds: rt.P95Seconds})
		}
	}
	slices.SortFunc(v.Routes, func(a, b RouteHurt) int { return cmp.Compare(b.P95Seconds, a.P95Seconds) })
	v.Routes = v.Routes[:min(len(v.Routes), 3)]
	return v, true, few
}

// forget drops the rows not seen for BaselineSpan snapshots.
func (in *Tracker) forget() {
	for name, n := range in.seen {
		if in.n-n > BaselineSpan {
			delete(in.seen, name)
			delete(in.rows, name)
		}
	}
	for k, s := range in.own {
		if in.n-s.seen > BaselineSpan {
			delete(in.own, k)
		}
	}
	for k, f := range in.flags {
		// A job's sessions that ended leave no row: its flag goes with
		// them, so that the victims' baselines learn again.
		if in.n-f.seen > BaselineSpan || (f.seen < in.n && strings.HasPrefix(k, "db\x00")) {
			delete(in.flags, k)
		}
	}
}

// summaryLine names the two largest offenders and sums up the victims.
func summaryLine(s *api.Snapshot, group string, h Headline) string {
	var parts []string
	for i, d := range h.Offenders {
		if i == 2 {
			parts = append(parts, "+"+strconv.Itoa(len(h.Offenders)-2)+" more")
			break
		}
		f := "new load"
		if d.Factor > 0 {
			f = "×" + fmtFactor(d.Factor) + " its baseline"
			// A baseline this tracker froze: say how old it is.
			if age := s.Time.Sub(d.Since); d.BaselineFrom == "qtop" && age >= time.Minute && !d.Since.IsZero() {
				f += " of " + strings.TrimSuffix(age.Truncate(time.Minute).String(), "0s") + " ago"
			}
		}
		parts = append(parts, d.Name+" "+strconv.FormatFloat(d.Share*100, 'f', 0, 64)+"% of "+cmp.Or(d.Measure, h.Measure)+", "+f)
	}
	if len(parts) == 0 {
		parts = append(parts, "no tenant drives load above its baseline")
	}
	switch {
	case s.Source == api.SourcePostgres:
		parts = append(parts, "victims n/a (latency needs application reports)")
	case group != api.GroupTenant:
		parts = append(parts, "victims: group by tenant")
	case len(h.Victims) > 0:
		fs := make([]float64, len(h.Victims))
		for i, v := range h.Victims {
			fs[i] = v.Factor()
		}
		noun := " tenants"
		if len(h.Victims) == 1 {
			noun = " tenant"
		}
		parts = append(parts, "victims: "+strconv.Itoa(len(h.Victims))+noun+", p95 ×"+fmtFactor(median(fs))+" (key 8)")
	default:
		parts = append(parts, "victims: none")
	}
	return strings.Join(parts, " · ")
}

// driver reports whether the row keyed key, with this share of load and
// load now, drives load: against the source's baseline when it carries
// one (srcBase > 0), else against its own history h. A row once flagged
// keeps the baseline it was flagged against and stays flagged until its
// recent load is back under DriverClear times it (or its share under
// half DriverShare): the incident does not end because the rise is no
// longer recent. New load meets the source's baseline once it has one.
func (in *Tracker) driver(s *api.Snapshot, key string, share, now, srcBase float64, h []float64) (Offender, bool) {
	base, recent, ok := SplitOf(s, h)
	if srcBase > 0 {
		base, ok = srcBase, true
		if len(h) <= DriverRecent {
			recent = now
		}
	}
	f := in.flags[key]
	if f != nil && s.Time.Sub(f.since) >= MaxFlag {
		delete(in.flags, key) // the new normal: judged afresh
		f = nil
	}
	if f != nil {
		if srcBase > 0 {
			// The source's baseline wins: it is the same for every
			// client, and its keeper leaves incidents out of it too.
			f.base, f.from = srcBase, "collector"
		}
		if !ok {
			recent = now
		}
		if share >= DriverShare/2 && (f.base == 0 || recent >= DriverClear*f.base) {
			f.seen = in.n
			return f.offender(share, recent), true
		}
		delete(in.flags, key)
		return Offender{}, false
	}
	if share < DriverShare || !ok || recent <= 0 || (base > 0 && recent < DriverFactor*base) {
		return Offender{}, false
	}
	f = &flag{base: max(base, 0), from: "qtop", since: s.Time, seen: in.n}
	if srcBase > 0 {
		f.from = "collector"
	}
	if len(in.flags) < MaxTracked {
		in.flags[key] = f
	}
	return f.offender(share, recent), true
}

// dbDriver is the offender test, on DB load, of a row that has DB load
// and none of the headline's RU: a tenant whose load no agent or gate
// reports (a batch job, pgbench, a service not instrumented) would
// otherwise never be named, however hard it drives the database. Only
// such rows: a tenant with requests is judged on RU, and the DB load of
// the victims, whose statements wait longer, rises too. A row the
// source flagged itself (api.TenantRow.FlaggedSince) is its offender,
// and every row is judged against the DB-load baseline the source sends
// (api.TenantRow.BaselineDBLoad), as rows of RU are against theirs.
func (in *Tracker) dbDriver(s *api.Snapshot, group, key string, r *api.TenantRow, total float64) (Offender, bool) {
	if in.own["db\x00"+key] == nil && in.own[key] == nil && in.n > DriverRecent && len(in.own) < MaxTracked {
		// Not seen in the snapshots before, which the tracker watched for
		// longer than the recent seconds: it had no load then, so that a
		// job started since is new load. (A row there since the tracker's
		// first snapshots, as every row is after a start, was there
		// before it too.)
		in.own["db\x00"+key] = &series{v: make([]float64, min(in.n-1, api.HistoryLen-1), api.HistoryLen)}
	}
	key = "db\x00" + key
	h := in.history(s, r, key, r.DBLoad, s.Measure == api.MeasureDB)
	share, base := r.DBLoad/total, sourceBase(group, true, r)
	var d Offender
	var ok bool
	if group == api.GroupTenant && !r.FlaggedSince.IsZero() {
		delete(in.flags, key)
		d, ok = flaggedBySource(r, share, r.DBLoad, base, h)
	} else if in.flags[key] != nil || recentOf(h, r.DBLoad) >= MinDBLoad {
		d, ok = in.driver(s, key, share, r.DBLoad, base, h)
	}
	d.Measure = "DB load"
	return d, ok
}

// recentOf is the recent load of a history h (Split), or now when h is
// too short to split.
func recentOf(h []float64, now float64) float64 {
	if len(h) > DriverRecent {
		_, now, _ = Split(h)
	}
	return now
}

// flaggedBySource is the offender a source's own detector flagged
// (api.TenantRow.FlaggedSince), with this share and load now, against
// the baseline the source sends (sourceBase; 0: new load): the same for
// every client, the untagged row too. The source judged the second
// before the one it serves, so the flag is held to the rule that clears
// it (as driver clears its own) on the snapshot shown: a tenant
// throttled to nothing is not named at "0% of RU".
func flaggedBySource(r *api.TenantRow, share, now, base float64, h []float64) (Offender, bool) {
	recent := recentOf(h, now)
	if share < DriverShare/2 || (base > 0 && recent < DriverClear*base) {
		return Offender{}, false
	}
	f := flag{base: base, from: "collector", since: r.FlaggedSince}
	return f.offender(share, recent), true
}

// incident reports whether an offender is flagged (by this tracker, for
// less than MaxFlag, or by the source): while one is, the tenants' p95
// and share do not teach their baselines.
func (in *Tracker) incident(now time.Time) bool {
	if in.bySource > 0 {
		return true
	}
	for _, f := range in.flags {
		if now.Sub(f.since) < MaxFlag {
			return true
		}
	}
	return false
}

// offender is the headline's entry of a flagged row.
func (f *flag) offender(share, recent float64) Offender {
	o := Offender{Share: share, Baseline: f.base, BaselineFrom: f.from, Since: f.since}
	if f.base > 0 {
		o.Factor = recent / f.base
	}
	return o
}

// Split returns the mean of a load history's last DriverRecent points
// (recent) and of the points before them (baseline), as the offender
// test weighs them; ok is false when h holds no more than DriverRecent
// points.
func Split(h []float64) (baseline, recent float64, ok bool) {
	if len(h) <= DriverRecent {
		return 0, 0, false
	}
	for _, v := range h[:len(h)-DriverRecent] {
		baseline += v
	}
	for _, v := range h[len(h)-DriverRecent:] {
		recent += v
	}
	return baseline / float64(len(h)-DriverRecent), recent / DriverRecent, true
}

// SplitOf is Split of a history h taken from snapshot s, judged only
// when it can say something: on at least DriverRecent+BaselineMin
// seconds (in a collector's first second nobody has load, so on fewer
// every tenant would look like new load). The headline and the
// autopilot both judge so.
func SplitOf(s *api.Snapshot, h []float64) (baseline, recent float64, ok bool) {
	if len(h) < DriverRecent+BaselineMin {
		return 0, 0, false
	}
	return Split(h)
}

func fmtFactor(f float64) string {
	if f >= 10 {
		return strconv.FormatFloat(f, 'f', 0, 64)
	}
	return strconv.FormatFloat(f, 'f', 1, 64)
}

// untaggedLabels name the row of the load without a value for a grouping.
var untaggedLabels = map[string]string{
	api.GroupTenant:      "(untagged)",
	api.GroupApplication: "(no application_name)",
	api.GroupUser:        "(no user)",
	api.GroupDatabase:    "(no database)",
	api.GroupClient:      "(local socket)",
	api.GroupFingerprint: "(no text)",
}

// Label is the name a row is shown with under a grouping: its tenant (or
// group value) without control characters, or the untagged row's label,
// which no tenant name can be mistaken for (names in parentheses are
// reserved).
func Label(group string, r *api.TenantRow) string {
	if !r.Untagged {
		return api.Printable(r.Tenant)
	}
	if l, ok := untaggedLabels[group]; ok {
		return l
	}
	return untaggedLabels[api.GroupTenant]
}
