package incident

import (
	"strings"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/api"
)

// fleetAt is second i of a collector started at second 0 whose fleet
// starts reporting at second from: three tenants of steady load (50, 30
// and 20 RU/s), and from second late a fourth, newco (100 RU/s). hist
// holds each tenant's load per second so far (the collector's history).
func fleetAt(i, from, late int, hist map[string][]float64) api.Snapshot {
	s := api.Snapshot{Time: t0.Add(time.Duration(i) * time.Second), Source: api.SourceCollector, Measure: api.MeasureRU,
		Window: 10 * time.Second, Collector: api.CollectorStatus{Uptime: time.Duration(i) * time.Second}}
	for _, tn := range []struct {
		name  string
		ru    float64
		start int
	}{{"acme", 50, from}, {"globex", 30, from}, {"initech", 20, from}, {"newco", 100, late}} {
		ru := 0.0
		if i >= tn.start {
			ru = tn.ru
		}
		h := make([]float64, api.HistoryLen)
		all := hist[tn.name]
		copy(h[max(api.HistoryLen-len(all), 0):], all[max(len(all)-api.HistoryLen, 0):])
		hist[tn.name] = append(all, ru)
		if ru > 0 || len(all) > 0 && all[len(all)-1] > 0 {
			s.Tenants = append(s.Tenants, api.TenantRow{Tenant: tn.name, RUPerSec: ru, P95Seconds: 0.02, History: h})
		}
	}
	return s
}

// TestFleetStartedAfterTheCollectorIsNotNewLoad: a collector (or a
// qtop) that started 20 s before its fleet sees every tenant's history
// begin with zeros. Those seconds are the source's, before any load: the
// steady tenants are not new load (before, acme and globex were named
// "new load" from their first second, and stayed so until the
// collector's baselines formed, 5–8 minutes later), nor a rise against
// their first seconds. A tenant whose load starts later, while the
// others had theirs, still is.
func TestFleetStartedAfterTheCollectorIsNotNewLoad(t *testing.T) {
	const from, late = 20, 150
	var in Tracker
	hist := map[string][]float64{}
	for i := 1; i < late+15; i++ {
		s := fleetAt(i, from, late, hist)
		h := in.Add(&s)
		if i < late && len(h.Offenders) > 0 {
			t.Fatalf("second %d (the fleet from %d): %q", i, from, h.Line)
		}
	}
	if h := in.Headline(); len(h.Offenders) != 1 || !strings.HasPrefix(h.Line, "newco 50% of RU, new load") {
		t.Fatalf("newco, from second %d: %q", late, h.Line)
	}
	// The same fleet on a tracker that has watched it from a second after
	// its start, judging it with no collector behind it.
	var again Tracker
	hist = map[string][]float64{}
	for i := 1; i < late; i++ {
		s := fleetAt(i, from, late, hist)
		s.Collector = api.CollectorStatus{} // no uptime: the history is 120 s, zeros before the fleet
		if h := again.Add(&s); len(h.Offenders) > 0 {
			t.Fatalf("second %d, without uptime: %q", i, h.Line)
		}
	}
}
