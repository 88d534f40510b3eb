package incident

import (
	"strings"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/api"
)

// dbOnlyAt is second i of an incident no process reports: two tenants
// with requests (RU 10/s, DB load 0.5 each, p95 20 ms) and, from second
// 40, a job's sessions (pgnoisy: DB load 4, no RU) that double the
// others' p95 and, their statements waiting longer, their DB load.
func dbOnlyAt(i int) api.Snapshot {
	s := api.Snapshot{Time: t0.Add(time.Duration(i) * time.Second), Source: api.SourceCollector, Measure: api.MeasureRU}
	p95, db := 0.020, 0.5
	if i >= 40 {
		p95, db = 0.041, 1.5
		s.Tenants = append(s.Tenants, api.TenantRow{Tenant: "pgnoisy", DBLoad: 4, History: make([]float64, api.HistoryLen)})
	}
	for _, n := range []string{"acme", "globex"} {
		s.Tenants = append(s.Tenants, api.TenantRow{Tenant: n, RUPerSec: 10, DBLoad: db, P95Seconds: p95, Share: 0.5,
			History: make([]float64, api.HistoryLen)})
	}
	return s
}

// TestDBOnlyOffender: a tenant whose load is database sessions no agent
// or gate reports has no RU, so a headline of RU never named it while
// its victims were listed. It is judged on DB load; the victims, whose
// DB load rose ×3 with their waits, are not (they have RU).
func TestDBOnlyOffender(t *testing.T) {
	var in Tracker
	for i := range 45 {
		s := dbOnlyAt(i)
		in.Add(&s)
	}
	h := in.Headline()
	if len(h.Offenders) != 1 || h.Offenders[0].Name != "pgnoisy" || h.Offenders[0].Measure != "DB load" || h.Measure != "RU" {
		t.Fatalf("offenders %+v (%q)", h.Offenders, h.Line)
	}
	if want := "pgnoisy 57% of DB load, new load · victims: 2 tenants, p95 ×2.0 (key 8)"; h.Line != want {
		t.Fatalf("line %q, want %q", h.Line, want)
	}
	// The job ends: no offender, and its flag does not linger (the
	// victims' baselines learn again).
	for i := range 20 {
		s := dbOnlyAt(i)
		s.Time = t0.Add(time.Duration(45+i) * time.Second)
		in.Add(&s)
	}
	if h := in.Headline(); h.Alert() || in.incident(t0.Add(65*time.Second)) {
		t.Fatalf("after the job: %q, flags %v", h.Line, in.flags)
	}
}

// TestDBOnlyOffenderFlaggedBySource: a qtop started after the job began
// names it as the collector's detector flagged it, on the DB load it was
// flagged against (api.TenantRow.BaselineDBLoad), and clears it when its
// load is back near that.
func TestDBOnlyOffenderFlaggedBySource(t *testing.T) {
	var in Tracker
	s := dbOnlyAt(50)
	s.Tenants[0].FlaggedSince, s.Tenants[0].BaselineDBLoad = t0.Add(40*time.Second), 0.5
	in.Add(&s)
	h := in.Headline()
	if len(h.Offenders) != 1 || h.Offenders[0].BaselineFrom != "collector" || !strings.Contains(h.Line, "pgnoisy 57% of DB load, ×8.0 its baseline") {
		t.Fatalf("flagged by the source: %q %+v", h.Line, h.Offenders)
	}
	s = dbOnlyAt(51)
	s.Tenants[0].FlaggedSince, s.Tenants[0].BaselineDBLoad, s.Tenants[0].DBLoad = t0.Add(40*time.Second), 3, 4
	in.Add(&s)
	if h := in.Headline(); len(h.Offenders) != 0 {
		t.Fatalf("under %v× its baseline, still named: %q", DriverClear, h.Line)
	}
}

// TestDBOnlyLoadAtStart: a job whose sessions run when the tracker
// starts (every row is new to a collector just started) is not named as
// new load a few seconds later; nor is a small job on a quiet database
// (less than MinDBLoad), however large its share.
func TestDBOnlyLoadAtStart(t *testing.T) {
	var in Tracker
	for i := 40; i < 100; i++ {
		s := dbOnlyAt(i)
		in.Add(&s)
		if h := in.Headline(); len(h.Offenders) != 0 {
			t.Fatalf("second %d of a job running at the start: %q", i-40, h.Line)
		}
	}
	var quiet Tracker
	for i := range 60 {
		s := dbOnlyAt(0)
		s.Time = t0.Add(time.Duration(i) * time.Second)
		if i >= 30 {
			s.Tenants = append(s.Tenants, api.TenantRow{Tenant: "pgsmall", DBLoad: 0.4, History: make([]float64, api.HistoryLen)})
		}
		quiet.Add(&s)
		if h := quiet.Headline(); len(h.Offenders) != 0 {
			t.Fatalf("second %d, a job of 0.4 sessions: %q", i, h.Line)
		}
	}
}

// TestDBOnlyRowAtACollectorStart: a qtop that watches a collector from
// its start (qtop demo, or one that stays connected across a restart)
// sees every rate climb while the collector's 10 s window fills. A job
// no process reports, steady from the start (DB load 2, no RU), is no
// offender to it, as it is none to a qtop started later and to the
// collector's own detector, which judges no second of the fill. Before,
// it was "×3 its baseline" from second 16 on, against the fill's mean,
// and stayed so.
func TestDBOnlyRowAtACollectorStart(t *testing.T) {
	var in Tracker
	for i := 1; i <= 90; i++ {
		up := time.Duration(i) * time.Second
		fill := min(float64(i)/10, 1) // the window's part filled
		s := api.Snapshot{Time: t0.Add(up), Window: 10 * time.Second, Source: api.SourceCollector, Measure: api.MeasureRU,
			Collector: api.CollectorStatus{Uptime: up}}
		ru := make([]float64, api.HistoryLen) // per second: exact from the start
		for j := max(api.HistoryLen-i, 0); j < api.HistoryLen; j++ {
			ru[j] = 10
		}
		s.Tenants = []api.TenantRow{{Tenant: "acme", RUPerSec: 10 * fill, DBLoad: 0.5 * fill, P95Seconds: 0.02, Share: 1, History: ru},
			{Tenant: "pgjob", DBLoad: 2 * fill, History: make([]float64, api.HistoryLen)}}
		if h := in.Add(&s); len(h.Offenders) != 0 {
			t.Fatalf("second %d of the collector: %q", i, h.Line)
		}
	}
}

// TestSourceFlagsEveryRow: a qtop reading once (one snapshot, a fresh
// tracker) names what the collector's detector flagged, against the
// baseline it sends, for the untagged row too and on a headline of DB
// load (a collector whose only source is PostgreSQL's sampler), and
// judges a row with DB load and no RU against the DB-load baseline the
// collector learnt. Before, the untagged row's flag and every flag on a
// headline of DB load went unread, and such rows were judged on the
// snapshot's history alone.
func TestSourceFlagsEveryRow(t *testing.T) {
	// hist is 120 s of load: before, then last for the last n seconds.
	hist := func(before, last float64, n int) []float64 {
		h := make([]float64, api.HistoryLen)
		for j := range h {
			h[j] = before
			if j >= api.HistoryLen-n {
				h[j] = last
			}
		}
		return h
	}
	flagged := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	pg := func(r api.TenantRow) api.Snapshot { // a sampler-only collector: a headline of DB load
		return api.Snapshot{Time: flagged.Add(3 * time.Minute), Window: 10 * time.Second, Source: api.SourcePostgres, Measure: api.MeasureRU,
			Collector: api.CollectorStatus{Uptime: time.Hour, Sampler: true},
			Tenants:   []api.TenantRow{{Tenant: "acme", DBLoad: 1, History: hist(1, 1, 0)}, r}}
	}
	ru := func(r api.TenantRow) api.Snapshot { // processes report: a headline of RU
		return api.Snapshot{Time: flagged.Add(3 * time.Minute), Window: 10 * time.Second, Source: api.SourceCollector, Measure: api.MeasureRU,
			Collector: api.CollectorStatus{Uptime: time.Hour},
			Tenants:   []api.TenantRow{{Tenant: "acme", RUPerSec: 10, DBLoad: 1, P95Seconds: 0.02, History: hist(10, 10, 0)}, r}}
	}
	untagged := api.TenantRow{Tenant: "(untagged)", Untagged: true, FlaggedSince: flagged}
	for _, tc := range []struct {
		name string
		s    api.Snapshot
		want string // the line's offenders
	}{{
		// A job run again: its first run is in the history, the flag of
		// its new load held since.
		"untagged, headline of DB load", pg(with(untagged, func(r *api.TenantRow) { r.DBLoad, r.History = 4, hist(0, 4, 40) })),
		"(untagged) 80% of DB load, new load",
	}, {
		"tagged, headline of DB load", pg(api.TenantRow{Tenant: "pgjob", DBLoad: 4, History: hist(4, 4, 0), FlaggedSince: flagged, BaselineDBLoad: 1}),
		"pgjob 80% of DB load, ×4.0 its baseline",
	}, {
		"untagged, no RU, headline of RU", ru(with(untagged, func(r *api.TenantRow) { r.DBLoad, r.History = 4, hist(0, 0, 0) })),
		"(untagged) 80% of DB load, new load",
	}, {
		"untagged with RU", ru(with(untagged, func(r *api.TenantRow) { r.RUPerSec, r.BaselineRUPerSec, r.History = 40, 10, hist(40, 40, 0) })),
		"(untagged) 80% of RU, ×4.0 its baseline",
	}, {
		// Back at the level it keeps most of the hour, which its history
		// alone (the last 30 s of 120) takes for a rise of ×5.5.
		"unflagged, at its DB-load baseline", pg(api.TenantRow{Tenant: "pgjob", DBLoad: 2, History: hist(0, 2, 30), BaselineDBLoad: 2}),
		"no tenant drives load above its baseline",
	}, {
		"unflagged, above its DB-load baseline", pg(api.TenantRow{Tenant: "pgjob", DBLoad: 5, History: hist(5, 5, 0), BaselineDBLoad: 2}),
		"pgjob 83% of DB load, ×2.5 its baseline",
	}} {
		var once Tracker
		h := once.Add(&tc.s)
		if got, _, _ := strings.Cut(h.Line, " · "); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, h.Line, tc.want)
		}
		for _, o := range h.Offenders {
			if o.BaselineFrom != "collector" {
				t.Errorf("%s: %+v: baseline from %q, want the collector's", tc.name, o, o.BaselineFrom)
			}
		}
	}
}

// with returns r changed by f.
func with(r api.TenantRow, f func(*api.TenantRow)) api.TenantRow {
	f(&r)
	return r
}
