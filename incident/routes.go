package incident

import (
	"cmp"
	"slices"

	"github.com/qtop-dev/qtop/api"
)

// Route baselines: a tenant whose routes differ in speed (a list that
// answers in 2 ms, a report that takes 50) shows a p95 that follows its
// mix of requests: ten seconds with a few reports more double it while
// nothing is slower. So a tenant whose p95 passes the victim test is a
// victim only if one of its routes is slower than that route's own
// baseline, once the Tracker knows a baseline for any of them (after a
// route's first BaselineMin snapshots); until then the tenant's p95
// decides alone. A route's baseline is the source's when its row carries
// one (api.RouteRow.BaselineP95Seconds, from a collector that keeps
// baselines). Against a collector's tenant baseline only the collector's
// route baselines count: they are the same for every qtop that reads it,
// while the Tracker's own depend on when this qtop started.

const (
	// routeDecade is the snapshots one entry of a route's baseline sums
	// up (the median of the route's p95 over them).
	routeDecade = 10
	// routeEntries is the decades a route's baseline keeps: BaselineSpan
	// snapshots.
	routeEntries = BaselineSpan / routeDecade
	// routeMinEntries is the fewest decades older than BaselineRecent a
	// route's baseline is taken from.
	routeMinEntries = 3
	// maxRoutes bounds the routes followed per tenant (a row carries at
	// most 10); the one seen least recently makes room.
	maxRoutes = 16
	// MinRouteRequests is the fewest requests in a snapshot's window a
	// route is judged on: a p95 of fewer is about their maximum, and a
	// route called a few times a window (an import) is "slower than its
	// baseline" in one window of three.
	MinRouteRequests = 20
)

// routeBaseline is one route's p95 history, a decade per entry.
type routeBaseline struct {
	ring [routeEntries]float32 // decade medians
	at   [routeEntries]int32   // their decade numbers
	len  int
	head int
	cur  [routeDecade]float32 // the current decade's p95s (learnt ones)
	ncur int
	dcur int64 // the current decade's number
	seen int64 // the last snapshot the route was in
	// first holds the first BaselineMin p95s ever seen: the baseline
	// while fewer decades are old enough, as a tenant's first
	// observations are.
	first  [BaselineMin]float32
	nfirst int
}

// add keeps the route's p95 of snapshot n; learn false keeps nothing
// (an incident is on).
func (rb *routeBaseline) add(n int64, p95 float64, learn bool) {
	rb.seen = n
	if d := n / routeDecade; d != rb.dcur {
		rb.close()
		rb.dcur = d
	}
	if p95 > 0 && rb.nfirst < BaselineMin {
		rb.first[rb.nfirst] = float32(p95)
		rb.nfirst++
	}
	if learn && p95 > 0 && rb.ncur < routeDecade {
		rb.cur[rb.ncur] = float32(p95)
		rb.ncur++
	}
}

// close ends the current decade: its median becomes an entry.
func (rb *routeBaseline) close() {
	if rb.ncur == 0 {
		return
	}
	var tmp [routeDecade]float64
	for i, v := range rb.cur[:rb.ncur] {
		tmp[i] = float64(v)
	}
	rb.ring[rb.head], rb.at[rb.head] = float32(median(tmp[:rb.ncur])), int32(rb.dcur)
	rb.head = (rb.head + 1) % routeEntries
	rb.len = min(rb.len+1, routeEntries)
	rb.ncur = 0
}

// baseline is the lower quartile of the decades that ended at least
// BaselineRecent snapshots before n, or, with fewer than routeMinEntries
// of them, of the route's first BaselineMin p95s; ok false before those.
func (rb *routeBaseline) baseline(n int64, scratch *[]float64) (float64, bool) {
	ps := (*scratch)[:0]
	defer func() { *scratch = ps }()
	for i := range rb.len {
		j := (rb.head - 1 - i + routeEntries) % routeEntries
		if (int64(rb.at[j])+1)*routeDecade <= n-BaselineRecent {
			ps = append(ps, float64(rb.ring[j]))
		}
	}
	if len(ps) < routeMinEntries {
		if rb.nfirst < BaselineMin {
			return 0, false
		}
		ps = ps[:0]
		for _, v := range rb.first {
			ps = append(ps, float64(v))
		}
	}
	return Quantile(ps, 0.25), true
}

// routeVerdict is what a tenant's routes say of it (Tracker.routes).
type routeVerdict struct {
	// known: a route of the tenant with MinRouteRequests in the window
	// has a baseline (the source's, or with own the Tracker's); hurt are
	// those routes slower than their baseline by VictimP95, slowest
	// first (at most 3).
	known bool
	hurt  []RouteHurt
	// thinKnown and thinHurt: the same of the routes with fewer requests
	// (thin.go).
	thinKnown bool
	thinHurt  []RouteHurt
}

// routes follows the routes of r (its tenant's baseline b) and judges
// each that has a baseline against it.
func (in *Tracker) routes(b *tenantBaseline, r *api.TenantRow, learn, own bool) (rv routeVerdict) {
	for _, rt := range r.Routes {
		rb := b.routes[rt.Route]
		if rb == nil {
			if b.routes == nil {
				b.routes = map[string]*routeBaseline{}
			}
			if len(b.routes) >= maxRoutes {
				b.dropRoute()
			}
			rb = &routeBaseline{dcur: in.n / routeDecade}
			b.routes[rt.Route] = rb
		}
		p, ok := rt.BaselineP95Seconds, rt.BaselineP95Seconds > 0
		if !ok && own {
			p, ok = rb.baseline(in.n, &in.ps)
		}
		if ok && rt.P95Seconds > 0 && rt.ReqPerSec > 0 {
			known, hurt := &rv.known, &rv.hurt
			if rt.ReqPerSec*in.window < MinRouteRequests {
				known, hurt = &rv.thinKnown, &rv.thinHurt
			}
			*known = true
			if rt.P95Seconds >= VictimP95*p {
				*hurt = append(*hurt, RouteHurt{Route: rt.Route, P95Seconds: rt.P95Seconds})
			}
		}
		rb.add(in.n, rt.P95Seconds, learn)
	}
	for _, h := range []*[]RouteHurt{&rv.hurt, &rv.thinHurt} {
		slices.SortFunc(*h, func(a, b RouteHurt) int { return cmp.Compare(b.P95Seconds, a.P95Seconds) })
		*h = (*h)[:min(len(*h), 3)]
	}
	return rv
}

// dropRoute forgets the route seen least recently.
func (b *tenantBaseline) dropRoute() {
	var oldest string
	for name, rb := range b.routes {
		if oldest == "" || rb.seen < b.routes[oldest].seen {
			oldest = name
		}
	}
	delete(b.routes, oldest)
}
