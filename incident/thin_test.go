package incident

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/api"
)

// smallAt is second i of a quiet fleet: "large" (10 requests a second)
// and five small tenants (half a request a second: 5 in the 10 s
// window), every p95 20 ms. slowSmall(i) gives small-0's p95 at second
// i (0: 20 ms), slowLarge(i) large's.
func smallAt(i int, slowSmall, slowLarge func(int) float64) api.Snapshot {
	s := api.Snapshot{Time: t0.Add(time.Duration(i) * time.Second), Window: 10 * time.Second, Source: api.SourceCollector, Measure: api.MeasureRU}
	large := cmpOr(slowLarge(i), 0.02)
	s.Tenants = append(s.Tenants, api.TenantRow{Tenant: "large", RUPerSec: 50, ReqPerSec: 10, P95Seconds: large, Share: 0.5,
		History: make([]float64, api.HistoryLen)})
	for j := range 5 {
		p95 := 0.02
		if j == 0 {
			p95 = cmpOr(slowSmall(i), p95)
		}
		s.Tenants = append(s.Tenants, api.TenantRow{Tenant: fmt.Sprintf("small-%d", j), RUPerSec: 10, ReqPerSec: 0.5, P95Seconds: p95,
			Share: 0.1, History: make([]float64, api.HistoryLen)})
	}
	return s
}

func cmpOr(v, or float64) float64 {
	if v > 0 {
		return v
	}
	return or
}

// during returns a p95 of 100 ms over [from, to), else 0.
func during(from, to int) func(int) float64 {
	return func(i int) float64 {
		if i >= from && i < to {
			return 0.1
		}
		return 0
	}
}

// victimSeconds feeds smallAt from second 0 to end and returns the
// seconds (from 100 on) at which small-0 was named a victim.
func victimSeconds(t *testing.T, in *Tracker, end int, slowSmall, slowLarge func(int) float64) []int {
	t.Helper()
	var named []int
	for i := range end {
		s := smallAt(i, slowSmall, slowLarge)
		h := in.Add(&s)
		if i < 100 && len(h.Victims) > 0 {
			t.Fatalf("second %d, before any slowness: victims %+v", i, h.Victims)
		}
		if slices.ContainsFunc(h.Victims, func(v Victim) bool { return v.Tenant == "small-0" }) {
			named = append(named, i)
		}
	}
	return named
}

// TestOneSlowCallNamesNoVictim: a small tenant's p95 is its slowest call;
// one slow call in its window (p95 ×5 for the ten seconds the call stays
// in it) names no victim, slowness that outlasts the window does, a
// window late, and a small tenant slowed beside a large one is named at
// once.
func TestOneSlowCallNamesNoVictim(t *testing.T) {
	none := func(int) float64 { return 0 }
	var in Tracker
	if got := victimSeconds(t, &in, 140, during(100, 110), none); len(got) != 0 {
		t.Errorf("one slow call made small-0 a victim at seconds %v", got)
	}
	var in2 Tracker
	got := victimSeconds(t, &in2, 140, during(100, 125), none)
	if want := []int{111, 112, 113, 114, 115, 116, 117, 118, 119, 120, 121, 122, 123, 124}; !slices.Equal(got, want) {
		t.Errorf("slow for 25 s: named at %v, want %v (from 11 s on)", got, want)
	}
	var in3 Tracker
	got = victimSeconds(t, &in3, 140, during(100, 110), during(100, 110))
	if want := []int{100, 101, 102, 103, 104, 105, 106, 107, 108, 109}; !slices.Equal(got, want) {
		t.Errorf("slowed beside large: named at %v, want %v", got, want)
	}
}

// TestSlowSinceFromTheSource: a qtop that reads once, on the source's
// baselines, names a small tenant the source has seen slow for longer
// than the window, and not one slow for less; a collector serves when.
func TestSlowSinceFromTheSource(t *testing.T) {
	at := func(since time.Duration) Headline {
		s := smallAt(200, during(200, 201), func(int) float64 { return 0 })
		for i := range s.Tenants {
			s.Tenants[i].BaselineP95Seconds, s.Tenants[i].BaselineShare = 0.02, s.Tenants[i].Share
		}
		s.Tenants[1].SlowSince = s.Time.Add(-since)
		var in Tracker
		return in.Add(&s)
	}
	if h := at(5 * time.Second); len(h.Victims) != 0 {
		t.Errorf("slow for 5 s at the source: victims %+v", h.Victims)
	}
	h := at(30 * time.Second)
	if len(h.Victims) != 1 || h.Victims[0].Tenant != "small-0" || !h.Victims[0].Since.Equal(t0.Add(170*time.Second)) {
		t.Errorf("slow for 30 s at the source: victims %+v, want small-0 since second 170", h.Victims)
	}
	var in Tracker
	for i := range 115 {
		s := smallAt(i, during(100, 125), func(int) float64 { return 0 })
		in.Add(&s)
	}
	if got := in.SlowSince("small-0"); !got.Equal(t0.Add(100 * time.Second)) {
		t.Errorf("SlowSince(small-0) = %v, want second 100", got)
	}
	if got := in.SlowSince("small-1"); !got.IsZero() {
		t.Errorf("SlowSince(small-1) = %v, want zero", got)
	}
}

// TestMixOfFewRequestsNamesNoVictim: a tenant of two requests a second
// whose p95 passes its baseline only because two slow reports fell among
// its fast lists (its routes each as fast as usual; the figures of a
// quiet shopapp fleet) is no victim, read once on the collector's
// baselines; with its reports ×3 their usual, for longer than the
// window, it is, and its reports are named.
func TestMixOfFewRequestsNamesNoVictim(t *testing.T) {
	at := func(reports float64, since time.Duration) Headline {
		s := api.Snapshot{Time: t0, Window: 10 * time.Second, Source: api.SourceCollector, Measure: api.MeasureRU}
		s.Tenants = []api.TenantRow{{Tenant: "tenant-20", RUPerSec: 5, ReqPerSec: 2, P95Seconds: max(0.108, reports*0.8), Share: 0.05,
			BaselineP95Seconds: 0.063, BaselineShare: 0.05, SlowSince: t0.Add(-since), Routes: []api.RouteRow{
				{Route: "GET /products", ReqPerSec: 1.7, P95Seconds: 0.0041, BaselineP95Seconds: 0.0050},
				{Route: "GET /reports", ReqPerSec: 0.2, P95Seconds: reports, BaselineP95Seconds: 0.150},
				{Route: "POST /catalog/import", ReqPerSec: 0.1, P95Seconds: 0.0036, BaselineP95Seconds: 0.0144}}},
			{Tenant: "large", RUPerSec: 95, ReqPerSec: 50, P95Seconds: 0.02, Share: 0.95, BaselineP95Seconds: 0.02, BaselineShare: 0.95}}
		var in Tracker
		return in.Add(&s)
	}
	if h := at(0.159, 30*time.Second); len(h.Victims) != 0 {
		t.Errorf("routes as usual: victims %+v", h.Victims)
	}
	if h := at(0.45, 5*time.Second); len(h.Victims) != 0 {
		t.Errorf("reports ×3 for 5 s: victims %+v", h.Victims)
	}
	h := at(0.45, 30*time.Second)
	if len(h.Victims) != 1 || len(h.Victims[0].Routes) != 1 || h.Victims[0].Routes[0].Route != "GET /reports" {
		t.Errorf("reports ×3 for 30 s: victims %+v, want tenant-20 with GET /reports", h.Victims)
	}
}

// flapping returns a p95 of 100 ms over [from, to) but for the seconds
// in dips, else 0: a tenant whose p95 crosses the victim line back and
// forth.
func flapping(from, to int, dips ...int) func(int) float64 {
	return func(i int) float64 {
		if i < from || i >= to || slices.Contains(dips, i) {
			return 0
		}
		return 0.1
	}
}

// TestFlappingSmallVictimKeepsItsRun: a small tenant whose p95 dips
// under the line for a second or two (under VictimDip) and is slow again
// is slow without a break: Since keeps its start, it is named once that
// outlasts the window (alone: no offender, no large victim), in every
// second it passes the test, and the source serves the same start. Before,
// each dip began its run again and it was never named.
func TestFlappingSmallVictimKeepsItsRun(t *testing.T) {
	none := func(int) float64 { return 0 }
	dips := []int{104, 105, 109, 113, 114, 119, 120} // a second or two under the line
	var in Tracker
	got := victimSeconds(t, &in, 130, flapping(100, 125, dips...), none)
	var want []int
	for i := 111; i < 125; i++ {
		if !slices.Contains(dips, i) {
			want = append(want, i)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("flapping for 25 s: named at %v, want %v (slow seconds from 11 s on)", got, want)
	}
	var in2 Tracker
	for i := range 122 {
		s := smallAt(i, flapping(100, 125, dips...), none)
		h := in2.Add(&s)
		if i < 100 {
			continue
		}
		// Served through the dips too: a reader whose snapshot small-0
		// passes in takes it whether or not the source had judged that
		// second yet.
		if got := in2.SlowSince("small-0"); !got.Equal(t0.Add(100 * time.Second)) {
			t.Errorf("second %d: SlowSince = %v, want second 100 (the dips are no break)", i, got)
		}
		named := len(h.Victims) == 1 && h.Victims[0].Since.Equal(t0.Add(100*time.Second))
		if want := i > 110 && !slices.Contains(dips, i); named != want {
			t.Errorf("second %d: victims %+v, want small-0 since second 100: %v", i, h.Victims, want)
		}
	}
}

// TestRecoveredSmallVictimIsNotKept: a small tenant fast again for
// longer than VictimDip has recovered: its run ends there, and slow
// again it is named alone only once its new run outlasts the window.
func TestRecoveredSmallVictimIsNotKept(t *testing.T) {
	none := func(int) float64 { return 0 }
	// Slow 8 s, three snapshots under the line (4 s from the last pass
	// to the next: more than VictimDip), slow 8 s: two runs, neither
	// longer than the window.
	recovered := []int{108, 109, 110}
	var in Tracker
	if got := victimSeconds(t, &in, 140, flapping(100, 119, recovered...), none); len(got) != 0 {
		t.Errorf("slow 8 s, 3 s under the line, slow 8 s: named at %v, want never", got)
	}
	// Named after 11 s of its first run, it recovers for 5 s: the second
	// run starts afresh and is named 11 s into it.
	var in2 Tracker
	got := victimSeconds(t, &in2, 160, flapping(100, 150, 120, 121, 122, 123, 124), none)
	want := []int{111, 112, 113, 114, 115, 116, 117, 118, 119}
	for i := 136; i < 150; i++ {
		want = append(want, i)
	}
	if !slices.Equal(got, want) {
		t.Errorf("slow 20 s, fast 5 s, slow 25 s: named at %v, want %v", got, want)
	}
	var in3 Tracker
	for i := range 130 {
		s := smallAt(i, flapping(100, 130, 120, 121, 122, 123, 124), none)
		in3.Add(&s)
		var want time.Time // the run's start while it lasts
		switch {
		case i >= 100 && i < 123: // through 3 s after its last pass
			want = t0.Add(100 * time.Second)
		case i >= 125:
			want = t0.Add(125 * time.Second)
		}
		if got := in3.SlowSince("small-0"); !got.Equal(want) {
			t.Errorf("second %d: SlowSince = %v, want %v", i, got, want)
		}
	}
}

// TestSlowRunClockBackwards: a snapshot time that steps back (a clock
// set back a second) neither breaks a run nor puts its start after now.
func TestSlowRunClockBackwards(t *testing.T) {
	var b tenantBaseline
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	for n, tc := range []struct {
		sec  int
		want int
	}{{100, 100}, {101, 100}, {102, 100}, {101, 100}, {102, 100}, {50, 50}, {51, 50}} {
		if got := b.slow(true, at(tc.sec), time.Time{}, 3*time.Second); !got.Equal(at(tc.want)) {
			t.Errorf("step %d at second %d: since %v, want second %d", n, tc.sec, got.Sub(t0), tc.want)
		}
	}
}
