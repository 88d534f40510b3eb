package dashboards_test

import (
	"slices"
	"testing"
)

// TestCatalog: the catalog sees what the components register, including
// per-tenant series made by real load, and the code keeps its own rule:
// a metric with a tenant label is exported only through topn.
func TestCatalog(t *testing.T) {
	cat := codeCatalog(t)
	for _, n := range cat.Names() {
		m, _ := cat.Lookup(n)
		t.Logf("%-50s %-9s topn=%-5v labels=%v from=%v", n, m.Type, m.TopN, m.Labels, m.From)
		if slices.Contains(m.Labels, "tenant") && !m.TopN {
			t.Errorf("%s has a tenant label but is not exported through topn (unbounded cardinality)", n)
		}
		if m.TopN && !slices.Equal(m.Labels, []string{"tenant"}) {
			t.Errorf("%s is exported through topn with labels %v, want [tenant]", n, m.Labels)
		}
	}
	for _, name := range []string{"qtop_collector_tenant_db_seconds_total", "qtop_enforce_tenant_requests_total"} {
		var tenants []string
		for _, l := range cat.series(name) {
			tenants = append(tenants, l["tenant"])
		}
		slices.Sort(tenants)
		if !slices.Contains(tenants, "acme") || !slices.Contains(tenants, "bigco") {
			t.Errorf("%s: tenants %q, want acme and bigco from the load sent", name, tenants)
		}
	}
}
