package collector

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/budget"
	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/meter"
	"github.com/qtop-dev/qtop/pgactivity"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/sqlcomment"
	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/tenant"
)

func post(t *testing.T, url, token, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, sb.String()
}

// TestBudgetPolicyEndpoints: budgets and runaway rules are set through
// the collector's policy, reach every process in the reply, are audited,
// and the live view shows them with the counters the processes report.
func TestBudgetPolicyEndpoints(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	srv := httptest.NewServer(f.s.Handler())
	defer srv.Close()
	budgetJSON := `{"id":"analytics","match":[{"tenant":"analytics"}],"concurrency":1,"mode":"enforce","reason":"reports hold back vacuum"}`
	if code, _ := post(t, srv.URL+PathBudgets, "wrong", budgetJSON); code != http.StatusUnauthorized {
		t.Fatalf("without the token: %d", code)
	}
	for _, bad := range []string{
		`{"id":"x","reason":"no limit"}`,
		`{"id":"x","concurrency":1,"reason":"r","mode":"ban"}`,
		`{"id":"x","concurrency":1,"reason":"r","unknown":1}`,
		`{"id":"x","concurrency":1,"reason":"r","match":[{}]}`,
	} {
		if code, msg := post(t, srv.URL+PathBudgets, f.token, bad); code != http.StatusBadRequest {
			t.Fatalf("%s: %d %s", bad, code, msg)
		}
	}
	if code, msg := post(t, srv.URL+PathBudgets, f.token, budgetJSON); code != http.StatusOK {
		t.Fatalf("post budgetJSON: %d %s", code, msg)
	}
	rule := `{"id":"long","match":[{"tenant":"analytics"}],"after_seconds":30,"action":"cancel","cooldown_seconds":60,"reason":"r"}`
	if code, msg := post(t, srv.URL+PathRunaway, f.token, rule); code != http.StatusOK {
		t.Fatalf("post runaway: %d %s", code, msg)
	}
	p := f.s.Policy()
	if p.Version != 2 || len(p.Budgets) != 1 || p.Budgets[0].Mode != policy.Enforce || len(p.Runaway) != 1 || p.Budgets[0].CreatedBy == "" {
		t.Fatalf("policy = %+v", p)
	}

	// A process gets both in its reply, and reports its counters.
	pr := newProcess(f.clk, "api", "p")
	rep := pr.rec.Cut(f.clk.Now())
	rep.SetSection(budget.Window{Counters: []budget.Counter{{ID: "analytics", Enforce: true, Admitted: 7, Refused: 3},
		{ID: "long", Runaway: true, Cancelled: 1, WatchRefused: 2}, {ID: "made-up", Admitted: 5}}})
	body, err := rep.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	_, _, _, _, reply := ingest(f.s, body)
	r, err := report.DecodeReply(reply)
	if rp := replyPolicy(r); err != nil || rp == nil || len(rp.Budgets) != 1 || rp.Runaway[0].ID != "long" {
		t.Fatalf("reply %+v %v", r, err)
	}
	snap := f.s.Snapshot(f.clk.Add(time.Second), api.MeasureRU, 10)
	if len(snap.Budgets) != 3 || len(snap.Policy.Budgets) != 1 {
		t.Fatalf("live budgets = %+v, policy %+v", snap.Budgets, snap.Policy)
	}
	if b := snap.Budgets[0]; b.ID != "analytics" || b.Mode != "enforce" || b.Admitted != 7 || b.Refused != 3 {
		t.Fatalf("budget row = %+v", b)
	}
	if b := snap.Budgets[1]; b.ID != "long" || !b.Runaway || b.Cancelled != 1 || b.WatchRefused != 2 {
		t.Fatalf("runaway row = %+v", b)
	}
	// Fleet-wide metrics: the policy's ids, anything else as "other".
	err = testutil.CollectAndCompare(f.reg, strings.NewReader(`
# HELP qtop_collector_budget_statements_total Statements of a database budget summed over the reporting processes, by budget (ids not in the policy: other; a budget whose id is other: other#d9298a10d1b07358) and outcome (admitted, refused, warned, in_tx).
# TYPE qtop_collector_budget_statements_total counter
qtop_collector_budget_statements_total{budget="analytics",outcome="admitted"} 7
qtop_collector_budget_statements_total{budget="analytics",outcome="in_tx"} 0
qtop_collector_budget_statements_total{budget="analytics",outcome="refused"} 3
qtop_collector_budget_statements_total{budget="analytics",outcome="warned"} 0
qtop_collector_budget_statements_total{budget="other",outcome="admitted"} 5
qtop_collector_budget_statements_total{budget="other",outcome="in_tx"} 0
qtop_collector_budget_statements_total{budget="other",outcome="refused"} 0
qtop_collector_budget_statements_total{budget="other",outcome="warned"} 0
`), "qtop_collector_budget_statements_total")
	if err != nil {
		t.Fatal(err)
	}
	if probs, err := testutil.CollectAndLint(f.reg, "qtop_collector_budget_statements_total", "qtop_collector_runaway_statements_total"); err != nil || len(probs) > 0 {
		t.Fatalf("lint: %v %v", err, probs)
	}
	// Delete, then deleting again is an error.
	if code, msg := post(t, srv.URL+PathBudgets, f.token, `{"id":"analytics","delete":true}`); code != http.StatusOK {
		t.Fatalf("delete: %d %s", code, msg)
	}
	if code, _ := post(t, srv.URL+PathBudgets, f.token, `{"id":"analytics","delete":true}`); code != http.StatusBadRequest {
		t.Fatalf("delete twice: %d", code)
	}
	if p := f.s.Policy(); len(p.Budgets) != 0 || p.Version != 3 {
		t.Fatalf("after delete: %+v", p)
	}
	f.mem.mu.Lock()
	defer f.mem.mu.Unlock()
	if len(f.mem.audit) != 3 || f.mem.audit[0].Action != "budget-set" || f.mem.audit[2].Action != "budget-delete" {
		t.Fatalf("audit %+v", f.mem.audit)
	}
}

// TestBudgetLiveBounded: a reporter sending made-up ids cannot grow the
// live view past its bound, nor push the policy's own budgets into the
// "other" row.
func TestBudgetLiveBounded(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	if _, err := f.s.SetBudget(context.Background(), policy.Budget{ID: "analytics", Concurrency: 1, Reason: "r"}, false, "test"); err != nil {
		t.Fatal(err)
	}
	b := f.s.feat.bud
	merge := func(c budget.Counter) {
		b.merge(&report.Report{Sections: []report.Section{budget.Window{Counters: []budget.Counter{c}}}}, time.Unix(100, 0), true)
	}
	for i := range 3 * maxBudgetIDs {
		merge(budget.Counter{ID: "id-" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + string(rune(i)), Admitted: 1})
	}
	merge(budget.Counter{ID: "analytics", Admitted: 7})
	b.mu.Lock()
	n := len(b.slots[100%rateN].ids)
	other := b.slots[100%rateN].ids[budgetKey{tenant.Other, false}]
	own := b.slots[100%rateN].ids[budgetKey{"analytics", false}]
	b.mu.Unlock()
	if n > maxBudgetIDs+2 || other == nil || other.Admitted == 0 {
		t.Fatalf("%d ids tracked, other %+v", n, other)
	}
	if own == nil || own.Admitted != 7 {
		t.Fatalf("the policy's budget: %+v, want a row of its own", own)
	}
}

// TestBudgetNamedOther: a budget and a runaway rule really named "other"
// (which a policy saved before may hold: it loads as it is) have counters
// of their own under their stand-in (tenant.EscapeValue), in the live
// view and the metrics; the ids the policy does not have are summed
// under "other" in the metrics and keep their own rows in the live view,
// an id "other" not in the policy under the stand-in too. The policy
// keeps the id as given.
func TestBudgetNamedOther(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	srv := httptest.NewServer(f.s.Handler())
	defer srv.Close()
	if code, msg := post(t, srv.URL+PathBudgets, f.token, `{"id":"other","concurrency":1,"reason":"r"}`); code != http.StatusOK {
		t.Fatalf("post budget other: %d %s", code, msg)
	}
	if code, msg := post(t, srv.URL+PathRunaway, f.token, `{"id":"other","after_seconds":30,"action":"report","reason":"r"}`); code != http.StatusOK {
		t.Fatalf("post runaway other: %d %s", code, msg)
	}
	if p := f.s.Policy(); p.Budgets[0].ID != "other" || p.Runaway[0].ID != "other" {
		t.Fatalf("policy %+v", p)
	}
	pr := newProcess(f.clk, "api", "p")
	rep := pr.rec.Cut(f.clk.Now())
	rep.SetSection(budget.Window{Counters: []budget.Counter{{ID: "other", Admitted: 7, Warned: 1}, {ID: "made-up", Admitted: 5},
		{ID: "other", Runaway: true, Reported: 2}, {ID: "gone", Runaway: true, Reported: 3}}})
	body, err := rep.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	ingest(f.s, body)
	own := tenant.EscapeValue("other")
	snap := f.s.Snapshot(f.clk.Add(time.Second), api.MeasureRU, 10)
	want := []api.BudgetRow{{ID: own, Mode: "warn", Admitted: 7, Warned: 1}, {ID: own, Runaway: true, Mode: "report", Reported: 2},
		{ID: "gone", Runaway: true, Reported: 3}, {ID: "made-up", Admitted: 5}}
	if !slices.Equal(snap.Budgets, want) {
		t.Errorf("live budgets\n%+v, want\n%+v", snap.Budgets, want)
	}
	err = testutil.CollectAndCompare(budgetMetrics{f.s.feat.bud}, strings.NewReader(`
# HELP qtop_collector_budget_statements_total Statements of a database budget summed over the reporting processes, by budget (ids not in the policy: other; a budget whose id is other: other#d9298a10d1b07358) and outcome (admitted, refused, warned, in_tx).
# TYPE qtop_collector_budget_statements_total counter
qtop_collector_budget_statements_total{budget="other#d9298a10d1b07358",outcome="admitted"} 7
qtop_collector_budget_statements_total{budget="other#d9298a10d1b07358",outcome="in_tx"} 0
qtop_collector_budget_statements_total{budget="other#d9298a10d1b07358",outcome="refused"} 0
qtop_collector_budget_statements_total{budget="other#d9298a10d1b07358",outcome="warned"} 1
qtop_collector_budget_statements_total{budget="other",outcome="admitted"} 5
qtop_collector_budget_statements_total{budget="other",outcome="in_tx"} 0
qtop_collector_budget_statements_total{budget="other",outcome="refused"} 0
qtop_collector_budget_statements_total{budget="other",outcome="warned"} 0
# HELP qtop_collector_runaway_statements_total Statements a runaway rule acted on, summed over the reporting processes and the sampler, by rule (ids not in the policy: other; a rule whose id is other: other#d9298a10d1b07358) and outcome (cancelled, terminated, reported, watch_refused).
# TYPE qtop_collector_runaway_statements_total counter
qtop_collector_runaway_statements_total{outcome="cancelled",rule="other#d9298a10d1b07358"} 0
qtop_collector_runaway_statements_total{outcome="reported",rule="other#d9298a10d1b07358"} 2
qtop_collector_runaway_statements_total{outcome="terminated",rule="other#d9298a10d1b07358"} 0
qtop_collector_runaway_statements_total{outcome="watch_refused",rule="other#d9298a10d1b07358"} 0
qtop_collector_runaway_statements_total{outcome="cancelled",rule="other"} 0
qtop_collector_runaway_statements_total{outcome="reported",rule="other"} 3
qtop_collector_runaway_statements_total{outcome="terminated",rule="other"} 0
qtop_collector_runaway_statements_total{outcome="watch_refused",rule="other"} 0
`))
	if err != nil {
		t.Error(err)
	}
	// A rule "other" removed from the policy: what processes still report
	// for it is an id the policy does not have, in the overflow row.
	if code, msg := post(t, srv.URL+PathBudgets, f.token, `{"id":"other","delete":true}`); code != http.StatusOK {
		t.Fatalf("delete: %d %s", code, msg)
	}
	b := f.s.feat.bud
	b.merge(&report.Report{Sections: []report.Section{budget.Window{Counters: []budget.Counter{{ID: "other", Admitted: 4}}}}}, f.clk.Now(), true)
	b.mu.Lock()
	gone, other := *b.totals[budgetKey{own, false}], *b.totals[budgetKey{tenant.Other, false}]
	b.mu.Unlock()
	if gone.Admitted != 7 || other.Admitted != 9 {
		t.Errorf("after the delete: %s %d, other %d; want 7 and 9", own, gone.Admitted, other.Admitted)
	}
}

// TestPostgresRunawaySampler: the collector's sampler cancels a runaway
// statement of a client it does not wrap — exactly the statement it saw
// (pid and query_start): a statement that started after the sample is
// left alone — audits it, and cancels the same shape at sight during the
// cool-down.
func TestPostgresRunawaySampler(t *testing.T) {
	dsn := testsvc.Postgres(t)
	mem := newMemStore()
	clk := &clock{t: time.Now()}
	s, err := New(Config{Store: "duckdb://unused", DataDir: t.TempDir(), Writer: "w1",
		Registerer: prometheus.NewRegistry(), Now: clk.Now, OpenStore: func(string) (store.Store, error) { return mem, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	ctx := context.Background()
	ten := "runaway-" + randomToken()[:8]
	if _, err := s.SetRunaway(ctx, policy.Runaway{ID: "long", Match: []map[string]string{{"tenant": ten}},
		AfterSeconds: 0.2, Action: policy.Cancel, CooldownSeconds: 600, Reason: "test"}, false, "test"); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	client, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(ctx)
	q := "SELECT pg_sleep(30) /*tenant='" + ten + "'*/"
	sampler := pgactivity.NewSampler(pool)
	// sample waits until the client's statement has run for min.
	sample := func(min time.Duration) (snap pgactivity.Snapshot) {
		waitFor(t, time.Minute, "the client's statement to run for "+min.String(), func() bool {
			var err error
			if snap, err = sampler.Sample(ctx); err != nil {
				t.Fatal(err)
			}
			for _, b := range snap.Backends {
				if b.Tenant == ten && b.Active() && b.Duration >= min {
					return true
				}
			}
			return false
		})
		return snap
	}
	run := func() chan error {
		done := make(chan error, 1)
		go func() { _, err := client.Exec(ctx, q); done <- err }()
		return done
	}

	// A sample of a statement that has since ended: its query_start is
	// stale, and the new statement of the same session is not touched.
	done := run()
	stale := sample(300 * time.Millisecond)
	pid := int32(client.PgConn().PID())
	if _, err := pool.Exec(ctx, "SELECT pg_cancel_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	<-done
	done = run()
	fresh := sample(300 * time.Millisecond)
	s.feat.bud.checkRunaway(ctx, pool, stale)
	var staleStart time.Time
	for _, b := range stale.Backends {
		if b.Tenant == ten {
			staleStart = b.QueryStart
		}
	}
	var still bool
	if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
		WHERE pid = $1 AND state = 'active' AND query_start > $2)`, pid, staleStart).Scan(&still); err != nil {
		t.Fatal(err)
	}
	if !still {
		t.Fatal("a stale sample cancelled the session's next statement")
	}
	// The fresh sample: cancelled.
	s.feat.bud.checkRunaway(ctx, pool, fresh)
	if err := <-done; err == nil || !strings.Contains(err.Error(), "canceling statement") {
		t.Fatalf("runaway statement: err = %v, want a cancel", err)
	}
	// The same shape again: cancelled at sight (watched), before 0.2 s.
	done = run()
	watched := sample(0)
	s.feat.bud.checkRunaway(ctx, pool, watched)
	if err := <-done; err == nil {
		t.Fatal("a watched shape was not cancelled")
	}
	snap := s.Snapshot(clk.Now().Add(time.Second), api.MeasureDB, 10)
	var row api.BudgetRow
	for _, r := range snap.Budgets {
		if r.ID == "long" {
			row = r
		}
	}
	if row.Cancelled != 2 || row.WatchRefused != 1 {
		t.Fatalf("live row = %+v (budgets %+v)", row, snap.Budgets)
	}
	mem.mu.Lock()
	defer mem.mu.Unlock()
	var acts []string
	for _, a := range mem.audit {
		if a.Who == "sampler" {
			acts = append(acts, a.Action)
		}
	}
	if strings.Join(acts, ",") != "runaway-gone,runaway-cancelled,runaway-cancelled" {
		t.Fatalf("audit actions = %v", acts)
	}
	for _, a := range mem.audit {
		if a.Who != "sampler" {
			continue
		}
		if ra := runawayAuditOf(t, a.Rule); ra.Rule != "long" || ra.Action != "cancel" || "runaway-"+ra.Done != a.Action ||
			ra.PID != pid || ra.Tenant != ten || ra.QueryStart.IsZero() || ra.Query == "" {
			t.Errorf("sampler's audit %s reads %+v", a.Rule, ra)
		}
	}
}

// runawayAuditOf reads the rule of a runaway audit row as collector audit
// does, through api.RunawayAudit, refusing a key the type lacks: what the
// collector records, the audit can read.
func runawayAuditOf(t *testing.T, rule string) api.RunawayAudit {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(rule))
	dec.DisallowUnknownFields()
	var ra api.RunawayAudit
	if err := dec.Decode(&ra); err != nil {
		t.Fatalf("runaway audit %s: %v", rule, err)
	}
	return ra
}

// TestBudgetsReachProcesses: a budget set on the collector reaches a
// process through the real ingest.Reporter's reply and is enforced by its
// wrapper; the process's counters come back in the next report and show
// in the live view.
func TestBudgetsReachProcesses(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Token = "tok" })
	defer f.stop()
	ctx := context.Background()
	if _, err := f.s.SetBudget(ctx, policy.Budget{ID: "analytics", Match: []map[string]string{{"tenant": "analytics"}},
		Concurrency: 1, Mode: policy.Enforce, Reason: "test"}, false, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.SetRunaway(ctx, policy.Runaway{ID: "slow", AfterSeconds: 1, Action: policy.Report, Reason: "test"}, false, "test"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(f.s.Handler())
	defer srv.Close()
	budgets := sqlcomment.NewBudgets()
	rec, err := meter.NewRecorder(meter.WithSource(report.Source{Service: "reports", Instance: "i1", Host: "h"}), meter.WithClock(f.clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := meter.NewReporter(srv.URL+api.PathReports, rec, meter.WithToken("tok"), meter.WithClock(f.clk.Now),
		meter.WithPolicyHandler(func(p policy.Policy) {
			if err := budgets.SetPolicy(p, f.clk.Now()); err != nil {
				t.Error(err)
			}
		}),
		meter.WithSectionSource(budgets.WindowSource()))
	if err != nil {
		t.Fatal(err)
	}
	flush := func() {
		t.Helper()
		f.clk.Add(time.Second)
		fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := rep.ForceFlush(fctx); err != nil {
			t.Fatal(err)
		}
	}
	flush() // the reply carries the budget
	c := sqlcomment.NewCommenter(sqlcomment.WithBudgets(budgets))
	st := sqlcomment.Statement{Tags: tenant.Tags{Tenant: "analytics"}, Tagged: true}
	tk, err := c.Admit(f.clk.Now(), "SELECT 1", &st, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Admit(f.clk.Now(), "SELECT 1", &st, false); !errors.Is(err, sqlcomment.ErrBudget) {
		t.Fatalf("second statement: %v, want ErrBudget", err)
	}
	c.Finish(&tk, f.clk.Now(), 2*time.Second, false) // past the report rule's second
	flush()                                          // the counters and the action go back
	if err := rep.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	snap := f.s.Snapshot(f.clk.Add(time.Second), api.MeasureRU, 5)
	if len(snap.Budgets) != 2 || snap.Budgets[0].Admitted != 1 || snap.Budgets[0].Refused != 1 || snap.Budgets[1].Reported != 1 {
		t.Fatalf("live budgets = %+v", snap.Budgets)
	}
	// The wrapper's runaway action reaches the audit at the next tick.
	f.s.Tick(ctx, f.clk.Now())
	f.mem.mu.Lock()
	defer f.mem.mu.Unlock()
	found := false
	for _, a := range f.mem.audit {
		if a.Action == "runaway-reported" && a.Who == "wrapper:reports/i1" {
			ra := runawayAuditOf(t, a.Rule)
			found = ra.Rule == "slow" && ra.Done == "reported" && ra.Duration == 2*time.Second && ra.Shape != 0
		}
	}
	if !found {
		t.Fatalf("audit = %+v", f.mem.audit)
	}
}

// TestPostgresRunawayTerminateAndReport: a terminate rule ends the
// session of a runaway statement; a report rule only records it.
func TestPostgresRunawayTerminateAndReport(t *testing.T) {
	dsn := testsvc.Postgres(t)
	mem := newMemStore()
	s, err := New(Config{Store: "duckdb://unused", DataDir: t.TempDir(), Writer: "w1",
		Registerer: prometheus.NewRegistry(), OpenStore: func(string) (store.Store, error) { return mem, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	ctx := context.Background()
	sfx := randomToken()[:8]
	for _, r := range []policy.Runaway{
		{ID: "kill", Match: []map[string]string{{"tenant": "kill-" + sfx}}, AfterSeconds: 0.1, Action: policy.Terminate, Reason: "t"},
		{ID: "watch", Match: []map[string]string{{"tenant": "watch-" + sfx}}, AfterSeconds: 0.1, Action: policy.Report, Reason: "t"},
	} {
		if _, err := s.SetRunaway(ctx, r, false, "test"); err != nil {
			t.Fatal(err)
		}
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	start := func(ten string) (*pgx.Conn, chan error) {
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { _, err := c.Exec(ctx, "SELECT pg_sleep(2) /*tenant='"+ten+"'*/"); done <- err }()
		return c, done
	}
	kc, kdone := start("kill-" + sfx)
	defer kc.Close(ctx)
	wc, wdone := start("watch-" + sfx)
	defer wc.Close(ctx)
	sampler := pgactivity.NewSampler(pool)
	var snap pgactivity.Snapshot
	waitFor(t, time.Minute, "both statements to run for 200ms", func() bool {
		if snap, err = sampler.Sample(ctx); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, b := range snap.Backends {
			if (b.Tenant == "kill-"+sfx || b.Tenant == "watch-"+sfx) && b.Duration >= 200*time.Millisecond {
				n++
			}
		}
		return n == 2
	})
	s.feat.bud.checkRunaway(ctx, pool, snap)
	s.feat.bud.checkRunaway(ctx, pool, snap) // once per statement
	if err := <-kdone; err == nil {
		t.Fatal("the terminated session's statement succeeded")
	}
	if !kc.IsClosed() {
		// pgx notices the terminated session on its next use.
		if err := kc.Ping(ctx); err == nil {
			t.Fatal("the terminated session still answers")
		}
	}
	if err := <-wdone; err != nil {
		t.Fatalf("a report rule stopped the statement: %v", err)
	}
	mem.mu.Lock()
	defer mem.mu.Unlock()
	var acts []string
	for _, a := range mem.audit {
		if a.Who == "sampler" {
			acts = append(acts, a.Action)
		}
	}
	slices.Sort(acts)
	if strings.Join(acts, ",") != "runaway-reported,runaway-terminated" {
		t.Fatalf("audit actions = %v", acts)
	}
}

// Each part of the policy changes alone: a throttle rule set or lifted
// keeps the budgets, runaway rules and freshness rules, and each of those
// keeps the others and the throttle rules.
func TestPolicyPartsChangeAlone(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	ctx := context.Background()
	if _, err := f.s.SetBudget(ctx, policy.Budget{ID: "analytics", Match: []map[string]string{{"tenant": "analytics"}},
		Concurrency: 1, Mode: policy.Enforce, Reason: "test"}, false, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.SetRunaway(ctx, policy.Runaway{ID: "slow", AfterSeconds: 1, Action: policy.Report, Reason: "test"}, false, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.SetFreshness(ctx, policy.Freshness{}, "test"); err != nil {
		t.Fatal(err)
	}
	p, err := f.s.SetRule(ctx, policy.Rule{ID: "r1", Tenant: "bigcorp", Action: policy.Throttle, RUPerSecond: 10,
		Expires: f.clk.Now().Add(time.Hour), Reason: "test"}, "test")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Budgets) != 1 || len(p.Runaway) != 1 || p.Freshness == nil || len(p.Rules) != 1 {
		t.Fatalf("after a rule: %d budgets, %d runaway, freshness %v, %d rules", len(p.Budgets), len(p.Runaway), p.Freshness != nil, len(p.Rules))
	}
	if p, err = f.s.SetBudget(ctx, policy.Budget{ID: "analytics"}, true, "test"); err != nil {
		t.Fatal(err)
	}
	if len(p.Budgets) != 0 || len(p.Runaway) != 1 || p.Freshness == nil || len(p.Rules) != 1 {
		t.Fatalf("after a budget's deletion: %d budgets, %d runaway, freshness %v, %d rules", len(p.Budgets), len(p.Runaway), p.Freshness != nil, len(p.Rules))
	}
	if got := f.s.Policy(); got.Version != p.Version || len(got.Runaway) != 1 {
		t.Fatalf("the server's policy: version %d, %d runaway", got.Version, len(got.Runaway))
	}
}

// TestBudgetListsEmpty: with no budgets or runaway rules, and once the
// last is deleted, the lists answer [] (a list), never null.
func TestBudgetListsEmpty(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	srv := httptest.NewServer(f.s.Handler())
	defer srv.Close()
	list := func(path string) string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+f.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		return strings.TrimSpace(string(b))
	}
	for _, path := range []string{PathBudgets, PathRunaway} {
		if got := list(path); got != "[]" {
			t.Errorf("GET %s with none: %s, want []", path, got)
		}
	}
	if code, msg := post(t, srv.URL+PathBudgets, f.token, `{"id":"b","match":[{"tenant":"a"}],"concurrency":1,"reason":"r"}`); code != http.StatusOK {
		t.Fatalf("post: %d %s", code, msg)
	}
	if got := list(PathBudgets); !strings.HasPrefix(got, `[{"id":"b"`) {
		t.Fatalf("GET with one: %s", got)
	}
	if code, msg := post(t, srv.URL+PathBudgets, f.token, `{"id":"b","delete":true}`); code != http.StatusOK {
		t.Fatalf("delete: %d %s", code, msg)
	}
	if got := list(PathBudgets); got != "[]" {
		t.Errorf("GET after the last was deleted: %s, want []", got)
	}
}

// TestBroadBudgetDoor: an enforce budget that matches every statement is
// refused at the door with what to send, and taken with confirm_broad; a
// warn one needs no confirmation.
func TestBroadBudgetDoor(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	srv := httptest.NewServer(f.s.Handler())
	defer srv.Close()
	for _, body := range []string{
		`{"id":"all","match":[],"concurrency":8,"mode":"enforce","reason":"r"}`,
		`{"id":"all","concurrency":8,"mode":"enforce","reason":"r"}`,
	} {
		if code, msg := post(t, srv.URL+PathBudgets, f.token, body); code != http.StatusBadRequest ||
			!strings.Contains(msg, `send \"confirm_broad\":true to mean it`) {
			t.Fatalf("%s: %d %s", body, code, msg)
		}
	}
	for _, body := range []string{
		`{"id":"all","match":[],"concurrency":8,"mode":"enforce","confirm_broad":true,"reason":"r"}`,
		`{"id":"warn-all","concurrency":8,"mode":"warn","reason":"r"}`,
	} {
		if code, msg := post(t, srv.URL+PathBudgets, f.token, body); code != http.StatusOK {
			t.Fatalf("%s: %d %s", body, code, msg)
		}
	}
	if p := f.s.Policy(); len(p.Budgets) != 2 || !p.Budgets[0].ConfirmBroad {
		t.Fatalf("policy = %+v", p.Budgets)
	}
}
