package collector

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/meter"
	"github.com/qtop-dev/qtop/pgactivity"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/tenant"
)

// TestDBTimesCalibrate: a minute's DB rows of a statement shape hold
// pg_stat_statements' growth of that shape over the minute, split by the
// calls and the spans (toPostgres), where PostgreSQL's calls are the rows'; PostgreSQL's
// mean per call where it counted more calls than the rows hold; elsewhere
// (an implausible ratio, a reset, a missed read) the clients' time stays.
func TestDBTimesCalibrate(t *testing.T) {
	d, _ := newDBTimes(prometheus.NewRegistry(), "", "", nil)
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
		// 100 calls, PostgreSQL 0.3 s (3 ms a call), the spans 6 ms a
		// call (3 ms overhead), acme's 6.67 and globex's 5 (1.67 ms
		// apart): λ = 1.67 / (1.67 + 3), acme 60 × (3 + λ × 0.67) ms
		db("acme", "SELECT", 60, 0.4), db("globex", "SELECT", 40, 0.2),
		db("acme", "SELECT generate_series", 50, 0.6), // PostgreSQL counted 100 calls in 0.5 s: 50 × 5 ms
		db("acme", "UPDATE accounts", 20, 0.1),        // PostgreSQL 0.3 s, three times the clients': implausible
		db("acme", "DELETE carts", 3, 1),              // counters went back
		db("acme", "INSERT orders", 3, 1),             // nothing in pg_stat_statements
		{Minute: m0, Tenant: "acme", Route: "GET /cart", Kind: "request", Count: 100, DurationSeconds: 9},
	}
	d.calibrate(m0, rows)
	want := []float64{0.18 + 0.04/2.8, 0.12 - 0.04/2.8, 0.25, 0.1, 1, 1, 9} // λ = 1/2.8
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
	d, _ := newDBTimes(prometheus.NewRegistry(), "", "", nil)
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
	d, _ := newDBTimes(prometheus.NewRegistry(), "", "", nil)
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

// TestDBTimesRestart: pg_stat_statements' totals outlive the process. A
// collector killed mid-minute rebuilds the minute from its write-ahead
// log; the first read after the restart adds the growth since the last
// saved read to that minute, so its rows get PostgreSQL's time of all
// their calls, not their clients' time. A minute written before the kill
// and written again from the log gets the same time to the bit, and what
// it took is not given again to the minute after.
func TestDBTimesRestart(t *testing.T) {
	m0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	m1, m2 := m0.Add(time.Minute), m0.Add(2*time.Minute)
	sel := func(calls int64, ms float64) []pgactivity.StatementStats {
		return []pgactivity.StatementStats{{QueryID: 7, Query: "SELECT pg_sleep($1)", Calls: calls, TotalMs: ms}}
	}
	open := func(dir string) *dbTimes {
		t.Helper()
		d, err := newDBTimes(prometheus.NewRegistry(), dir, "postgres://db1", nil)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	rows := func(m time.Time, acme, globex uint64) []store.Rollup { // the clients said 20 ms a call
		return []store.Rollup{
			{Minute: m, Tenant: "acme", Route: "SELECT", Kind: "db", Count: acme, DurationSeconds: 0.02 * float64(acme)},
			{Minute: m, Tenant: "globex", Route: "SELECT", Kind: "db", Count: globex, DurationSeconds: 0.02 * float64(globex)}}
	}
	sum := func(r []store.Rollup) float64 { return r[0].DurationSeconds + r[1].DurationSeconds }

	// Killed at 12:00:30, started again at 12:00:35: the read at 12:00:00
	// was the last one saved.
	dir := t.TempDir()
	d := open(dir)
	d.observe(m0.Add(100*time.Millisecond), sel(1000, 2000))
	d.save()
	d = open(dir) // the kill: nothing after the save is kept
	d.observe(m0.Add(35*time.Second), sel(1030, 2060))
	d.observe(m1.Add(100*time.Millisecond), sel(1060, 2120)) // 12:00: 60 calls, 0.12 s
	r := rows(m0, 40, 20)                                    // rebuilt from the log: all 60 calls
	d.calibrate(m0, r)
	if got := sum(r); math.Abs(got-0.12) > 1e-9 || math.Abs(r[0].DurationSeconds-0.08) > 1e-9 {
		t.Errorf("12:00 after the restart holds %.6f s (acme %.6f), want PostgreSQL's 0.12 s, acme two thirds", got, r[0].DurationSeconds)
	}
	// Without the file, the restarted collector knew only the growth
	// since its own first read: half the calls, so the clients' time.
	fresh := open("")
	fresh.observe(m0.Add(35*time.Second), sel(1030, 2060))
	fresh.observe(m1.Add(100*time.Millisecond), sel(1060, 2120))
	r = rows(m0, 40, 20)
	fresh.calibrate(m0, r)
	if got := sum(r); math.Abs(got-1.2) > 1e-9 {
		t.Errorf("without the saved totals 12:00 holds %.6f s, want the clients' 1.2 s", got)
	}

	// 12:01 is written (40 of PostgreSQL's 100 calls left for 12:02's
	// rows), the collector is killed before the minute's log goes, and
	// the minute is written again from the log.
	dir = t.TempDir()
	d = open(dir)
	d.observe(m1.Add(100*time.Millisecond), sel(0, 0))
	d.observe(m2.Add(100*time.Millisecond), sel(100, 200)) // 12:01: 100 calls, 0.2 s
	d.save()
	first := rows(m1, 40, 20)
	d.calibrate(m1, first)
	d.save() // after the minute is written
	d = open(dir)
	again := rows(m1, 40, 20)
	d.calibrate(m1, again)
	for i := range again {
		if again[i].DurationSeconds != first[i].DurationSeconds {
			t.Errorf("12:01 written again after the restart: %s %v s, first %v s", again[i].Tenant, again[i].DurationSeconds, first[i].DurationSeconds)
		}
	}
	d.observe(m2.Add(time.Minute), sel(100, 200)) // 12:02: nothing new
	next := rows(m2, 30, 10)
	d.calibrate(m2, next)
	if got := sum(first) + sum(next); math.Abs(got-0.2) > 1e-9 {
		t.Errorf("12:01 and 12:02 hold %.6f s, want PostgreSQL's 0.2 s once", got)
	}
	if f := d.liveScale("SELECT"); math.Abs(f-0.1) > 1e-9 {
		t.Errorf("live factor %v after the restart, want 12:02's 0.1", f)
	}

	// A file that cannot be read is set aside and the totals start afresh.
	dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, dbTimesFile), []byte(`{"format":1,"prev":`), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := newDBTimes(prometheus.NewRegistry(), dir, "postgres://db1", nil)
	if err == nil || d == nil {
		t.Fatalf("a torn file: %v, %v; want an error and a fresh state", d, err)
	}
	if _, err := os.Stat(filepath.Join(dir, dbTimesFile+".bad")); err != nil {
		t.Errorf("the torn file was not set aside: %v", err)
	}
	d.observe(m0, sel(1, 2))
	d.save()
	if _, ok := open(dir).prev[7]; !ok {
		t.Errorf("the state saved after a torn file was not read back")
	}
	// A new password reads the same counters; the file holds no hash of it.
	if a, b := statementSource("postgres://qtop:old@db1:5432/shop"), statementSource("postgres://qtop:new@db1:5432/shop"); a != b {
		t.Errorf("a new password made another source: %s, %s", a, b)
	}
	// Another --postgres: the counters kept are not its own.
	other, err := newDBTimes(prometheus.NewRegistry(), dir, "postgres://db2", nil)
	if err != nil || other.prev != nil || len(other.pg) != 0 {
		t.Errorf("state of another database read: %v, %v", other.prev, err)
	}
}

// TestDBTimeAfterCrash: a collector with --postgres killed mid-minute and
// started again on its data dir writes the minute rebuilt from its log
// with PostgreSQL's time of the minute's statements, read before and after
// the kill, split as the spans measured it. (Before the totals were kept,
// the minute kept the spans' time: ten times PostgreSQL's here.)
func TestDBTimeAfterCrash(t *testing.T) {
	// New makes the statement totals of a --postgres collector; only Run
	// dials PostgreSQL, and the test reads for it (observe).
	withPG := func(c *Config) { c.Postgres = "postgres://127.0.0.1:1/never-dialled" }
	f := newFixture(t, withPG)
	m0 := t0.Truncate(time.Minute)
	sel := func(calls int64, ms float64) []pgactivity.StatementStats {
		return []pgactivity.StatementStats{{QueryID: 7, Query: "SELECT pg_sleep($1)", Calls: calls, TotalMs: ms}}
	}
	read := func(at time.Time, calls int64, ms float64) { // what the statement clock does at a read
		f.s.pg.dbt.observe(at, sel(calls, ms))
		f.s.pg.dbt.save()
	}
	read(m0.Add(100*time.Millisecond), 1000, 2000)
	rec, err := meter.NewRecorder(meter.WithSource(report.Source{Service: "shop", Instance: "p1", Host: "h"}), meter.WithClock(f.clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tenant string
		n      int
	}{{"acme", 4}, {"globex", 2}} {
		for range c.n { // the spans said 20 ms; PostgreSQL will say 2
			rec.Record(meter.Record{Tags: tenant.Tags{Tenant: c.tenant, Route: "SELECT"}, Kind: report.KindDB, Duration: 20 * time.Millisecond})
		}
	}
	f.clk.Set(m0.Add(20 * time.Second))
	body, err := rec.Cut(f.clk.Now()).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if f.ingest(body) != 200 {
		t.Fatal("refused")
	}
	// The kill at 09:00:30: no Shutdown, no save.
	crashed := f.s
	crashed.life.lock.Close()
	f.start(withPG)
	defer f.stop()
	defer func() { crashed.em.spool.Close() }()
	read(m0.Add(35*time.Second), 1003, 2006)
	read(m0.Add(time.Minute+100*time.Millisecond), 1006, 2012) // 09:00: 6 calls, 12 ms
	f.s.Tick(context.Background(), m0.Add(time.Minute+10*time.Second))
	dur := func(r store.Rollup) float64 { return r.DurationSeconds }
	acme, globex := f.mem.sum("acme", "db", dur), f.mem.sum("globex", "db", dur)
	if math.Abs(acme-0.008) > 1e-9 || math.Abs(globex-0.004) > 1e-9 {
		t.Errorf("09:00 rebuilt after the kill: acme %.6f s, globex %.6f s; want PostgreSQL's 12 ms split 8:4", acme, globex)
	}
	b, err := os.ReadFile(filepath.Join(f.dir, dbTimesFile))
	if err != nil || !strings.Contains(string(b), `"given":{"`+strconv.FormatInt(m0.Unix(), 10)) {
		t.Errorf("what 09:00 was given is not kept once it is written: %v\n%s", err, b)
	}
}

// toPostgres on the two kinds of shape seen with the Node example. One
// tenant's 0.5 s statements beside three tenants' 2 ms ones in one shape
// (SELECT pg_sleep($1)): the noisy tenant keeps its time, the others are
// not billed for it. One kind of short statement, queued longer for some
// tenants than others: each tenant's time is its calls at PostgreSQL's
// mean. Where PostgreSQL measured more than the spans, each row keeps its
// part of what they measured.
func TestToPostgres(t *testing.T) {
	m0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	type row struct {
		tenant  string
		calls   uint64
		seconds float64 // the spans'
		truth   float64
	}
	for _, tc := range []struct {
		name string
		pg   float64
		rows []row
		tol  float64
	}{
		// A trial's quiet run: pg_sleep(0.5) and pg_sleep(0.002), the
		// spans 0.6 ms a call over PostgreSQL.
		{"mixed", 616.684, []row{{"noisy", 876, 440.3, 439.4}, {"a", 27064, 75.6, 59.1}, {"b", 27068, 75.6, 59.1}, {"c", 27114, 75.5, 59.1}}, 0.01},
		// TestNodeBillShortStatements: 4, 2 and 1 senders, the spans
		// 128–139% over PostgreSQL.
		{"short", 2.348, []row{{"acme", 1200, 3.056, 1.342}, {"globex", 600, 1.601, 0.671}, {"initech", 300, 0.781, 0.335}}, 0.01},
		{"PostgreSQL more", 1.5, []row{{"acme", 50, 0.8, 1.0}, {"globex", 50, 0.4, 0.5}}, 1e-9},
	} {
		var rollups []store.Rollup
		var c shapeTotal
		for _, r := range tc.rows {
			rollups = append(rollups, store.Rollup{Minute: m0, Tenant: r.tenant, Route: "SELECT", Kind: "db", Count: r.calls, DurationSeconds: r.seconds})
			c.calls, c.seconds = c.calls+int64(r.calls), c.seconds+r.seconds
		}
		rollups = append(rollups, store.Rollup{Minute: m0, Tenant: "acme", Route: "GET /", Kind: "request", Count: 50, DurationSeconds: 3})
		toPostgres(rollups, "SELECT", tc.pg, c)
		var sum float64
		for i, r := range tc.rows {
			got := rollups[i].DurationSeconds
			sum += got
			if math.Abs(got/r.truth-1) > tc.tol {
				t.Errorf("%s: %s %.4f s, truth %.4f s (%+.2f%%)", tc.name, r.tenant, got, r.truth, 100*(got/r.truth-1))
			}
		}
		if math.Abs(sum-tc.pg) > 1e-9 || rollups[len(rollups)-1].DurationSeconds != 3 {
			t.Errorf("%s: rows sum to %.6f s, PostgreSQL %.6f; request row %v", tc.name, sum, tc.pg, rollups[len(rollups)-1].DurationSeconds)
		}
	}
}
