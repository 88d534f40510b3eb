package collector

import (
	"github.com/qtop-dev/qtop/budget"
	"github.com/qtop-dev/qtop/freshness"
	"github.com/qtop-dev/qtop/quota"
	"github.com/qtop-dev/qtop/report"
)

// reports decodes reports with every section the collector reads: the
// enforcement detail (merge.go, poolwait.go), quota usage (quota.go),
// freshness (freshness.go) and database budgets (budgets.go). It holds no
// state and is shared.
var reports = report.NewDecoder(quota.Usages(nil), freshness.Window{}, budget.Window{}, report.PolicyView{})
