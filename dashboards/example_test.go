package dashboards_test

import (
	"fmt"

	"github.com/qtop-dev/qtop/dashboards"
)

func ExampleParse() {
	q, err := dashboards.Parse(`topk(10, sum by (tenant) (rate(qtop_collector_tenant_db_seconds_total{job=~"$job"}[$__rate_interval])))
		/ ignoring (tenant) group_left sum(rate(qtop_collector_tenant_db_seconds_total[5m]))`)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(q.Metrics)
	fmt.Println(q.Labels, q.UsesLabel("tenant"))
	for _, s := range q.Selectors {
		fmt.Println(s.Func, s.Metric, s.Labels)
	}

	_, err = dashboards.Parse(`{__name__=~"qtop_.*"}`)
	fmt.Println(err != nil)
	// Output:
	// [qtop_collector_tenant_db_seconds_total]
	// [job tenant] true
	// rate qtop_collector_tenant_db_seconds_total [job]
	// rate qtop_collector_tenant_db_seconds_total []
	// true
}
