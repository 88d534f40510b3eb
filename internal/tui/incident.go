package tui

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/qtop-dev/qtop/api"
)

// The summary summary ("who is hurting whom") is one line under the tabs.
//
// Drivers: rows with at least driverShare of the sorted measure whose
// load over the last driverRecent seconds of their history is at least
// driverFactor times their own baseline: the mean of the same history
// before those seconds (the source's 120 s, so about 110 s). A row with
// no load in its baseline is "new".
//
// Victims: tenants whose p95 latency is at least victimP95 times their
// own baseline while their load, as their share of the measure (RU),
// is at most victimLoad times its baseline: a tenant whose own work grew
// faster than the others' is not a victim. (The share, not the rate:
// rates climb for everyone while a source's window fills after a start.) The baseline of a tenant is taken from
// what this qtop saw of it between 120 s and 30 s ago (or, while it has
// watched for less than that, from the first baselineMin snapshots it
// saw): the lower quartile of its p95 (so that an incident filling part of
// that span does not become the baseline at once) and the median of its
// load. A baseline of the last hour needs the store's history, which the
// live stream does not carry.
// Drivers are never victims. PostgreSQL alone knows no latency: under
// qtop --postgres victims are n/a.
const (
	driverShare   = 0.2
	driverFactor  = 2.0
	driverRecent  = 10
	victimP95     = 1.5
	victimLoad    = 1.25
	baselineMin   = 5
	baselineSpan  = 120 // snapshots (about seconds) kept per tenant
	baselineRecnt = 30  // the most recent snapshots left out of a baseline
	// maxBaselines bounds the tenants followed (the source sends at most
	// 1000 rows).
	maxBaselines = 2000
)

// observation is what a snapshot said of one tenant.
type observation struct {
	n         int64 // snapshot number
	p95, load float64
}

// tenantBaseline is a ring of a tenant's last observations.
type tenantBaseline struct {
	obs  [baselineSpan]observation
	len  int // observations held
	head int // next slot
	// first holds the first baselineMin observations ever seen.
	first []observation
	// The baseline moves slowly: it is recomputed every baselineEvery
	// snapshots.
	at        int64
	p95, load float64
	ok        bool
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

func (b *tenantBaseline) add(o observation) {
	b.obs[b.head] = o
	b.head = (b.head + 1) % baselineSpan
	b.len = min(b.len+1, baselineSpan)
	if len(b.first) < baselineMin {
		b.first = append(b.first, o)
	}
}

// baseline returns the median p95 and load of the observations older
// than baselineRecnt snapshots before now, or of the first ones.
func (b *tenantBaseline) baseline(now int64, psp, lsp *[]float64) (p95, load float64, ok bool) {
	ps, ls := (*psp)[:0], (*lsp)[:0]
	defer func() { *psp, *lsp = ps, ls }()
	for i := range b.len {
		o := b.obs[(b.head-1-i+baselineSpan)%baselineSpan]
		if now-o.n >= baselineRecnt {
			ps, ls = append(ps, o.p95), append(ls, o.load)
		}
	}
	if len(ps) < baselineMin {
		if len(b.first) < baselineMin {
			return 0, 0, false
		}
		ps, ls = ps[:0], ls[:0]
		for _, o := range b.first {
			ps, ls = append(ps, o.p95), append(ls, o.load)
		}
	}
	return quantile(ps, 0.25), median(ls), true
}

func median(v []float64) float64 { return quantile(v, 0.5) }

// quantile sorts v and returns its q-quantile (nearest rank).
func quantile(v []float64, q float64) float64 {
	slices.Sort(v)
	return v[min(int(q*float64(len(v))), len(v)-1)]
}

// summary follows the tenants' baselines across snapshots and writes the
// summary line.
type summary struct {
	n     int64
	rows  map[string]*tenantBaseline
	seen  map[string]int64
	line  string
	alert bool      // drivers or victims were found
	ps    []float64 // scratch
	ls    []float64
}

// driver is one tenant driving load.
type driver struct {
	name   string
	share  float64
	factor float64 // 0: new
}

func (in *summary) add(s *api.Snapshot) {
	if in.rows == nil {
		in.rows, in.seen = map[string]*tenantBaseline{}, map[string]int64{}
	}
	in.n++
	group := s.GroupBy
	if group == "" {
		group = api.GroupTenant
	}
	measure := "RU"
	if s.Measure == api.MeasureDB || s.Source == api.SourcePostgres {
		measure = "DB load"
	}
	var drivers []driver
	var victims []float64
	for i := range s.Tenants {
		r := &s.Tenants[i]
		if r.Tenant == api.OtherTenant && !r.Untagged {
			continue
		}
		name := rowLabel(group, r)
		if d, ok := isDriver(r); ok {
			d.name = name
			drivers = append(drivers, d)
		}
		if s.Source == api.SourcePostgres || group != api.GroupTenant || r.Untagged {
			continue
		}
		load := r.Share
		b := in.rows[r.Tenant]
		if b == nil {
			if len(in.rows) >= maxBaselines {
				continue
			}
			b = &tenantBaseline{}
			in.rows[r.Tenant] = b
		}
		in.seen[r.Tenant] = in.n
		if p, l, ok := b.cached(in.n, &in.ps, &in.ls); ok && p > 0 && r.P95Seconds > 0 {
			if _, drv := isDriver(r); !drv && r.P95Seconds >= victimP95*p && load <= victimLoad*math.Max(l, 1e-9) {
				victims = append(victims, r.P95Seconds/p)
			}
		}
		if r.P95Seconds > 0 {
			b.add(observation{n: in.n, p95: r.P95Seconds, load: load})
		}
	}
	for name, n := range in.seen {
		if in.n-n > baselineSpan {
			delete(in.seen, name)
			delete(in.rows, name)
		}
	}
	in.alert = len(drivers) > 0 || len(victims) > 0
	in.line = summaryLine(s, group, measure, drivers, victims)
}

// summaryLine names the two largest drivers and sums up the victims.
func summaryLine(s *api.Snapshot, group, measure string, drivers []driver, victims []float64) string {
	slices.SortFunc(drivers, func(a, b driver) int { return cmp.Compare(b.share, a.share) })
	var parts []string
	for i, d := range drivers {
		if i == 2 {
			parts = append(parts, "+"+strconv.Itoa(len(drivers)-2)+" more")
			break
		}
		f := "new load"
		if d.factor > 0 {
			f = "×" + fmtFactor(d.factor) + " its baseline"
		}
		parts = append(parts, d.name+" "+strconv.FormatFloat(d.share*100, 'f', 0, 64)+"% of "+measure+", "+f)
	}
	if len(parts) == 0 {
		parts = append(parts, "no tenant drives load above its baseline")
	}
	switch {
	case s.Source == api.SourcePostgres:
		parts = append(parts, "victims n/a (latency needs application reports)")
	case group != api.GroupTenant:
		parts = append(parts, "victims: group by tenant")
	case len(victims) > 0:
		parts = append(parts, "victims: "+strconv.Itoa(len(victims))+" tenants, p95 ×"+fmtFactor(median(victims)))
	default:
		parts = append(parts, "victims: none")
	}
	return strings.Join(parts, " · ")
}

// isDriver reports whether r drives load against its own history.
func isDriver(r *api.TenantRow) (driver, bool) {
	if r.Share < driverShare || len(r.History) <= driverRecent {
		return driver{}, false
	}
	h := r.History
	var base, recent float64
	for _, v := range h[:len(h)-driverRecent] {
		base += v
	}
	for _, v := range h[len(h)-driverRecent:] {
		recent += v
	}
	base /= float64(len(h) - driverRecent)
	recent /= driverRecent
	switch {
	case base <= 0 && recent > 0:
		return driver{share: r.Share}, true
	case base > 0 && recent >= driverFactor*base:
		return driver{share: r.Share, factor: recent / base}, true
	}
	return driver{}, false
}

func fmtFactor(f float64) string {
	if f >= 10 {
		return strconv.FormatFloat(f, 'f', 0, 64)
	}
	return strconv.FormatFloat(f, 'f', 1, 64)
}
