package tui

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/pgactivity"
	"github.com/qtop-dev/qtop/sqlcomment"
	"github.com/qtop-dev/qtop/tenant"
)

// sample1 has a parallel query of bigcorp (leader 10, worker 11 whose own
// text carries no tags), acme waiting on bigcorp's lock, an idle acme
// session and an untagged statement.
func sample1() pgactivity.Snapshot {
	return pgactivity.Snapshot{Time: t0, Backends: []pgactivity.Backend{
		{PID: 10, Tenant: "bigcorp", Route: "POST /import", Tier: tenant.T2, State: pgactivity.StateActive, Duration: 40 * time.Second, Query: "INSERT …"},
		{PID: 11, LeaderPID: 10, State: pgactivity.StateActive, WaitEventType: "IO", WaitEvent: "DataFileRead", Duration: 40 * time.Second, Query: "INSERT …"},
		{PID: 20, Tenant: "acme", Route: "GET /cart", State: pgactivity.StateActive, WaitEventType: "Lock", WaitEvent: "transactionid",
			Duration: 2 * time.Second, BlockedBy: []int32{10}},
		{PID: 30, Tenant: "acme", State: pgactivity.StateIdle},
		{PID: 40, State: pgactivity.StateActive, Duration: time.Second, Query: "VACUUM"},
	}}
}

// TestPGWindowGroupBy: the same samples grouped by every session field;
// untagged load is its own row, never merged with a tenant named
// "unknown" or "(untagged)"; each statement names the row it belongs to.
func TestPGWindowGroupBy(t *testing.T) {
	w := newPGRecent()
	w.add(pgactivity.Snapshot{Time: t0, Backends: []pgactivity.Backend{
		{PID: 1, Tenant: "unknown", Application: "web", User: "app", Database: "shop", Client: "10.0.0.1", State: pgactivity.StateActive, Query: "SELECT 1"},
		{PID: 2, Tenant: "(untagged)", Application: "web", User: "app", Database: "shop", Client: "10.0.0.2", State: pgactivity.StateActive, Query: "SELECT 2"},
		{PID: 3, Application: "batchjob", User: "batch", Database: "shop", State: pgactivity.StateActive,
			Query: "UPDATE pgbench_accounts SET abalance = abalance + -5 WHERE aid = 7;"},
		{PID: 4, Application: "batchjob", User: "batch", Database: "shop", State: pgactivity.StateActive,
			Query: "UPDATE pgbench_accounts SET abalance = abalance + 12 WHERE aid = 99;"},
		{PID: 5, LeaderPID: 4, State: pgactivity.StateActive},
	}}, time.Second)
	rows := func(g string) string {
		s := w.snapshot(t0, Query{GroupBy: g}, "")
		if s.GroupBy != g {
			t.Fatalf("group %q: snapshot says %q", g, s.GroupBy)
		}
		var b strings.Builder
		for _, r := range s.Tenants {
			fmt.Fprintf(&b, "%q/%v=%g ", r.Tenant, r.Untagged, r.DBLoad)
		}
		for _, st := range s.Statements {
			fmt.Fprintf(&b, "%d:%q ", st.PID, st.Group)
		}
		return b.String()
	}
	for _, c := range []struct{ group, want string }{
		{api.GroupTenant, `""/true=3 "(untagged)"/false=1 "unknown"/false=1 1:"unknown" 2:"(untagged)" 3:"" 4:"" `},
		{api.GroupApplication, `"batchjob"/false=3 "web"/false=2 1:"web" 2:"web" 3:"batchjob" 4:"batchjob" `},
		{api.GroupUser, `"batch"/false=3 "app"/false=2 1:"app" 2:"app" 3:"batch" 4:"batch" `},
		{api.GroupDatabase, `"shop"/false=5 1:"shop" 2:"shop" 3:"shop" 4:"shop" `},
		{api.GroupClient, `""/true=3 "10.0.0.1"/false=1 "10.0.0.2"/false=1 1:"10.0.0.1" 2:"10.0.0.2" 3:"" 4:"" `},
		{api.GroupFingerprint, `"UPDATE pgbench_accounts SET abalance = abalance + ? WHERE aid = ?"/false=3 "SELECT ?"/false=2 ` +
			`1:"SELECT ?" 2:"SELECT ?" 3:"UPDATE pgbench_accounts SET abalance = abalance + ? WHERE aid = ?" 4:"UPDATE pgbench_accounts SET abalance = abalance + ? WHERE aid = ?" `},
	} {
		if got := rows(c.group); got != c.want {
			t.Errorf("group by %s:\n got %s\nwant %s", c.group, got, c.want)
		}
	}
	s := w.snapshot(t0, Query{}, "")
	if s.ParallelWorkers != 1 {
		t.Errorf("parallel workers %d", s.ParallelWorkers)
	}
	for _, st := range s.Statements {
		if st.PID == 4 && st.Workers != 1 {
			t.Errorf("statement 4 has %d workers", st.Workers)
		}
	}
}

// TestPGWindowGroupValueNamedOther: grouped by application (or user,
// database…), a value really named "other" is a row of its own under its
// stand-in (tenant.EscapeValue), as a tenant of that name is, never one
// more row named like the overflow of the values beyond the top ones; its
// statements name that row.
func TestPGWindowGroupValueNamedOther(t *testing.T) {
	w := newPGRecent()
	var bs []pgactivity.Backend
	for i, app := range []string{"other", "other", "other", "web", "web", "cron", "psql"} {
		bs = append(bs, pgactivity.Backend{PID: int32(i + 1), Tenant: "acme", Application: app, User: app, Database: app,
			State: pgactivity.StateActive, Query: "SELECT 1"})
	}
	w.add(pgactivity.Snapshot{Time: t0, Backends: bs}, time.Second)
	own := tenant.EscapeValue(tenant.Other)
	for _, g := range []string{api.GroupApplication, api.GroupUser, api.GroupDatabase} {
		s := w.snapshot(t0, Query{GroupBy: g, Top: 2}, "")
		var got []string
		for _, r := range s.Tenants {
			got = append(got, fmt.Sprintf("%s=%g", r.Tenant, r.DBLoad))
		}
		if want := own + "=3 web=2 other=2"; strings.Join(got, " ") != want {
			t.Errorf("group by %s: rows %s, want %s", g, strings.Join(got, " "), want)
		}
		for _, st := range s.Statements {
			if st.PID <= 3 && st.Group != own {
				t.Errorf("group by %s: statement %d names row %q, want %q", g, st.PID, st.Group, own)
			}
		}
	}
}

func TestPGWindowParallelWorkersAreLoadNotStatements(t *testing.T) {
	w := newPGRecent()
	w.add(sample1(), time.Second)
	s := w.snapshot(t0, Query{Top: 10}, "")
	if s.Source != api.SourcePostgres || s.Measure != api.MeasureDB || s.TenantsSeen != 3 || s.Window != time.Second {
		t.Fatalf("snapshot header %+v", s)
	}
	got := map[string]api.TenantRow{}
	var untagged api.TenantRow
	for _, r := range s.Tenants {
		if r.Untagged {
			untagged = r
			continue
		}
		got[r.Tenant] = r
	}
	big := got["bigcorp"]
	if big.DBLoad != 2 || big.Tier != "T2" || big.Waits[pgactivity.WaitCPU] != 1 || big.Waits["IO"] != 1 ||
		len(big.Routes) != 1 || big.Routes[0].Route != "POST /import" || big.Routes[0].DBLoad != 2 {
		t.Fatalf("bigcorp (leader + worker) %+v", big)
	}
	if got["acme"].DBLoad != 1 || untagged.DBLoad != 1 || untagged.Tenant != "" {
		t.Fatalf("acme %+v untagged %+v", got["acme"], untagged)
	}
	if s.Tenants[0].Tenant != "bigcorp" || s.Tenants[0].Share != 0.5 {
		t.Fatalf("first row %+v", s.Tenants[0])
	}
	var pids []int32
	for _, st := range s.Statements {
		pids = append(pids, st.PID)
	}
	if fmt.Sprint(pids) != "[10 20 40]" {
		t.Fatalf("statements %v: want the leader, not its worker, longest first", pids)
	}
	if len(s.Blocked) != 1 || s.Blocked[0].Blocked.PID != 20 || s.Blocked[0].Blocking.PID != 10 || s.Blocked[0].Blocking.Tenant != "bigcorp" {
		t.Fatalf("blocked %+v", s.Blocked)
	}

	// A second sample with bigcorp's leader alone (its workers done): the
	// window averages over both.
	w.add(pgactivity.Snapshot{Time: t0.Add(time.Second), Backends: []pgactivity.Backend{
		{PID: 10, Tenant: "bigcorp", State: pgactivity.StateActive, Duration: 41 * time.Second},
	}}, time.Second)
	s = w.snapshot(t0.Add(time.Second), Query{Top: 1}, "hidden sessions")
	if len(s.Tenants) != 3 || s.Tenants[0].Tenant != "bigcorp" || s.Tenants[0].DBLoad != 1.5 {
		t.Fatalf("top 1: %+v", s.Tenants)
	}
	h := s.Tenants[0].History
	if len(h) != api.HistoryLen || h[len(h)-2] != 2 || h[len(h)-1] != 1 {
		t.Fatalf("bigcorp history ends %v", h[len(h)-3:])
	}
	if !s.Tenants[1].Untagged || s.Tenants[1].DBLoad != 0.5 {
		t.Fatalf("the untagged row is shown whatever the top: %+v", s.Tenants[1])
	}
	o := s.Tenants[2]
	if o.Tenant != api.OtherTenant || o.DBLoad != 0.5 || math.Abs(o.Share-0.2) > 1e-9 {
		t.Fatalf("other row %+v", o)
	}
	if s.Collector.SamplerError != "hidden sessions" {
		t.Fatalf("sampler error %q", s.Collector.SamplerError)
	}
	// A tenant idle for a whole history is forgotten.
	for range api.HistoryLen {
		w.add(pgactivity.Snapshot{}, time.Second)
	}
	if len(w.groups) != 0 {
		t.Fatalf("%d groups kept after %d idle samples", len(w.groups), api.HistoryLen)
	}
	if s := w.snapshot(t0, Query{}, ""); len(s.Tenants) != 0 || len(s.Statements) != 0 {
		t.Fatalf("idle snapshot %+v", s)
	}
}

func TestPGWindowEmpty(t *testing.T) {
	s := newPGRecent().snapshot(t0, Query{}, "")
	if s.Tenants == nil || s.HotKeys == nil || s.Services == nil || s.Enforcement.Tiers[3].Tier != "T3" {
		t.Fatalf("an empty snapshot must have empty, not null, lists: %+v", s)
	}
}

func suffix(t *testing.T) string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// sleeper runs a tagged pg_sleep on its own connection until the test
// ends; it returns the backend's pid. With parallel set, the server runs
// the statement in a parallel worker under its leader.
func sleeper(t *testing.T, dsn, tenantName, route string, parallel ...bool) int32 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if len(parallel) > 0 && parallel[0] {
		// debug_parallel_query since PostgreSQL 16, force_parallel_mode before.
		if _, err := conn.Exec(ctx, "SET debug_parallel_query = on"); err != nil {
			if _, err := conn.Exec(ctx, "SET force_parallel_mode = on"); err != nil {
				t.Fatal(err)
			}
		}
	}
	pid := int32(conn.PgConn().PID())
	q := sqlcomment.Append("SELECT pg_sleep(60)", map[string]string{sqlcomment.KeyTenant: tenantName, sqlcomment.KeyRoute: route, sqlcomment.KeyTier: "T3"})
	done := make(chan struct{})
	go func() {
		defer close(done)
		conn.Exec(context.Background(), q) // ends when cancelled or terminated
	}()
	t.Cleanup(func() {
		conn.PgConn().CancelRequest(context.Background())
		<-done
		conn.Close(context.Background())
	})
	return pid
}

// TestPostgresSourceReal samples the real PostgreSQL: tagged pg_sleep
// sessions of two tenants show up grouped by tenant, and c / k cancel and
// terminate them.
func TestPostgresSourceReal(t *testing.T) {
	dsn := testsvc.Postgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sfx := suffix(t)
	a, b := "tui-a-"+sfx, "tui-b-"+sfx
	pa1 := sleeper(t, dsn, a, "GET /a")
	pa2 := sleeper(t, dsn, a, "GET /a2")
	pb := sleeper(t, dsn, b, "GET /b")
	par := "tui-par-" + sfx
	pp := sleeper(t, dsn, par, "GET /par", true)

	src, err := NewPostgres(ctx, dsn, WithInterval(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if f := src.Features(); f.Throttle || !f.Signal || !f.Group {
		t.Fatalf("features %+v", f)
	}
	var s api.Snapshot
	for deadline := time.Now().Add(20 * time.Second); ; {
		if s, err = src.Next(ctx, Query{Top: 1000}); err != nil {
			t.Fatal(err)
		}
		rows := map[string]api.TenantRow{}
		for _, r := range s.Tenants {
			rows[r.Tenant] = r
		}
		if rows[a].DBLoad > 0 && rows[b].DBLoad > 0 && rows[a].Tier == "T3" && rows[par].DBLoad > 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tenants %s and %s not seen: %+v", a, b, s.Tenants)
		}
	}
	stmts := map[int32]api.StatementRow{}
	for _, st := range s.Statements {
		stmts[st.PID] = st
	}
	if stmts[pa1].Tenant != a || stmts[pa2].Tenant != a || stmts[pb].Tenant != b || stmts[pb].Route != "GET /b" {
		t.Fatalf("statements %+v", s.Statements)
	}
	// The parallel query: its worker is load of the tenant (DB load above
	// 1 with one session) but not a statement of its own.
	n := 0
	for _, st := range s.Statements {
		if st.Tenant == par {
			n++
			if st.PID != pp {
				t.Fatalf("statement of %s from pid %d, want only the leader %d", par, st.PID, pp)
			}
		}
	}
	if n != 1 {
		t.Fatalf("%d statements of %s, want 1 (the leader): %+v", n, par, s.Statements)
	}

	// c cancels pa1's statement; k terminates pb's session: as shown.
	if err := src.CancelStatement(ctx, pgactivity.Target{PID: pa1, QueryStart: stmts[pa1].QueryStart}, "qtop test"); err != nil {
		t.Fatal(err)
	}
	if err := src.TerminateSession(ctx, pgactivity.Target{PID: pb, BackendStart: stmts[pb].BackendStart}, "qtop test"); err != nil {
		t.Fatal(err)
	}
	// A statement of pa2 that is not the one shown is left alone.
	if err := src.CancelStatement(ctx, pgactivity.Target{PID: pa2, QueryStart: stmts[pa2].QueryStart.Add(-time.Second)}, "qtop test"); !errors.Is(err, pgactivity.ErrMovedOn) {
		t.Fatalf("cancel of another statement: %v", err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; {
		if s, err = src.Next(ctx, Query{Top: 1000}); err != nil {
			t.Fatal(err)
		}
		seen := map[int32]bool{}
		for _, st := range s.Statements {
			seen[st.PID] = true
		}
		if !seen[pa1] && !seen[pb] && seen[pa2] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after cancel/terminate: %+v", s.Statements)
		}
	}
	if err := src.Cancel(ctx, -1); !errors.Is(err, pgactivity.ErrBadPID) {
		t.Fatalf("cancel -1: %v", err)
	}
	if err := src.Throttle(ctx, rule("x")); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("throttle without a collector: %v", err)
	}
	src.Close()
	if _, err := src.Next(ctx, Query{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close: %v", err)
	}
}

func TestPostgresBadDSN(t *testing.T) {
	ctx := context.Background()
	if _, err := NewPostgres(ctx, "postgres://%zz"); !errors.Is(err, ErrInput) {
		t.Fatalf("bad DSN: %v", err)
	}
	_, err := NewPostgres(ctx, "postgres://nobody@127.0.0.1:1/none?connect_timeout=2")
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("closed port: %v", err)
	}
	if _, err := NewPostgres(ctx, "postgres://x@127.0.0.1/db", WithInterval(-time.Second)); !errors.Is(err, ErrInput) {
		t.Fatalf("negative interval: %v", err)
	}
}
