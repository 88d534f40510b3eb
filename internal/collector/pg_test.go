package collector

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/incident"
	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/pgactivity"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/sqlcomment"
	"github.com/qtop-dev/qtop/sqlcomment/comment"
	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/tenant"
)

// TestPostgresSampler runs the collector's sampler against the real
// PostgreSQL while a tagged statement runs: the live view shows the
// statement with its tenant and the tenant's DB load, and the minute's
// "pg" rollup and the slow statement reach the store.
func TestPostgresSampler(t *testing.T) {
	dsn := testsvc.Postgres(t)
	mem := newMemStore()
	s, err := New(Config{Store: "duckdb://unused", DataDir: t.TempDir(), Writer: "w1", Postgres: dsn,
		Registerer: prometheus.NewRegistry(), OpenStore: func(string) (store.Store, error) { return mem, nil }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.Run(ctx)
	defer s.Shutdown(context.Background())

	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := conn.Exec(ctx, "SELECT pg_sleep(4) /*route='GET%20%2Freports',tenant='bigcorp'*/")
		done <- err
	}()

	var snap api.Snapshot
	shows := func() bool {
		snap = s.Snapshot(time.Now(), api.MeasureDB, 10)
		found := false
		for _, st := range snap.Statements {
			found = found || (st.Tenant == "bigcorp" && st.Route == "GET /reports" && st.Duration >= time.Second)
		}
		var load float64
		for _, tr := range snap.Tenants {
			if tr.Tenant == "bigcorp" {
				load = tr.DBLoad
			}
		}
		return found && load > 0
	}
	if !waitUntil(10*time.Second, shows) {
		t.Fatalf("sampler did not show bigcorp's statement and load: statements %+v tenants %+v err %q",
			snap.Statements, snap.Tenants, snap.Collector.SamplerError)
	}
	if !snap.Collector.Sampler || snap.Source != api.SourcePostgres {
		t.Fatalf("collector status %+v source %q", snap.Collector, snap.Source)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The sampler's sessions name themselves to a DBA.
	var own int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'qtop-collector'").Scan(&own); err != nil || own == 0 {
		t.Fatalf("sessions named qtop-collector: %d, %v", own, err)
	}
	s.Tick(ctx, time.Now().Add(2*time.Minute))
	if got := mem.sum("bigcorp", store.KindPG, func(r store.Rollup) float64 { return r.ActiveSessionSeconds }); got < 1 {
		t.Fatalf("bigcorp pg active-session seconds = %v, want ≥ 1", got)
	}
	mem.mu.Lock()
	defer mem.mu.Unlock()
	found := false
	for _, st := range mem.stmts {
		found = found || (st.Tenant == "bigcorp" && st.Duration >= time.Second)
	}
	if !found {
		t.Fatalf("slow statement not stored: %+v", mem.stmts)
	}
}

// TestParallelWorkersAreLoadNotStatements: a parallel query's workers add to
// their leader's tenant load, but the statement is listed (and sampled as
// slow) once, for the leader.
func TestParallelWorkersAreLoadNotStatements(t *testing.T) {
	mem := newMemStore()
	s, err := New(Config{Store: "duckdb://unused", DataDir: t.TempDir(), Writer: "w1",
		Registerer: prometheus.NewRegistry(), OpenStore: func(string) (store.Store, error) { return mem, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	now := time.Now()
	q := "SELECT count(*) FROM big /*tenant='bigcorp'*/"
	b := func(pid, leader int32) pgactivity.Backend {
		return pgactivity.Backend{PID: pid, LeaderPID: leader, Tenant: "bigcorp", State: "active",
			QueryStart: now.Add(-5 * time.Second), Duration: 5 * time.Second, Query: q}
	}
	s.AddSample(pgactivity.Snapshot{Time: now, Backends: []pgactivity.Backend{b(100, 0), b(101, 100), b(102, 100)}}, time.Second)
	// Rates are over the complete seconds before the snapshot.
	snap := s.Snapshot(now.Add(time.Second), api.MeasureDB, 10)
	if len(snap.Statements) != 1 || snap.Statements[0].PID != 100 {
		t.Fatalf("statements %+v: want only the leader, pid 100", snap.Statements)
	}
	var load float64
	for _, tr := range snap.Tenants {
		if tr.Tenant == "bigcorp" {
			load = tr.DBLoad
		}
	}
	// Three active sessions for one second of a ten-second window.
	if math.Abs(load-0.3) > 1e-9 {
		t.Fatalf("bigcorp DB load %v, want 0.3 (leader and two workers, 1 s of 10)", load)
	}
	s.Tick(context.Background(), now.Add(2*time.Minute))
	mem.mu.Lock()
	defer mem.mu.Unlock()
	if len(mem.stmts) != 1 {
		t.Fatalf("sampled slow statements %+v: want one, the leader's", mem.stmts)
	}
}

// TestPostgresSessionTagNames: a session tagged in application_name with
// a tenant whose name does not fit (written as its short id)
// shows as the id until a process reports the name behind it
// (sqlcomment.TenantNames' section), then under the tenant's name.
func TestPostgresSessionTagNames(t *testing.T) {
	dsn := testsvc.Postgres(t)
	s, err := New(Config{Store: StoreNone, DataDir: t.TempDir(), Writer: "w1", Postgres: dsn, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.Run(ctx)
	defer s.Shutdown(context.Background())

	const name = "Bäckerei Müller GmbH & Co. KG, Filiale Berlin-Charlottenburg, Kantstraße 12"
	id := comment.TenantID(name)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["application_name"] = comment.ApplicationName("shop", tenant.Tags{Tenant: name})
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := conn.Exec(ctx, "SELECT pg_sleep(6)")
		done <- err
	}()
	loadOf := func(tn string) func() bool {
		return func() bool {
			for _, r := range s.Snapshot(time.Now(), api.MeasureDB, 10).Tenants {
				if r.Tenant == tn && r.DBLoad > 0 {
					return true
				}
			}
			return false
		}
	}
	if !waitUntil(10*time.Second, loadOf(id)) {
		t.Fatalf("the session's load is not under its id %s: %+v", id, s.Snapshot(time.Now(), api.MeasureDB, 10).Tenants)
	}
	names := sqlcomment.NewTenantNames(0)
	names.Add(name)
	rep := &report.Report{Source: report.Source{Service: "shop", Instance: "p1"}, Seq: 1,
		Start: time.Now().Add(-time.Second), End: time.Now()}
	rep.SetSection(names.Section())
	body, err := rep.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Consume(ctx, rep, body); err != nil {
		t.Fatal(err)
	}
	if !waitUntil(10*time.Second, loadOf(name)) {
		t.Fatalf("the session's load is not under %q once its name was reported", name)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestPGOverlap: where the sampler's sessions and the statements services
// report are the same statements, a cost report counts them once. acme's
// agent reports 30 s of statements and the sampler saw 20 s of its tagged
// sessions: its DB time is 30 s, not 50. globex's OTLP service reports 10
// s and its sessions carry no tenant: of the 25 s of untagged sessions,
// 20 s are globex's 10 s and acme's 10 s beyond its own sessions, and
// the unattributed line keeps 5 s. initech is seen by the sampler alone
// (a service that tags its statements and reports nothing): 8 s.
func TestPGOverlap(t *testing.T) {
	mem := newMemStore()
	clk := &clock{t: time.Date(2026, 12, 2, 12, 0, 1, 0, time.UTC)}
	s, err := New(Config{Store: "duckdb://unused", DataDir: t.TempDir(), Writer: "w1", Now: clk.Now,
		Registerer: prometheus.NewRegistry(), OpenStore: func(string) (store.Store, error) { return mem, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	m0 := clk.t.Truncate(time.Minute)
	rep := &report.Report{Source: report.Source{Service: "shop", Instance: "a"}, Seq: 1, Start: m0, End: clk.t,
		Rows: []report.Row{
			{Tenant: "acme", Route: "GET /a", Kind: report.KindDB, Count: 300, Duration: 30 * time.Second},
			{Tenant: "globex", Route: "SELECT orders", Kind: report.KindDB, Count: 100, Duration: 10 * time.Second}}}
	if _, err := s.Consume(t.Context(), rep, nil); err != nil {
		t.Fatal(err)
	}
	session := func(tn string) pgactivity.Backend {
		return pgactivity.Backend{PID: 1, Tenant: tn, State: "active", QueryStart: clk.t, Query: "SELECT 1"}
	}
	for i := range 25 { // a sample a second: acme 20, untagged 25, initech 8
		var bs []pgactivity.Backend
		if i < 20 {
			bs = append(bs, session("acme"))
		}
		if i < 8 {
			bs = append(bs, session("initech"))
		}
		bs = append(bs, session(""))
		s.AddSample(pgactivity.Snapshot{Time: m0.Add(time.Duration(i+2) * time.Second), Backends: bs}, time.Second)
	}
	s.Tick(context.Background(), m0.Add(time.Minute+11*time.Second))
	rep2, err := BuildReport(t.Context(), mem, ReportRequest{From: m0, To: m0.Add(time.Minute), Measure: MeasureDBTime}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, l := range rep2.Lines {
		got[l.Tenant] = l.DBSeconds
	}
	want := map[string]float64{"acme": 30, "globex": 10, "initech": 8, Unattributed: 5}
	for tn, w := range want {
		if math.Abs(got[tn]-w) > 1e-9 {
			t.Errorf("%s: DB time %v s, want %v (all: %v)", tn, got[tn], w, got)
		}
	}
	// The history's DB load stays the sampler's: acme's sessions, 20 s.
	var active float64
	for _, r := range mem.rollups {
		if r.Tenant == "acme" && r.Kind == store.KindPG {
			active += r.ActiveSessionSeconds
		}
	}
	if active != 20 {
		t.Errorf("acme's sampled sessions %v s, want 20", active)
	}
}

// TestLiveUntaggedOverlap: the live view's untagged row follows the cost
// report's rule (TestPGOverlap). acme's agent reports 3 s of statements a
// second and the sampler sees 2 of its tagged sessions; globex's OTLP
// service reports 1 s a second and its sessions carry no tenant. Of 3
// untagged sessions, 2 are globex's second and acme's beyond its own
// sessions, so the untagged row shows 1; with 2 untagged sessions nothing
// is left and the row is gone. Before, it showed every untagged session.
func TestLiveUntaggedOverlap(t *testing.T) {
	for _, tc := range []struct {
		untagged int
		want     float64 // the untagged row's DB load; 0: no row
	}{{3, 1}, {2, 0}} {
		clk := &clock{t: time.Date(2026, 12, 2, 12, 0, 30, 0, time.UTC)}
		s, err := New(Config{Store: "duckdb://unused", DataDir: t.TempDir(), Writer: "w1", Now: clk.Now,
			Registerer: prometheus.NewRegistry(), OpenStore: func(string) (store.Store, error) { return newMemStore(), nil }})
		if err != nil {
			t.Fatal(err)
		}
		now := clk.Now()
		for i := range 12 { // twelve seconds, so the ten-second window is full
			at := now.Add(time.Duration(i-12) * time.Second)
			var bs []pgactivity.Backend
			for j := range 2 + tc.untagged {
				tn := ""
				if j < 2 {
					tn = "acme"
				}
				bs = append(bs, pgactivity.Backend{PID: int32(j + 1), Tenant: tn, State: "active", QueryStart: at, Query: "SELECT 1"})
			}
			clk.Set(at.Add(500 * time.Millisecond))
			s.AddSample(pgactivity.Snapshot{Time: clk.Now(), Backends: bs}, time.Second)
			rep := &report.Report{Source: report.Source{Service: "shop", Instance: "a"}, Seq: uint64(i + 1), Start: at, End: at.Add(time.Second),
				Rows: []report.Row{
					{Tenant: "acme", Route: "GET /a", Kind: report.KindDB, Count: 30, Duration: 3 * time.Second},
					{Tenant: "globex", Route: "SELECT orders", Kind: report.KindDB, Count: 10, Duration: time.Second}}}
			clk.Set(at.Add(time.Second))
			if _, err := s.Consume(t.Context(), rep, nil); err != nil {
				t.Fatal(err)
			}
		}
		snap := s.Snapshot(now, api.MeasureDB, 10)
		load, share := map[string]float64{}, map[string]float64{}
		for _, r := range snap.Tenants {
			load[r.Tenant], share[r.Tenant] = r.DBLoad, r.Share
		}
		want := map[string]float64{"acme": 3, "globex": 1}
		if tc.want > 0 {
			want[report.UnknownTenant] = tc.want
		}
		var total float64
		for _, w := range want {
			total += w
		}
		for tn, w := range want {
			if math.Abs(load[tn]-w) > 1e-9 || math.Abs(share[tn]-w/total) > 1e-9 {
				t.Errorf("%d untagged sessions: %s DB load %v (share %v), want %v (%v)", tc.untagged, tn, load[tn], share[tn], w, w/total)
			}
		}
		if len(load) != len(want) {
			t.Errorf("%d untagged sessions: rows %v, want %v", tc.untagged, load, want)
		}
		s.Shutdown(context.Background())
	}
}

// TestPostgresOnlyNamesTheOffender: a collector whose only source is
// PostgreSQL's sampler (no process reports) keeps each tenant's sampled
// DB load as its history, whatever the live view is sorted by, so one
// snapshot is enough for a new qtop (qtop --once) to name the tenant
// whose sessions rose, and ranks it first whatever the sort (its RU is
// 0, as every tenant's). Before, the history held zeros and no offender
// was ever named, and tenants with no RU were ranked by name, so the top
// 20 could leave it in "other".
func TestPostgresOnlyNamesTheOffender(t *testing.T) {
	clk := &clock{t: time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)}
	s, err := New(Config{Store: "duckdb://unused", DataDir: t.TempDir(), Writer: "w1", Now: clk.Now,
		Postgres:   "postgres://sampler.invalid/app", // not started: samples are added below
		Registerer: prometheus.NewRegistry(), OpenStore: func(string) (store.Store, error) { return newMemStore(), nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	start := clk.Now()
	for i := range 180 { // three minutes: acme and bigcorp one session each, then bigcorp six
		at := start.Add(time.Duration(i) * time.Second)
		bs := []pgactivity.Backend{{PID: 1, Tenant: "acme", State: "active", QueryStart: at, Query: "SELECT 1"}}
		small := 0 // more tenants than the view shows, named before bigcorp: a session each, one second in ten
		if i%10 == 0 {
			small = 25
		}
		for j := range small {
			bs = append(bs, pgactivity.Backend{PID: int32(100 + j), Tenant: fmt.Sprintf("a%02d", j), State: "active", QueryStart: at, Query: "SELECT 3"})
		}
		for j := range 1 + 5*min(1, i/160) {
			bs = append(bs, pgactivity.Backend{PID: int32(10 + j), Tenant: "bigcorp", State: "active", QueryStart: at, Query: "SELECT 2"})
		}
		clk.Set(at.Add(500 * time.Millisecond))
		s.AddSample(pgactivity.Snapshot{Time: clk.Now(), Backends: bs}, time.Second)
	}
	clk.Set(start.Add(180 * time.Second))
	for _, measure := range []string{api.MeasureRU, api.MeasureDB} {
		snap := s.Snapshot(clk.Now(), measure, 20)
		if snap.Source != api.SourcePostgres {
			t.Fatalf("%s: source %q, want %q", measure, snap.Source, api.SourcePostgres)
		}
		if snap.Tenants[0].Tenant != "bigcorp" {
			t.Fatalf("%s: first row %q, want bigcorp, the most DB load (RU is 0 for all)", measure, snap.Tenants[0].Tenant)
		}
		var big *api.TenantRow
		for i := range snap.Tenants {
			if snap.Tenants[i].Tenant == "bigcorp" {
				big = &snap.Tenants[i]
			}
		}
		if big == nil || len(big.History) != api.HistoryLen || big.History[0] != 1 || big.History[len(big.History)-1] != 6 {
			t.Fatalf("%s: bigcorp's row %+v, want a history of its sessions, 1 then 6", measure, big)
		}
		var tr incident.Tracker // a qtop that has seen nothing before
		h := tr.Add(&snap)
		if len(h.Offenders) != 1 || h.Offenders[0].Name != "bigcorp" {
			t.Fatalf("%s: headline %+v, want bigcorp named", measure, h)
		}
	}
}

// TestUntaggedDBLoadCounted: the sampler's active sessions are counted
// tagged or not, so an alert can see load no tenant tag names (the
// per-tenant DB-time series count only tagged load: an untagged noisy
// job made a small tagged tenant look dominant); idle sessions are not
// load.
func TestUntaggedDBLoadCounted(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	bs := []pgactivity.Backend{
		{PID: 1, State: pgactivity.StateActive, Tenant: "acme"},
		{PID: 2, State: pgactivity.StateActive},
		{PID: 3, State: pgactivity.StateActive},
		{PID: 4, State: "idle", Tenant: "acme"},
		{PID: 5, State: "idle"},
	}
	for range 3 {
		f.s.AddSample(pgactivity.Snapshot{Time: f.clk.Now(), Backends: bs}, 2*time.Second)
	}
	if got := testutil.ToFloat64(f.s.met.pgActive.WithLabelValues("true")); got != 6 {
		t.Errorf("tagged session seconds %v, want 6", got)
	}
	if got := testutil.ToFloat64(f.s.met.pgActive.WithLabelValues("false")); got != 12 {
		t.Errorf("untagged session seconds %v, want 12", got)
	}
}
