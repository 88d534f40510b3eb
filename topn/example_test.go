package topn_test

import (
	"fmt"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/qtop-dev/qtop/topn"
)

func Example() {
	r, err := topn.New(2, topn.WithRankBy(topn.DBTime))
	if err != nil {
		fmt.Println(err)
		return
	}
	reg := prometheus.NewRegistry()
	_, err = topn.NewCollector(reg, r, "tenant",
		topn.Metric{Measure: topn.DBTime, Name: "qtop_collector_tenant_db_seconds_total", Help: "Database time by tenant."})
	if err != nil {
		fmt.Println(err)
		return
	}
	// One request each: DB seconds, RU, requests, errors, bytes.
	r.Add("acme", topn.Values{2.5, 40, 1, 0, 4096})
	r.Add("globex", topn.Values{0.5, 8, 1, 1, 512})
	r.Add("initech", topn.Values{0.25, 2, 1, 0, 128}) // N = 2: folded into other
	for _, row := range r.Cut() {
		fmt.Printf("%-7s db=%.2fs requests=%v\n", row.Key, row.Values[topn.DBTime], row.Values[topn.Requests])
	}
	err = testutil.CollectAndCompare(reg, strings.NewReader(`
# HELP qtop_collector_tenant_db_seconds_total Database time by tenant.
# TYPE qtop_collector_tenant_db_seconds_total counter
qtop_collector_tenant_db_seconds_total{tenant="acme"} 2.5
qtop_collector_tenant_db_seconds_total{tenant="globex"} 0.5
qtop_collector_tenant_db_seconds_total{tenant="other"} 0.25
`))
	fmt.Fprintln(os.Stdout, "exposition matches:", err == nil)
	// Output:
	// acme    db=2.50s requests=1
	// globex  db=0.50s requests=1
	// other   db=0.25s requests=1
	// exposition matches: true
}
