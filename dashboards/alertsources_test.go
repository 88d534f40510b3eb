package dashboards_test

import (
	"strings"
	"testing"

	"github.com/qtop-dev/qtop/dashboards"
)

// TestEveryAlertIsFedByTheCollector: each alert, with the recording rules
// it reads followed to their sources, reads only series that the
// collector registers, so that Prometheus scraping the collector alone
// can fire every alert (QtopT1Shedding once read only the processes'
// own qtop_enforce_tier_shed, and could never fire that way).
func TestEveryAlertIsFedByTheCollector(t *testing.T) {
	cat := codeCatalog(t)
	rules := loadRules(t)
	records := map[string]string{}
	for _, r := range rules {
		if r.Record != "" {
			records[r.Record] = r.Expr
		}
	}
	var sources func(expr string, depth int) []string
	sources = func(expr string, depth int) []string {
		q, err := dashboards.Parse(expr)
		if err != nil {
			t.Fatalf("%q: %v", expr, err)
		}
		var out []string
		for _, m := range q.Metrics {
			if e, ok := records[m]; ok && depth < 8 {
				out = append(out, sources(e, depth+1)...)
				continue
			}
			out = append(out, m)
		}
		return out
	}
	alerts := 0
	for _, r := range rules {
		if r.Alert == "" {
			continue
		}
		alerts++
		ms := sources(r.Expr, 0)
		if len(ms) == 0 {
			t.Errorf("alert %s reads no series", r.Alert)
		}
		for _, name := range ms {
			m, ok := cat.Lookup(strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count"))
			if !ok {
				t.Errorf("alert %s reads %s, which no component registers", r.Alert, name)
				continue
			}
			fromCollector := false
			for _, f := range m.From {
				fromCollector = fromCollector || strings.HasPrefix(f, "collector")
			}
			if !fromCollector {
				t.Errorf("alert %s reads %s, registered only by %v: scraping the collector cannot fire it", r.Alert, name, m.From)
			}
		}
	}
	if alerts == 0 {
		t.Fatal("no alert in the rules")
	}
}
