package tui_test

import (
	"os"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/internal/tui"
)

// Print writes one snapshot as plain tables, as `qtop --once --format
// table` does for an incident note.
func ExamplePrint() {
	s := api.Snapshot{
		Time: time.Date(2026, 3, 9, 9, 14, 7, 0, time.UTC), Window: 10 * time.Second,
		Source: api.SourceCollector, Measure: api.MeasureRU, TenantsSeen: 3,
		Tenants: []api.TenantRow{
			{Tenant: "bigcorp", Tier: "T2", DBLoad: 12.7, RUPerSec: 4800, ReqPerSec: 12, P95Seconds: 1.84, Share: 0.8, Throttled: true},
			{Tenant: "acme", Tier: "T2", DBLoad: 1.4, RUPerSec: 786, ReqPerSec: 220, P95Seconds: 0.128, ErrPerSec: 1, Share: 0.13},
			{Tenant: api.OtherTenant, DBLoad: 0.3, RUPerSec: 400, ReqPerSec: 90, P95Seconds: 0.05, Share: 0.07},
		},
	}
	tui.Print(os.Stdout, s, tui.FormatTable)
	// Output:
	// qtop 2026-03-09T09:14:07Z · source collector · window 10s · 3 tenants with load, ordered by ru
	// headline: no tenant drives load above its baseline · victims: none
	//
	// TENANT   TIER  DB LOAD  RU/s  REQ/s  P95     ERR/s  SHARE  THROTTLED
	// bigcorp  T2    12.7     4800  12.0   1.84s   0      80.0%  yes
	// acme     T2    1.40     786   220    128ms   1.00   13.0%
	// other          0.30     400   90.0   50.0ms  0      7.0%
}
