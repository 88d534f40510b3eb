package incident

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/incident/incidenttest"
)

// incidentAt is second i of the scripted incident (incidenttest.At).
func incidentAt(i int) api.Snapshot { return incidenttest.At(t0, i) }

func TestTrackerDriversAndVictims(t *testing.T) {
	var in Tracker
	for i := range 40 {
		s := incidentAt(i)
		in.Add(&s)
	}
	if in.head.Alert() || !strings.Contains(in.head.Line, "no tenant drives load") || !strings.Contains(in.head.Line, "victims: none") {
		t.Fatalf("before the import: %q", in.head.Line)
	}
	for i := 40; i < 45; i++ {
		s := incidentAt(i)
		in.Add(&s)
	}
	if !in.head.Alert() || !strings.Contains(in.head.Line, "bigcorp 80% of RU, ×") || !strings.Contains(in.head.Line, "victims: 20 tenants, p95 ×2.0") {
		t.Fatalf("during the import: %q", in.head.Line)
	}
	// A tenant whose load rose with its latency is no victim: its share
	// of RU (1/21 before the import) grew although bigcorp took 80%.
	s := incidentAt(46)
	s.Tenants[1].RUPerSec, s.Tenants[1].Share = 90, 0.09
	in.Add(&s)
	if !strings.Contains(in.head.Line, "victims: 19 tenants") {
		t.Fatalf("with t00's own load up: %q", in.head.Line)
	}
}

func TestTrackerBaselineFromFirstSnapshots(t *testing.T) {
	// The tracker started during the incident's first seconds: the first
	// BaselineMin snapshots are the baseline until 30 s of history exist.
	var in Tracker
	for i := 35; i < 35+BaselineMin; i++ {
		s := incidentAt(i)
		in.Add(&s)
	}
	s := incidentAt(41)
	in.Add(&s)
	if !strings.Contains(in.head.Line, "victims: 20 tenants") {
		t.Fatalf("%q", in.head.Line)
	}
}

func TestTrackerPostgresAndGroups(t *testing.T) {
	// A postgres source has sampled since the start of the incident's
	// scenario (its history holds what the tracker has seen).
	var in Tracker
	var s api.Snapshot
	for i := range 51 {
		s = incidentAt(i)
		s.Source, s.Measure = api.SourcePostgres, api.MeasureDB
		for i := range s.Tenants {
			s.Tenants[i].DBLoad = s.Tenants[i].RUPerSec / 100
		}
		in.Add(&s)
	}
	if !strings.Contains(in.head.Line, "bigcorp 80% of DB load") || !strings.Contains(in.head.Line, "victims n/a") {
		t.Fatalf("postgres: %q", in.head.Line)
	}
	s = incidentAt(50)
	s.GroupBy = api.GroupApplication
	s.Tenants[0].Tenant, s.Tenants[0].Untagged = "", true
	in.Add(&s)
	if !strings.Contains(in.head.Line, "(no application_name) 80%") {
		t.Fatalf("grouped: %q", in.head.Line)
	}
}

func TestTrackerForgetsAndBounds(t *testing.T) {
	var in Tracker
	for i := range BaselineSpan + 2 {
		s := api.Snapshot{Source: api.SourceCollector}
		if i == 0 {
			s.Tenants = []api.TenantRow{{Tenant: "gone", RUPerSec: 1, P95Seconds: 0.01}}
		}
		in.Add(&s)
	}
	if len(in.rows) != 0 {
		t.Fatalf("%d baselines kept", len(in.rows))
	}
	s := manyTenants(3000)
	in.Add(&s)
	if len(in.rows) > MaxTracked {
		t.Fatalf("%d baselines", len(in.rows))
	}
}

// t0 is the first instant of the scripted snapshots.
var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// manyTenants is a snapshot of n tenants with varied figures.
func manyTenants(n int) api.Snapshot {
	s := api.Snapshot{Time: t0, Source: api.SourceCollector, Measure: api.MeasureRU, TenantsSeen: n}
	s.Tenants = make([]api.TenantRow, n)
	for i := range n {
		h := make([]float64, api.HistoryLen)
		for j := range 60 {
			h[api.HistoryLen-60+j] = float64(i) * float64(j+1) / 60
		}
		s.Tenants[i] = api.TenantRow{
			Tenant: fmt.Sprintf("tenant-%05d", i), Tier: fmt.Sprintf("T%d", i%4),
			DBLoad: float64(n-i) / 100, RUPerSec: float64((i*7919)%n) + 0.5, ReqPerSec: float64(i % 97),
			P95Seconds: float64(i%13) / 100, ErrPerSec: float64(i%5) / 10, Share: 1 / float64(n), History: h,
		}
	}
	return s
}

func BenchmarkTracker1000(b *testing.B) {
	s := manyTenants(1000)
	var in Tracker
	b.ReportAllocs()
	for b.Loop() {
		in.Add(&s)
	}
}

// TestOffenderStaysFlagged: the import goes on for ten minutes, long
// after its rise has left the history: bigcorp stays flagged against the
// baseline frozen when it was flagged, the line says how old that
// baseline is, the victims' baselines stay those from before it (an
// incident's seconds do not teach them), and the flag clears once its
// load is back near its baseline.
func TestOffenderStaysFlagged(t *testing.T) {
	var in Tracker
	for i := range 40 + 600 {
		s := incidentAt(i)
		in.Add(&s)
	}
	h := in.Headline()
	if len(h.Offenders) != 1 || h.Offenders[0].Name != "bigcorp" || h.Offenders[0].BaselineFrom != "qtop" ||
		!h.Offenders[0].Since.Equal(t0.Add(40*time.Second)) || !strings.Contains(h.Line, "its baseline of 9m ago") ||
		!strings.Contains(h.Line, "victims: 20 tenants") {
		t.Fatalf("ten minutes into the import: %q %+v", h.Line, h.Offenders)
	}
	// Back to 1.2× its baseline (1 RU/s): near enough, the flag clears.
	for i := 640; i < 640+DriverRecent; i++ {
		s := incidentAt(i)
		s.Tenants[0].RUPerSec, s.Tenants[0].History = 1.2, nil
		for k := range s.Tenants[1:] {
			s.Tenants[1+k].History = nil
		}
		in.Add(&s)
	}
	if h := in.Headline(); len(h.Offenders) != 0 {
		t.Fatalf("after the import: %q", h.Line)
	}
}

// TestOffenderAgainstCollectorBaseline: rows carrying the source's RU
// baseline are judged against it, so two trackers started at different
// times into an incident (one when it is already ten minutes old, its
// rise long gone from every history) name the same offender with the
// same factor; new load that meets a baseline at its own level clears.
func TestOffenderAgainstCollectorBaseline(t *testing.T) {
	withBase := func(i int, base float64) api.Snapshot {
		s := incidentAt(i)
		for k := range s.Tenants {
			r := &s.Tenants[k]
			r.BaselineRUPerSec, r.BaselineP95Seconds, r.BaselineShare = 10, 0.020, 0.01
		}
		s.Tenants[0].BaselineRUPerSec = base
		return s
	}
	var early, late Tracker
	for i := range 40 + 600 {
		s := withBase(i, 1)
		early.Add(&s)
		if i >= 600 {
			late.Add(&s)
		}
	}
	e, l := early.Headline(), late.Headline()
	if e.Line != l.Line || len(l.Offenders) != 1 || l.Offenders[0].Factor != 800 || l.Offenders[0].BaselineFrom != "collector" {
		t.Fatalf("early: %q\nlate:  %q %+v", e.Line, l.Line, l.Offenders)
	}
	// A tracker of a source without a baseline for bigcorp flags its
	// import against its own; once the source's baseline is bigcorp's
	// load now, it is back near its baseline.
	var fresh Tracker
	for i := 30; i < 60; i++ {
		s := withBase(i, 0)
		fresh.Add(&s)
	}
	if h := fresh.Headline(); len(h.Offenders) != 1 || h.Offenders[0].BaselineFrom != "qtop" {
		t.Fatalf("no baseline: %q", h.Line)
	}
	s := withBase(60, 800)
	fresh.Add(&s)
	if h := fresh.Headline(); len(h.Offenders) != 0 {
		t.Fatalf("baseline at its load: %q", h.Line)
	}
}

// TestOffenderNewNormal: an import that lasts longer than MaxFlag is
// the new normal: judged afresh, it is no longer an offender (its level
// fills its history).
func TestOffenderNewNormal(t *testing.T) {
	var in Tracker
	for i := range 40 + int(MaxFlag/time.Second) - 1 {
		s := incidentAt(i)
		in.Add(&s)
	}
	if h := in.Headline(); len(h.Offenders) != 1 {
		t.Fatalf("just under an hour: %q", h.Line)
	}
	for i := 40 + int(MaxFlag/time.Second); i < 40+int(MaxFlag/time.Second)+5; i++ {
		s := incidentAt(i)
		in.Add(&s)
	}
	if h := in.Headline(); len(h.Offenders) != 0 {
		t.Fatalf("an hour on: %q", h.Line)
	}
}

// TestSourceFlagHeldToClearRule: a collector serves the flags its
// detector set on the second before; a tenant throttled to nothing in
// the snapshot shown is not named "0% of RU" for that second.
func TestSourceFlagHeldToClearRule(t *testing.T) {
	flagged := func(i int, ru float64) api.Snapshot {
		s := incidentAt(i)
		s.Tenants[0].FlaggedSince, s.Tenants[0].BaselineRUPerSec = t0.Add(40*time.Second), 10
		s.Tenants[0].RUPerSec = ru
		return s
	}
	var in Tracker
	s := flagged(45, 800)
	in.Add(&s)
	if h := in.Headline(); len(h.Offenders) != 1 || h.Offenders[0].Name != "bigcorp" || h.Offenders[0].BaselineFrom != "collector" {
		t.Fatalf("flagged at its peak: %q %+v", h.Line, h.Offenders)
	}
	s = flagged(46, 0)
	in.Add(&s)
	if h := in.Headline(); len(h.Offenders) != 0 || strings.Contains(h.Line, "bigcorp") {
		t.Fatalf("throttled to nothing, still flagged by the source: %q", h.Line)
	}
	// Back at its baseline for the last seconds of its history (a share
	// above the clear line, recent load under DriverClear times the
	// baseline): cleared as well.
	var back Tracker
	s = flagged(46, 12)
	for k := range s.Tenants {
		s.Tenants[k].History = make([]float64, api.HistoryLen)
		s.Tenants[k].RUPerSec = 1
	}
	s.Tenants[0].RUPerSec = 12
	for j := range s.Tenants[0].History {
		s.Tenants[0].History[j] = 12
	}
	back.Add(&s)
	if h := back.Headline(); len(h.Offenders) != 0 {
		t.Fatalf("at its baseline, still flagged by the source: %q", h.Line)
	}
}
