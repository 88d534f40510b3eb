package collector

import (
	"strings"

	"github.com/qtop-dev/qtop/api"
)

// Route baselines: each tenant's routes' p95, kept as its own p95 is
// (a ring of minutes, the median of the complete minutes' means) and
// served on its route rows (api.RouteRow.BaselineP95Seconds). The
// headline's victim test asks for a route slower than its own baseline
// (incident/routes.go): a tenant whose p95 rose only because its mix moved
// toward its slow routes is no victim, on every qtop alike.
//
// maxBaselineRoutes bounds the routes followed, all tenants together
// (each ring about 3 KB in memory, up to 14 MB of the saved file): the
// first ones seen take the room, and a tenant whose routes found none is
// judged on its own p95 as before.
const maxBaselineRoutes = maxBaselineTenants

// routeKey names a tenant's route in the book.
func routeKey(tenant, route string) string { return tenant + "\x00" + route }

// learnRoutes adds one second of r's routes to minute m. b.mu is held.
func (b *baselineBook) learnRoutes(r *api.TenantRow, m int64) {
	for _, rt := range r.Routes {
		if rt.P95Seconds <= 0 {
			continue
		}
		if tm := minutesOf(b.routes, routeKey(r.Tenant, rt.Route), maxBaselineRoutes); tm != nil {
			tm.add(m, rt.P95Seconds, 0, 0, 0)
		}
	}
}

// serveRoutes gives r's route rows their baselines. b.mu is held.
func (b *baselineBook) serveRoutes(r *api.TenantRow) {
	if len(b.servedRoute) == 0 {
		return
	}
	for j := range r.Routes {
		r.Routes[j].BaselineP95Seconds = b.servedRoute[routeKey(r.Tenant, r.Routes[j].Route)]
	}
}

// eraseRoutes forgets the routes of tenant name; it reports whether there
// were any.
func (b *baselineBook) eraseRoutes(name string) bool {
	found := false
	for key := range b.routes {
		if t, _, _ := strings.Cut(key, "\x00"); t == name {
			delete(b.routes, key)
			found = true
		}
	}
	return found
}
