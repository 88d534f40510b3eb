package collector

import (
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/pgactivity"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/store"
)

// TestDBTimesCalibrate: a minute's DB rows of a statement shape hold
// pg_stat_statements' growth of that shape over the minute, split as the
// spans measured it, where PostgreSQL's calls are the rows'; PostgreSQL's
// mean per call where it counted more calls than the rows hold; elsewhere
// (an implausible ratio, a reset, a missed read) the clients' time stays.
func TestDBTimesCalibrate(t *testing.T) {
	d := newDBTimes(prometheus.NewRegistry())
	m0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	st := func(id int64, q string, calls int64, ms float64) pgactivity.StatementStats {
		return pgactivity.StatementStats{QueryID: id, Query: q, Calls: calls, TotalMs: ms}
	}
	d.observe(m0.Add(200*time.Millisecond), []pgactivity.StatementStats{
		st(1, "SELECT pg_sleep($1)", 10, 50), st(2, "SELECT count(*) FROM generate_series($1, $2)", 5, 5),
		st(3, "UPDATE accounts SET abalance = abalance + $1 WHERE aid = $2", 0, 0), st(4, "DELETE FROM carts WHERE id = $1", 7, 70)})
	d.observe(m0.Add(time.Minute+100*time.Millisecond), []pgactivity.StatementStats{
		st(1, "SELECT pg_sleep($1)", 70, 250), st(1, "SELECT pg_sleep($1)", 40, 100), // one queryid, two roles
		st(2, "SELECT count(*) FROM generate_series($1, $2)", 105, 505),
		st(3, "UPDATE accounts SET abalance = abalance + $1 WHERE aid = $2", 20, 300),
		st(4, "DELETE FROM carts WHERE id = $1", 3, 30)}) // reset
	db := func(tn, route string, count uint64, secs float64) store.Rollup {
		return store.Rollup{Minute: m0, Tenant: tn, Route: route, Kind: "db", Count: count, DurationSeconds: secs}
	}
	rows := []store.Rollup{
		db("acme", "SELECT", 60, 0.4), db("globex", "SELECT", 40, 0.2), // 100 calls, PostgreSQL 0.3 s: ×0.5
		db("acme", "SELECT generate_series", 50, 0.6), // PostgreSQL counted 100 calls in 0.5 s: 50 × 5 ms
		db("acme", "UPDATE accounts", 20, 0.1),        // PostgreSQL 0.3 s, three times the clients': implausible
		db("acme", "DELETE carts", 3, 1),              // counters went back
		db("acme", "INSERT orders", 3, 1),             // nothing in pg_stat_statements
		{Minute: m0, Tenant: "acme", Route: "GET /cart", Kind: "request", Count: 100, DurationSeconds: 9},
	}
	d.calibrate(m0, rows)
	want := []float64{0.2, 0.1, 0.25, 0.1, 1, 1, 9}
	for i, w := range want {
		if math.Abs(rows[i].DurationSeconds-w) > 1e-9 {
			t.Errorf("row %d (%s %s): %.6f s, want %.6f", i, rows[i].Tenant, rows[i].Route, rows[i].DurationSeconds, w)
		}
	}
	for result, n := range map[string]float64{"postgres": 2, "calls_differ": 1, "implausible": 1} {
		if got := testutil.ToFloat64(d.result.WithLabelValues(result)); got != n {
			t.Errorf("%s: %v shapes, want %v", result, got, n)
		}
	}
	// A read three minutes on (two missed) says nothing of the minutes
	// between: their rows keep the clients' time.
	d.observe(m0.Add(4*time.Minute), []pgactivity.StatementStats{st(1, "SELECT pg_sleep($1)", 500, 900)})
	m3 := m0.Add(3 * time.Minute)
	late := []store.Rollup{{Minute: m3, Tenant: "acme", Route: "SELECT", Kind: "db", Count: 390, DurationSeconds: 1}}
	d.calibrate(m3, late)
	d.calibrate(m0.Add(time.Minute), late)
	if late[0].DurationSeconds != 1 {
		t.Errorf("after missed reads: %v s, want the clients' 1 s", late[0].DurationSeconds)
	}
}

// TestDBTimesCarry: PostgreSQL's time of calls whose spans reached the
// collector in the next minute (a burst begun a moment before the turn)
// is carried to that minute's rows, so the minutes' sum is PostgreSQL's;
// a minute written again keeps what it was given, and time carried is
// given once.
func TestDBTimesCarry(t *testing.T) {
	d := newDBTimes(prometheus.NewRegistry())
	m0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	m1 := m0.Add(time.Minute)
	sel := func(calls int64, ms float64) []pgactivity.StatementStats {
		return []pgactivity.StatementStats{{QueryID: 1, Query: "SELECT pg_sleep($1)", Calls: calls, TotalMs: ms}}
	}
	d.observe(m0.Add(57*time.Second), sel(0, 0))
	d.observe(m1, sel(19, 50))                        // 12:00: 19 calls, 50 ms
	d.observe(m1.Add(8*time.Second), sel(1050, 2310)) // 12:01 so far: 1,031 calls, 2.26 s
	req := store.Rollup{Minute: m0, Tenant: "acme", Route: "GET /products", Kind: "request", Count: 19, DurationSeconds: 1}
	d.calibrate(m0, []store.Rollup{req}) // no statement rows: the spans came later
	rows := func() []store.Rollup {
		return []store.Rollup{
			{Minute: m1, Tenant: "acme", Route: "SELECT", Kind: "db", Count: 700, DurationSeconds: 10},
			{Minute: m1, Tenant: "globex", Route: "SELECT", Kind: "db", Count: 350, DurationSeconds: 5}}
	}
	for range 2 { // written, and written again
		r := rows()
		d.calibrate(m1, r)
		if sum := r[0].DurationSeconds + r[1].DurationSeconds; math.Abs(sum-2.31) > 1e-9 || math.Abs(r[0].DurationSeconds-1.54) > 1e-9 {
			t.Errorf("12:01's rows hold %.6f s (acme %.6f), want PostgreSQL's 2.31 s of both minutes, acme two thirds", sum, r[0].DurationSeconds)
		}
	}
	// The next minute gets its own growth only.
	m2 := m1.Add(time.Minute)
	d.observe(m2, sel(1050, 2310))
	d.observe(m2.Add(time.Minute), sel(1100, 2410))
	r := []store.Rollup{{Minute: m2, Tenant: "acme", Route: "SELECT", Kind: "db", Count: 50, DurationSeconds: 0.5}}
	d.calibrate(m2, r)
	if math.Abs(r[0].DurationSeconds-0.1) > 1e-9 {
		t.Errorf("12:02's row holds %.6f s, want its own 0.1 s", r[0].DurationSeconds)
	}

	// 12:03 holds 160 calls while PostgreSQL's read at the turn had 114
	// (a window reached past it): they take all of 12:03's time and 46 of
	// 12:04's calls at its mean (2 ms), and 12:04 the rest.
	m3 := m2.Add(time.Minute)
	d.observe(m3.Add(time.Minute), sel(1100+114, 2410+228))                 // 12:03: 114 calls, 0.228 s
	d.observe(m3.Add(time.Minute+8*time.Second), sel(1100+1050, 2410+2100)) // 12:04 so far: 936 calls, 1.872 s
	ahead := []store.Rollup{{Minute: m3, Tenant: "acme", Route: "SELECT", Kind: "db", Count: 160, DurationSeconds: 1.6}}
	d.calibrate(m3, ahead)
	next := []store.Rollup{{Minute: m3.Add(time.Minute), Tenant: "acme", Route: "SELECT", Kind: "db", Count: 890, DurationSeconds: 9}}
	d.calibrate(m3.Add(time.Minute), next)
	if a, n := ahead[0].DurationSeconds, next[0].DurationSeconds; math.Abs(a-0.32) > 1e-9 || math.Abs(n-1.78) > 1e-9 {
		t.Errorf("rows ahead of PostgreSQL's read: 12:03 %.6f s, 12:04 %.6f s; want 0.32 s and 1.78 s", a, n)
	}
	again := []store.Rollup{{Minute: m3, Tenant: "acme", Route: "SELECT", Kind: "db", Count: 160, DurationSeconds: 1.6}}
	d.calibrate(m3, again)
	if again[0].DurationSeconds != ahead[0].DurationSeconds {
		t.Errorf("12:03 written again: %.6f s, first %.6f s", again[0].DurationSeconds, ahead[0].DurationSeconds)
	}

	// Far more calls than PostgreSQL counted, before and after (a second
	// database runs the shape too): the clients' time stays.
	m5 := m3.Add(2 * time.Minute)
	d.observe(m5, sel(2150, 4510))
	d.observe(m5.Add(time.Minute), sel(2150+100, 4510+200))
	other := []store.Rollup{{Minute: m5, Tenant: "acme", Route: "SELECT", Kind: "db", Count: 400, DurationSeconds: 4}}
	d.calibrate(m5, other)
	if other[0].DurationSeconds != 4 {
		t.Errorf("rows of a second database: %.6f s, want the clients' 4 s", other[0].DurationSeconds)
	}
}

// TestDBTimesLive: the live view's DB time of a statement shape is scaled
// as the newest written minute scaled it (one truth with the history and
// the bill), an agent's DB rows (by request route) are not, and the
// minute's own rows stay the clients' until they are written.
func TestDBTimesLive(t *testing.T) {
	m0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	clk := &clock{t: m0.Add(90 * time.Second)}
	s, err := New(Config{Store: StoreNone, DataDir: t.TempDir(), Registerer: prometheus.NewRegistry(), Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(t.Context())
	d := newDBTimes(prometheus.NewRegistry())
	s.agg.dbt = d
	// Minute 12:00 was written with SELECT at a quarter of the spans'.
	d.observe(m0.Add(100*time.Millisecond), nil)
	d.observe(m0.Add(time.Minute), []pgactivity.StatementStats{{QueryID: 1, Query: "SELECT pg_sleep($1)", Calls: 10, TotalMs: 250}})
	d.calibrate(m0, []store.Rollup{{Minute: m0, Tenant: "acme", Route: "SELECT", Kind: "db", Count: 10, DurationSeconds: 1}})
	if f := d.liveScale("SELECT"); f != 0.25 {
		t.Fatalf("live factor %v, want 0.25", f)
	}
	d.calibrate(m0.Add(-time.Minute), []store.Rollup{{Minute: m0.Add(-time.Minute), Tenant: "acme", Route: "SELECT", Kind: "db", Count: 10, DurationSeconds: 1}})
	if f := d.liveScale("SELECT"); f != 0.25 {
		t.Fatalf("an older minute written again changed the live factor to %v", f)
	}
	now := clk.Now()
	for i := range 10 { // ten seconds of 2 s of SELECT and 2 s of an agent's DB time a second
		at := now.Add(time.Duration(i-10) * time.Second)
		rep := &report.Report{Source: report.Source{Service: "shop", Instance: "a"}, Seq: uint64(i + 1), Start: at, End: at.Add(time.Second),
			Rows: []report.Row{
				{Tenant: "acme", Route: "SELECT", Kind: report.KindDB, Count: 100, Duration: 2 * time.Second},
				{Tenant: "globex", Route: "GET /cart", Kind: report.KindDB, Count: 100, Duration: 2 * time.Second}}}
		clk.t = at.Add(time.Second)
		if _, err := s.Consume(t.Context(), rep, nil); err != nil {
			t.Fatal(err)
		}
	}
	clk.t = now.Add(time.Second)
	snap := s.Snapshot(clk.t, api.MeasureDB, 10)
	load := map[string]float64{}
	for _, r := range snap.Tenants {
		load[r.Tenant] = r.DBLoad
	}
	if math.Abs(load["acme"]-0.5) > 0.05 || math.Abs(load["globex"]-2) > 0.2 {
		t.Errorf("live DB load %v, want acme 0.5 (2 s a second at ×0.25), globex 2 (an agent's, as measured)", load)
	}
	var raw float64
	s.agg.rows(s.minutes.at(now.Add(-5*time.Second).Truncate(time.Minute)), func(k rowKey, a *rowAgg) {
		if k.tenant == "acme" {
			raw += a.dur
		}
	})
	if raw == 0 || math.Mod(raw, 2) != 0 {
		t.Errorf("the open minute's acme row holds %v s, want the spans' (2 s a report)", raw)
	}
}
