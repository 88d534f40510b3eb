package incident

import (
	"strings"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/api"
)

// TestFirstJobOnAnIdleDatabase: qtop --postgres on a database with no
// active session, then a job (pgbench: four sessions busy) from second
// 30. The sampler saw the idle seconds (they are samples, not a source
// not started yet): the job is new load.
func TestFirstJobOnAnIdleDatabase(t *testing.T) {
	for _, src := range []string{api.SourcePostgres, api.SourceCollector} {
		var in Tracker
		hist := make([]float64, 0, 200)
		var h Headline
		for i := range 40 {
			s := api.Snapshot{Time: t0.Add(time.Duration(i) * time.Second), Source: src, Measure: api.MeasureDB, Window: 10 * time.Second}
			if src == api.SourceCollector {
				s.Collector.Uptime = time.Duration(i+1) * time.Second
				s.Collector.Sampler = true
			}
			load := 0.0
			if i >= 30 {
				load = 4
			}
			hist = append(hist, load)
			if load > 0 {
				h := make([]float64, api.HistoryLen)
				copy(h[api.HistoryLen-len(hist):], hist)
				s.Tenants = append(s.Tenants, api.TenantRow{Tenant: "pgbench", DBLoad: load, History: h})
			}
			h = in.Add(&s)
		}
		if len(h.Offenders) != 1 || !strings.HasPrefix(h.Line, "pgbench 100% of DB load, new load") {
			t.Errorf("%s: %q", src, h.Line)
		}
	}
}
