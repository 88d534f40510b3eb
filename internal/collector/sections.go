package collector

import (
	"github.com/qtop-dev/qtop/budget"
	"github.com/qtop-dev/qtop/freshness"
	"github.com/qtop-dev/qtop/quota"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/sqlcomment/tenantnames"
)

// reports decodes reports with every section the collector reads: the
// enforcement detail (merge.go, poolwait.go), quota usage (quota.go),
// freshness (freshness.go), database budgets (budgets.go) and the names
// behind session tagging's short ids (names.go). It holds no
// state and is shared.
var reports = report.NewDecoder(quota.Usages(nil), freshness.Window{}, budget.Window{}, report.PolicyView{}, tenantnames.Names(nil))
