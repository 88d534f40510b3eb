package collector

import (
	"cmp"
	"context"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/autopilot"
	"github.com/qtop-dev/qtop/incident"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/tenant"
)

// Baselines in the collector: the same for every qtop that reads it, so
// that the headline's offenders and victims do not depend on when a qtop
// started or whether it restarted. Each second the live view (tenants by
// RU, as the autopilot reads it) adds each tenant's p95, share of RU,
// RU/s and DB load to the minute it falls in; a tenant's baseline is the
// median, over the complete minutes of the trailing hour except the last
// baselineGap (which an incident under way would fill), of those minutes'
// means — once at least baselineMinutes such minutes exist. The live view
// then carries it (api.TenantRow.BaselineP95Seconds, BaselineShare,
// BaselineRUPerSec, and BaselineDBLoad on a row with DB load and no RU,
// which is judged on DB load) and qtop judges against it ("baselines:
// collector").
// Each tenant's routes' p95 are kept alike and served on its route rows
// (baselineroutes.go).
//
// Each service's p95 is kept the same way (api.ServiceRow.
// BaselineP95Seconds, exported as qtop_collector_latency_baseline_p95_seconds):
// the latency alerts compare a service's p95 with it, since the latency
// ratio's own 5-minute baseline takes in a lasting slowdown within a
// minute or two.
//
// Incidents do not teach the baselines: the book runs the headline's
// own detector (incident.Tracker) on what it is fed, and while an
// offender is flagged against a baseline, or as new load while victims
// are hurt against the baselines served, no tenant's seconds are added.
// New load without such victims (a new customer's steady traffic, or the
// whole fleet's on a collector started before it) is learnt, so it
// becomes the tenant's baseline. An incident older than the trailing hour
// is taken as the new normal: learning resumes.
//
// Nor does a temporary limit on a tenant teach its baseline: while a
// quota or throttle rule, or an enforced budget, holds a tenant for a
// while (heldTenants: one the autopilot wrote, or one that expires, by
// hand too, such as qtop's t), its load is the limit's, not its own:
// none of its seconds are added, and its load is left out of the total
// the other tenants' shares are taken of. The detector alone does not
// see to that: an offender held near its baseline is no longer flagged,
// and a collector restarted during the action never flagged it at all;
// learning the held-down load made the tenant's return to its own load,
// once the limit lifted, look like a new incident. A standing limit
// written by hand (a budget with no expiry: every rule expires) is part
// of the tenant's normal and does not stop the learning; nor does a
// shadow or price rule, or a warn budget, which hold nothing down. A minute counts once it
// holds minuteSeconds seconds; the seconds while a starting collector's
// window fills are neither learnt nor judged (its rates climb then, which
// the tracker would take for a rise).
//
// The book is saved in the data folder (baselinefile.go) at each
// minute's turn and read back at start, so a collector that restarts
// keeps its baselines instead of learning them again.
const (
	baselineSlots   = 60 // minutes of the trailing hour
	baselineGap     = 3  // the latest minutes left out of a baseline
	baselineMinutes = 5  // complete minutes needed before a baseline is served
	// minuteSeconds is the fewest seconds learnt that make a minute
	// complete: a minute cut by a start or a restart, or mostly spent in
	// an incident, is not one of its tenants' usual minutes.
	minuteSeconds = 30
	// maxBaselineTenants bounds the tenants followed (the live view the
	// book reads has at most maxTop rows).
	maxBaselineTenants = 2 * maxTop
	// maxBaselineServices bounds the services followed, as their ratio
	// series are.
	maxBaselineServices = maxRatioSeries
)

// baselineBook holds every followed tenant's minutes and the baselines
// computed from them at the last minute's turn.
type baselineBook struct {
	// gap, need and seconds are baselineGap, baselineMinutes and
	// minuteSeconds (tests shorten them).
	gap, need int64
	seconds   int
	mu        sync.Mutex
	minute    int64 // the minute being filled (unix minutes)
	tenants   map[string]*tenantMinutes
	served    map[string][4]float64     // p95 seconds, share of RU, RU/s, DB load: the baselines served
	services  map[string]*tenantMinutes // only p95 is used
	servedSvc map[string]float64        // p95 seconds
	// routes and servedRoute are the tenants' routes' (routeKey), as
	// services are (baselineroutes.go).
	routes      map[string]*tenantMinutes
	servedRoute map[string]float64
	tr          incident.Tracker // the headline, so that incidents do not teach
	// learnt holds the seconds learnt in each minute of the hour (a
	// tenant not in one of them had no load then); before, computed from
	// it at each minute's turn, is each tenant's load over those seconds
	// (RU/s, DB load), which its tracker takes for the load of a row it
	// has not seen yet (knows: once baselineMinutes such minutes exist).
	learnt tenantMinutes
	before map[string][2]float64
	knows  bool
	// file is where the book is saved at each minute's turn ("": not
	// saved); save does it (nil: saveBaselines).
	file string
	save func(path string, b []byte) error
	log  *slog.Logger
	// flagged are the offenders the tracker named last.
	flagged []flagged
	// saved is, read back at start, since when each offender of the
	// saved book was flagged (baselineflags.go).
	saved *savedFlags
}

// flagged is an offender of the book's tracker: its label and since when.
type flagged struct {
	name  string
	since time.Time
	base  float64 // the load it was flagged against (0: new load): RU/s, or DB load with db
	db    bool    // flagged on DB load (keepFlags)
}

// tenantMinutes is one tenant's (or service's) ring of minutes.
type tenantMinutes struct {
	at         [baselineSlots]int64 // the minute a slot holds
	p95, share [baselineSlots]float64
	ru, db     [baselineSlots]float64
	n          [baselineSlots]int
	lastMinute int64
}

func newBaselineBook() *baselineBook {
	return &baselineBook{gap: baselineGap, need: baselineMinutes, seconds: minuteSeconds, tenants: map[string]*tenantMinutes{}, served: map[string][4]float64{},
		services: map[string]*tenantMinutes{}, servedSvc: map[string]float64{}, routes: map[string]*tenantMinutes{}, servedRoute: map[string]float64{},
		before: map[string][2]float64{}}
}

// add takes one live snapshot (tenants by RU, the most rows, carrying
// the baselines served: the fleet's when the collector has peers), this
// collector's own services (serviceLevels: a service's baseline is
// compared with the p95 of this collector's processes, as exported) and
// the tenants that temporary limits hold at the snapshot's time
// (heldTenants), which are not learnt.
func (b *baselineBook) add(s *api.Snapshot, services []serviceLevel, held map[string]bool) {
	m := s.Time.Unix() / 60
	b.mu.Lock()
	var saved []byte
	if m != b.minute {
		saved = b.turn(m)
	}
	b.learn(s, services, held, m)
	b.mu.Unlock()
	if saved != nil {
		b.write(saved)
	}
}

// learn adds what s shows of each tenant not held, and each service's
// p95, to minute m, unless an incident is on.
func (b *baselineBook) learn(s *api.Snapshot, services []serviceLevel, held map[string]bool, m int64) {
	if s.Collector.Uptime > 0 && s.Collector.Uptime < s.Window {
		// A start: a collector's rates are averages over its Window,
		// which fills during its first seconds. Neither learnt nor
		// judged: to the tracker the fill is a rise, and a steady load
		// with no baseline served (a database job, a tenant not learnt
		// yet) would be flagged against the fill's mean, a flag that
		// stops the learning for as long as the load stays.
		return
	}
	// The tracker judges for itself: the flags served are its own.
	own := *s
	own.Tenants = slices.Clone(s.Tenants)
	for i := range own.Tenants {
		own.Tenants[i].FlaggedSince = time.Time{}
	}
	b.tellBefore(&own)
	h := b.tr.Add(&own)
	b.keepFlags(h)
	b.restoreSince(s.Time) // baselineflags.go
	// Victims stop the learning only when judged against the baselines
	// served (the tracker's own, a lower quartile of the last two
	// minutes' p95, take a tenant of mixed fast and slow requests for a
	// victim): else new load on a fresh collector, with such victims,
	// would stop every baseline from forming, and so the very ones that
	// would judge the victims right.
	victims := false
	for _, v := range h.Victims {
		victims = victims || v.BaselineFrom == "collector"
	}
	on := false
	for i, o := range h.Offenders {
		if s.Time.Sub(b.flagged[i].since) < baselineSlots*time.Minute && (o.Factor > 0 || victims) {
			on = true
		}
	}
	if on {
		return // an incident
	}
	for _, l := range services {
		// A service's p95 is learnt while it is exported (enough
		// requests: minP95Requests), as the alerts read it.
		if l.p95 > 0 && !math.IsInf(l.p95, 0) {
			if tm := minutesOf(b.services, l.name, maxBaselineServices); tm != nil {
				tm.add(m, l.p95, 0, 0, 0)
			}
		}
	}
	b.learnt.add(m, 0, 0, 0, 0) // a second learnt
	// A held tenant's load is the limit's: its share of a total that
	// counted it would make every other tenant's usual share look
	// smaller than it is.
	var total float64
	for i := range s.Tenants {
		if !held[s.Tenants[i].Tenant] {
			total += s.Tenants[i].RUPerSec
		}
	}
	for i := range s.Tenants {
		r := &s.Tenants[i]
		// A row with DB load and no RU (a job no process reports) is
		// learnt for its DB load alone.
		dbOnly := r.RUPerSec == 0 && r.DBLoad > 0
		if (r.P95Seconds <= 0 && !dbOnly) || r.Untagged || r.Tenant == api.OtherTenant || tenant.ValidateTenant(r.Tenant) != nil || held[r.Tenant] {
			continue
		}
		if tm := minutesOf(b.tenants, r.Tenant, maxBaselineTenants); tm != nil {
			share := 0.0
			if total > 0 {
				share = r.RUPerSec / total
			}
			tm.add(m, r.P95Seconds, share, r.RUPerSec, r.DBLoad)
		}
		b.learnRoutes(r, m)
	}
}

// keepFlags keeps the offenders of the tracker's headline h, each with
// the baseline it was flagged against: of DB load when it was judged on
// DB load (a row with no RU, or every row of a headline of DB load, such
// as a collector's whose only source is PostgreSQL's sampler), else of
// RU/s.
func (b *baselineBook) keepFlags(h incident.Headline) {
	b.flagged = b.flagged[:0]
	for _, o := range h.Offenders {
		b.flagged = append(b.flagged, flagged{o.Name, o.Since, o.Baseline, cmp.Or(o.Measure, h.Measure) == "DB load"})
	}
}

// tellBefore tells the tracker, once the book knows the hour, what
// load each row of s it has not seen yet had before (none, for a tenant
// with no minutes): after a restart too, the detector knows what the
// book knew, so a job it flagged as new load is still one.
func (b *baselineBook) tellBefore(s *api.Snapshot) {
	if !b.knows || (s.GroupBy != "" && s.GroupBy != api.GroupTenant) {
		return
	}
	for i := range s.Tenants {
		if r := &s.Tenants[i]; !r.Untagged && r.BaselineRUPerSec == 0 {
			load := b.before[r.Tenant][0]
			if r.RUPerSec == 0 && r.DBLoad > 0 {
				load = b.before[r.Tenant][1] // a row judged on DB load
			}
			b.tr.Before(api.GroupTenant, r, load)
		}
	}
}

// heldTenants are the tenants that a temporary limit holds at now,
// matching the tenant by name: a throttle rule in force (not shadow, not
// expired), whoever wrote it (an admin's throttle for the length of an
// import, qtop's t, holds the tenant as the autopilot's quota does); a
// quota rule in force that the autopilot wrote; an enforced budget in
// force that the autopilot wrote or that expires. A quota written by hand
// is the tenant's plan, posted again before it expires (every rule
// expires), and a budget with no expiry is standing: part of what the
// tenant's normal is. A price rule (a demotion) limits nothing, and a
// shadow rule or a warn budget is never applied: under them a tenant's
// load is its own.
func heldTenants(pol *policy.Policy, now time.Time) map[string]bool {
	var held map[string]bool
	hold := func(t string) {
		if held == nil {
			held = map[string]bool{}
		}
		held[t] = true
	}
	for _, r := range pol.Rules {
		pilot := strings.HasPrefix(r.CreatedBy, autopilot.CreatedByPrefix)
		if r.Tenant != "" && !r.Shadow && now.Before(r.Expires) && (r.Action == policy.Throttle || r.Action == policy.Quota && pilot) {
			hold(r.Tenant)
		}
	}
	for _, bu := range pol.Budgets {
		if bu.Mode != policy.Enforce || !bu.Expires.IsZero() && !now.Before(bu.Expires) || !temporary(bu.CreatedBy, bu.Expires) {
			continue
		}
		for _, m := range bu.Match {
			if t := m["tenant"]; t != "" {
				hold(t)
			}
		}
	}
	return held
}

// temporary reports whether a limit is one that holds a tenant down for
// a while (the autopilot's, or one that expires), not its standing plan.
func temporary(createdBy string, expires time.Time) bool {
	return strings.HasPrefix(createdBy, autopilot.CreatedByPrefix) || !expires.IsZero()
}

// minutesOf returns name's ring in m, made if there is room for it (nil
// if not).
func minutesOf(m map[string]*tenantMinutes, name string, most int) *tenantMinutes {
	tm := m[name]
	if tm == nil && len(m) < most {
		tm = &tenantMinutes{}
		m[name] = tm
	}
	return tm
}

// add adds one second's p95, share, RU/s and DB load to minute m.
func (tm *tenantMinutes) add(m int64, p95, share, ru, db float64) {
	slot := m % baselineSlots
	if tm.at[slot] != m {
		tm.at[slot], tm.p95[slot], tm.share[slot], tm.ru[slot], tm.db[slot], tm.n[slot] = m, 0, 0, 0, 0, 0
	}
	tm.p95[slot] += p95
	tm.share[slot] += share
	tm.ru[slot] += ru
	tm.db[slot] += db
	tm.n[slot]++
	tm.lastMinute = m
}

// turn starts minute m: the baselines are computed again from the
// complete minutes, and tenants idle for the whole hour are forgotten.
// It returns the book encoded to be saved (nil: not saved).
func (b *baselineBook) turn(m int64) []byte {
	b.minute = m
	clear(b.served)
	var ms minuteMeans
	for name, tm := range b.tenants {
		if m-tm.lastMinute > baselineSlots {
			delete(b.tenants, name)
			continue
		}
		if b.complete(tm, m, &ms); int64(len(ms.p95)) >= b.need {
			b.served[name] = [4]float64{median(ms.p95), median(ms.share), median(ms.ru), median(ms.db)}
		}
	}
	b.turnBefore(m)
	b.turnP95(b.services, b.servedSvc, m, &ms)
	b.turnP95(b.routes, b.servedRoute, m, &ms) // baselineroutes.go
	return b.encode()
}

// turnP95 computes the p95 baselines of rings (services, routes) into
// served at minute m's turn, and forgets the rings idle for the hour.
// ms is scratch.
func (b *baselineBook) turnP95(rings map[string]*tenantMinutes, served map[string]float64, m int64, ms *minuteMeans) {
	clear(served)
	for name, tm := range rings {
		if m-tm.lastMinute > baselineSlots {
			delete(rings, name)
			continue
		}
		if b.complete(tm, m, ms); int64(len(ms.p95)) >= b.need {
			served[name] = median(ms.p95)
		}
	}
}

// turnBefore computes each tenant's load over the complete minutes
// learnt (knows: at least need of them), its absent seconds counted as
// none: what the tracker takes for the load of a row it has not seen.
func (b *baselineBook) turnBefore(m int64) {
	clear(b.before)
	var full []int
	for i := range baselineSlots {
		if at := b.learnt.at[i]; b.learnt.n[i] >= b.seconds && at >= m-baselineSlots && at < m-b.gap {
			full = append(full, i)
		}
	}
	if b.knows = int64(len(full)) >= b.need; !b.knows {
		return
	}
	rs, ds := make([]float64, len(full)), make([]float64, len(full))
	for name, tm := range b.tenants {
		for k, i := range full {
			rs[k], ds[k] = 0, 0
			if n := float64(b.learnt.n[i]); tm.at[i] == b.learnt.at[i] {
				rs[k], ds[k] = tm.ru[i]/n, tm.db[i]/n
			}
		}
		b.before[name] = [2]float64{median(rs), median(ds)}
	}
}

// minuteMeans are a ring's means of the minutes a baseline is taken
// from, one of each per minute.
type minuteMeans struct{ p95, share, ru, db []float64 }

// complete sets ms (reused) to tm's means of the complete minutes a
// baseline at minute m is taken from.
func (b *baselineBook) complete(tm *tenantMinutes, m int64, ms *minuteMeans) {
	ms.p95, ms.share, ms.ru, ms.db = ms.p95[:0], ms.share[:0], ms.ru[:0], ms.db[:0]
	for i := range baselineSlots {
		if at := tm.at[i]; tm.n[i] >= b.seconds && at >= m-baselineSlots && at < m-b.gap {
			n := float64(tm.n[i])
			ms.p95, ms.share = append(ms.p95, tm.p95[i]/n), append(ms.share, tm.share[i]/n)
			ms.ru, ms.db = append(ms.ru, tm.ru[i]/n), append(ms.db, tm.db[i]/n)
		}
	}
}

// median of v (reordered), as the headline takes its quantiles.
func median(v []float64) float64 { return incident.Quantile(v, 0.5) }

// snapshot gives the live view's tenant rows their baselines: a row
// judged on DB load (one with DB load and no RU) its DB load's, the
// others their RU's, and the rows the book's detector flags, the
// untagged one too, since when and the baseline they were flagged
// against, so that a qtop reading once names the offenders a qtop that
// watched does.
func (b *baselineBook) snapshot(snap *api.Snapshot, _ time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := range snap.Services {
		snap.Services[i].BaselineP95Seconds = b.servedSvc[snap.Services[i].Service]
	}
	if (len(b.served) == 0 && len(b.flagged) == 0 && len(b.servedRoute) == 0) || (snap.GroupBy != "" && snap.GroupBy != api.GroupTenant) {
		return
	}
	for i := range snap.Tenants {
		r := &snap.Tenants[i]
		if bl, ok := b.served[r.Tenant]; ok && !r.Untagged {
			r.BaselineP95Seconds, r.BaselineShare, r.BaselineRUPerSec = bl[0], bl[1], bl[2]
			if r.RUPerSec == 0 && r.DBLoad > 0 {
				r.BaselineDBLoad = bl[3]
			}
		}
		b.serveRoutes(r)
		r.SlowSince = b.tr.SlowSince(r.Tenant)
		name := incident.Label(api.GroupTenant, r)
		for _, f := range b.flagged {
			if f.name == name {
				// Before the hour's baseline exists (and always for the
				// untagged row, which the book does not learn), the one
				// it was flagged against (its load before the rise).
				r.FlaggedSince = f.since
				if f.db && r.BaselineDBLoad == 0 {
					r.BaselineDBLoad = f.base
				} else if !f.db && r.BaselineRUPerSec == 0 {
					r.BaselineRUPerSec = f.base
				}
			}
		}
	}
}

// serviceBaseline returns the baseline p95 of a service (0: none yet).
func (b *baselineBook) serviceBaseline(name string) float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.servedSvc[name]
}

var _ feature = (*baselineBook)(nil)

func (b *baselineBook) merge(*report.Report, time.Time, bool) {}
func (b *baselineBook) reply(_ *report.Report, _ time.Time, r report.Reply, _ bool) report.Reply {
	return r
}
func (b *baselineBook) tick(context.Context, time.Time) {}
