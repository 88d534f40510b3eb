package collector

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/incident"
)

// quietAt is second sec of a quiet fleet on a collector up since second
// 0: "large" (10 requests a second) and five small tenants (half a
// request a second: 5 in the 10 s window), every p95 20 ms but small-0's
// when slow(sec).
func quietAt(start time.Time, sec int, slow func(int) bool) api.Snapshot {
	s := api.Snapshot{Time: start.Add(time.Duration(sec) * time.Second), Window: 10 * time.Second, Source: api.SourceCollector,
		Measure: api.MeasureRU, Collector: api.CollectorStatus{Uptime: time.Duration(sec+1) * time.Second}}
	row := func(name string, ru, req, p95 float64) api.TenantRow {
		h := make([]float64, api.HistoryLen)
		for i := range h {
			h[i] = ru
		}
		return api.TenantRow{Tenant: name, RUPerSec: ru, ReqPerSec: req, P95Seconds: p95, Share: ru / 100, History: h}
	}
	s.Tenants = append(s.Tenants, row("large", 50, 10, 0.02))
	for j := range 5 {
		p95 := 0.02
		if j == 0 && slow(sec) {
			p95 = 0.1
		}
		s.Tenants = append(s.Tenants, row(fmt.Sprintf("small-%d", j), 10, 0.5, p95))
	}
	return s
}

// TestFlappingVictimSameForEveryQtop: a small tenant whose p95 flaps
// across the victim line (a second or two under it, then slow again),
// with no offender and no large victim beside it, is named once its
// slowness outlasts the window, by a qtop that watched and by one
// reading once alike: the collector serves the run's start
// (api.TenantRow.SlowSince) through the dips. Before, each dip began its
// run again and neither named it.
func TestFlappingVictimSameForEveryQtop(t *testing.T) {
	b := newBaselineBook()
	b.gap, b.need = 1, 2 // baselines served after four minutes
	start := time.Date(2026, 12, 4, 4, 0, 0, 0, time.UTC)
	const from = 300 // small-0 slow from here, for 40 s
	dips := []int{from + 4, from + 5, from + 9, from + 13, from + 14, from + 20, from + 26, from + 27}
	slow := func(sec int) bool { return sec >= from && sec < from+40 && !slices.Contains(dips, sec) }
	names := func(h incident.Headline) []string {
		var n []string
		for _, v := range h.Victims {
			n = append(n, v.Tenant)
		}
		return n
	}
	var live incident.Tracker
	var named []int
	for sec := range from + 50 {
		s := quietAt(start, sec, slow)
		b.snapshot(&s, s.Time)
		b.add(&s, nil, nil)
		if sec == from-1 && rowOf(s, "small-0").BaselineP95Seconds <= 0 {
			t.Fatalf("no baseline served before small-0 slows: %+v", rowOf(s, "small-0"))
		}
		ho := readOnce(t, s) // baselinepg_test.go
		hl := live.Add(&s)
		if sec >= from-10 && !slices.Equal(names(hl), names(ho)) {
			t.Errorf("second %d: a qtop that watched names %v, one reading once %v (served slow since %v)",
				sec-from, names(hl), names(ho), rowOf(s, "small-0").SlowSince)
		}
		if slices.Equal(names(hl), []string{"small-0"}) {
			named = append(named, sec-from)
		}
	}
	var want []int
	for i := 11; i < 40; i++ {
		if !slices.Contains(dips, from+i) {
			want = append(want, i)
		}
	}
	if !slices.Equal(named, want) {
		t.Errorf("small-0 named at seconds %v of its slowness, want %v (its slow seconds once it outlasts the window)", named, want)
	}
}
