package pgactivity

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/sqlcomment"
	"github.com/qtop-dev/qtop/tenant"
)

// The tests here talk to the real PostgreSQL of scripts/services, which
// other packages' tests share: every tenant, table and role name carries a
// random suffix, and assertions look only at this test's sessions.

func suffix(t testing.TB) string {
	t.Helper()
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// newPool opens a pool on the test server, as the test server's role or,
// when user is set, as that role with password pass.
func newPool(t testing.TB, user, pass string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(testsvc.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		cfg.ConnConfig.User, cfg.ConnConfig.Password = user, pass
	}
	cfg.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// session is one dedicated connection that runs statements in the
// background, so the sampler sees it active.
type session struct {
	conn *pgx.Conn
	pid  int32
	done chan error // the result of the statement started by start
}

func connect(t testing.TB) *session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, testsvc.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	s := &session{conn: conn, pid: int32(conn.PgConn().PID())}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn.Close(ctx)
	})
	return s
}

// start runs sql in the background; wait returns its error.
func (s *session) start(ctx context.Context, sql string) {
	s.done = make(chan error, 1)
	go func() {
		_, err := s.conn.Exec(ctx, sql)
		s.done <- err
	}()
}

func (s *session) wait(t testing.TB) error {
	t.Helper()
	select {
	case err := <-s.done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("session %d: statement did not end", s.pid)
		return nil
	}
}

func tagged(sql, ten, route string) string {
	return sqlcomment.Append(sql, map[string]string{"tenant": ten, "route": route, "tier": "T2"})
}

// waitFor samples until cond holds for a snapshot (at most 20 s).
func waitFor(t testing.TB, s *Sampler, what string, cond func(Snapshot) bool) Snapshot {
	t.Helper()
	var snap Snapshot
	if !testsvc.PollEvery(20*time.Second, 50*time.Millisecond, func() bool {
		var err error
		if snap, err = s.Sample(context.Background()); err != nil {
			t.Fatalf("sample: %v", err)
		}
		return cond(snap)
	}) {
		t.Fatalf("no sample showed %s; last: %+v", what, snap)
	}
	return snap
}

func byPID(snap Snapshot, pid int32) (Backend, bool) {
	for _, b := range snap.Backends {
		if b.PID == pid {
			return b, true
		}
	}
	return Backend{}, false
}

func countActive(snap Snapshot, ten string) int {
	n := 0
	for _, b := range snap.Backends {
		if b.Tenant == ten && b.Active() {
			n++
		}
	}
	return n
}

// TestSampleAAS runs N sleeping sessions of tenant A and M of tenant B,
// samples them with Run for two seconds and checks AAS(A) = N, AAS(B) = M,
// all of it waiting on Timeout (pg_sleep).
func TestSampleAAS(t *testing.T) {
	const n, m = 4, 2
	sfx := suffix(t)
	tenA, tenB := "aas-a-"+sfx, "aas-b-"+sfx
	pool := newPool(t, "", "")
	smp := NewSampler(pool)

	ctx, stop := context.WithCancel(context.Background())
	var sessions []*session
	for i := range n + m {
		s := connect(t)
		ten := tenA
		if i >= n {
			ten = tenB
		}
		s.start(ctx, tagged("SELECT pg_sleep(60)", ten, "GET /sleep"))
		sessions = append(sessions, s)
	}
	defer func() {
		stop()
		for _, s := range sessions {
			s.wait(t)
		}
	}()
	snap := waitFor(t, smp, "every session active", func(s Snapshot) bool {
		return countActive(s, tenA) == n && countActive(s, tenB) == m
	})
	b, _ := byPID(snap, sessions[0].pid)
	if b.Route != "GET /sleep" || b.Tier.String() != "T2" || b.WaitEventType != "Timeout" || b.WaitEvent != "PgSleep" ||
		b.Database == "" || b.User == "" || b.QueryStart.IsZero() || !strings.Contains(b.Query, "pg_sleep(60)") {
		t.Errorf("session: %+v", b)
	}

	// Ten samples, 200 ms apart: two seconds of sampling.
	const samples, interval = 10, 200 * time.Millisecond
	agg := NewAggregator()
	rctx, rstop := context.WithTimeout(context.Background(), time.Minute)
	defer rstop()
	var errs []error
	taken := 0
	smp.Run(rctx, interval, func(s Snapshot, err error) {
		if err != nil {
			errs = append(errs, err)
		} else {
			agg.Add(s)
		}
		if taken++; taken == samples {
			rstop()
		}
	})
	if len(errs) > 0 {
		t.Fatalf("run: %v", errs)
	}
	w := agg.Cut(time.Now())
	if w.Samples != samples {
		t.Fatalf("%d samples, want %d", w.Samples, samples)
	}
	la, lb := load(w, tenA), load(w, tenB)
	t.Logf("%d samples: AAS(A) = %v %v, AAS(B) = %v %v", w.Samples, la.AAS, la.Waits, lb.AAS, lb.Waits)
	if !near(la.AAS, n) || !near(la.Waits["Timeout"], n) || la.Statements != n || la.Longest < (samples-1)*interval {
		t.Errorf("A: %+v", la)
	}
	if !near(la.Routes["GET /sleep"], n) {
		t.Errorf("A's routes: %v", la.Routes)
	}
	if !near(lb.AAS, m) || !near(lb.Waits["Timeout"], m) || lb.Statements != m {
		t.Errorf("B: %+v", lb)
	}
	// Tenants by AAS: A comes before B.
	ia, ib := -1, -1
	for i, l := range w.Tenants {
		switch l.Tenant {
		case tenA:
			ia = i
		case tenB:
			ib = i
		}
	}
	if ia < 0 || ib < 0 || ia > ib {
		t.Errorf("order: A at %d, B at %d", ia, ib)
	}
}

// TestBlockedPair: a tagged transaction holds a row lock, another tagged
// one waits for it; the pair is reported with both tenants. Then Cancel
// stops the waiter's statement and Terminate ends the holder's session.
func TestBlockedPairCancelTerminate(t *testing.T) {
	sfx := suffix(t)
	table := "qtop_pgactivity_lock_" + sfx
	holdT, waitT := "holder-"+sfx, "waiter-"+sfx
	pool := newPool(t, "", "")
	ctx := context.Background()
	if _, err := pool.Exec(ctx, fmt.Sprintf(`CREATE TABLE %s (id int PRIMARY KEY, v int); INSERT INTO %[1]s VALUES (1, 0)`, table)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+table) })
	smp := NewSampler(pool)

	holder, waiter := connect(t), connect(t)
	if _, err := holder.conn.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.conn.Exec(ctx, tagged("UPDATE "+table+" SET v = v + 1 WHERE id = 1", holdT, "POST /hold")); err != nil {
		t.Fatal(err)
	}
	waiter.start(ctx, tagged("UPDATE "+table+" SET v = v + 10 WHERE id = 1", waitT, "POST /wait"))

	snap := waitFor(t, smp, "the waiter blocked", func(s Snapshot) bool {
		b, ok := byPID(s, waiter.pid)
		return ok && len(b.BlockedBy) > 0
	})
	agg := NewAggregator()
	agg.Add(snap)
	w := agg.Cut(time.Now())
	var pair *BlockPair
	for i, p := range w.Blocked {
		if p.Blocked.PID == waiter.pid {
			pair = &w.Blocked[i]
		}
	}
	if pair == nil {
		t.Fatalf("no pair for the waiter in %+v", w.Blocked)
	}
	if pair.Blocked.Tenant != waitT || pair.Blocking.Tenant != holdT || pair.Blocking.PID != holder.pid ||
		pair.Blocking.State != StateIdleInTransaction || pair.Blocked.WaitEventType != "Lock" || pair.Blocking.Route != "POST /hold" ||
		pair.Blocking.XactStart.IsZero() || pair.Blocking.XactStart.After(pair.Blocking.QueryStart) || pair.Blocking.Duration != 0 {
		t.Errorf("pair: blocked %+v\nblocking %+v", pair.Blocked, pair.Blocking)
	}
	if l := load(w, waitT); !near(l.AAS, 1) || !near(l.Waits["Lock"], 1) {
		t.Errorf("waiter's load: %+v", l)
	}
	if l := load(w, holdT); l.AAS != 0 {
		t.Errorf("an idle-in-transaction holder adds no load: %+v", l)
	}

	// Cancel: the waiter's statement fails with query_canceled, its
	// session lives on.
	if err := Cancel(ctx, pool, waiter.pid); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	var pe *pgconn.PgError
	if err := waiter.wait(t); !errors.As(err, &pe) || pe.Code != "57014" {
		t.Fatalf("waiter after cancel: %v", err)
	}
	var one int
	if err := waiter.conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("waiter's session after cancel: %v", err)
	}

	// Terminate: the holder's session ends and its update rolls back.
	if err := Terminate(ctx, pool, holder.pid); err != nil {
		t.Fatalf("terminate: %v", err)
	}
	waitFor(t, smp, "the holder gone", func(s Snapshot) bool {
		_, ok := byPID(s, holder.pid)
		return !ok
	})
	if _, err := holder.conn.Exec(ctx, "SELECT 1"); err == nil {
		t.Error("the terminated session still answers")
	}
	var v int
	if err := pool.QueryRow(ctx, "SELECT v FROM "+table+" WHERE id = 1").Scan(&v); err != nil || v != 0 {
		t.Errorf("v = %d, %v; the holder's update should have rolled back", v, err)
	}
	// Signalling a backend that is gone says so.
	if err := Cancel(ctx, pool, holder.pid); !errors.Is(err, ErrNoBackend) {
		t.Errorf("cancel of an ended backend: %v", err)
	}
	if err := Terminate(ctx, pool, holder.pid); !errors.Is(err, ErrNoBackend) {
		t.Errorf("terminate of an ended backend: %v", err)
	}
}

func TestSignalBadPID(t *testing.T) {
	for _, pid := range []int32{0, -1} {
		// No query is sent for an impossible pid: a nil pool is never touched.
		if err := Cancel(context.Background(), nil, pid); !errors.Is(err, ErrBadPID) {
			t.Errorf("cancel %d: %v", pid, err)
		}
		if err := Terminate(context.Background(), nil, pid); !errors.Is(err, ErrBadPID) {
			t.Errorf("terminate %d: %v", pid, err)
		}
	}
}

// TestLeastPrivilege samples through a role with only LOGIN and
// pg_monitor: it sees the statements and tags of another role's sessions.
// A role without pg_monitor gets the snapshot and an error naming the
// grant, and may not signal other roles' sessions.
func TestLeastPrivilege(t *testing.T) {
	sfx := suffix(t)
	admin := newPool(t, "", "")
	ctx := context.Background()
	mon, nomon := "qtop_mon_"+sfx, "qtop_nomon_"+sfx
	for _, sql := range []string{
		fmt.Sprintf(`CREATE ROLE %s LOGIN PASSWORD 'pw'`, mon),
		fmt.Sprintf(`GRANT pg_monitor TO %s`, mon),
		fmt.Sprintf(`CREATE ROLE %s LOGIN PASSWORD 'pw'`, nomon),
	} {
		if _, err := admin.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	// Cleanups run last-in first-out: the roles are dropped after the
	// pools below are closed.
	t.Cleanup(func() {
		for _, r := range []string{mon, nomon} {
			if _, err := admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+r); err != nil {
				t.Errorf("drop role %s: %v", r, err)
			}
		}
	})
	var super bool
	if err := admin.QueryRow(ctx, `SELECT rolsuper FROM pg_roles WHERE rolname = current_user`).Scan(&super); err != nil {
		t.Fatal(err)
	}
	if !super {
		t.Skip("the test role is not a superuser: cannot create roles to test privileges with")
	}

	ten := "priv-" + sfx
	other := connect(t) // the test server's role, not the monitor's
	sctx, stop := context.WithCancel(ctx)
	other.start(sctx, tagged("SELECT pg_sleep(60)", ten, "GET /priv"))
	defer func() { stop(); other.wait(t) }()

	monPool := newPool(t, mon, "pw")
	var hasMon bool
	if err := monPool.QueryRow(ctx, `SELECT pg_has_role('pg_monitor', 'MEMBER') AND NOT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)`).Scan(&hasMon); err != nil || !hasMon {
		t.Fatalf("monitor role is not a plain pg_monitor member: %v", err)
	}
	if err := NewSampler(monPool).Check(ctx); err != nil {
		t.Errorf("check as pg_monitor: %v", err)
	}
	if err := NewSampler(admin).Check(ctx); err != nil {
		t.Errorf("check as superuser: %v", err)
	}
	snap := waitFor(t, NewSampler(monPool), "the other role's session", func(s Snapshot) bool {
		return countActive(s, ten) == 1
	})
	b, _ := byPID(snap, other.pid)
	if b.Route != "GET /priv" || b.WaitEventType != "Timeout" || b.Hidden() {
		t.Errorf("as pg_monitor: %+v", b)
	}

	noPool := newPool(t, nomon, "pw")
	if err := NewSampler(noPool).Check(ctx); !errors.Is(err, ErrInsufficientPrivilege) || !strings.Contains(err.Error(), "GRANT pg_monitor TO "+`"`+nomon+`"`) {
		t.Errorf("check without pg_monitor: %v", err)
	}
	snap, err := NewSampler(noPool).Sample(ctx)
	if !errors.Is(err, ErrInsufficientPrivilege) {
		t.Fatalf("without pg_monitor: err = %v", err)
	}
	t.Logf("without pg_monitor: %v", err)
	if !strings.Contains(err.Error(), "GRANT pg_monitor TO "+`"`+nomon+`"`) {
		t.Errorf("the error does not name the grant: %v", err)
	}
	b, ok := byPID(snap, other.pid)
	if !ok || !b.Hidden() || b.Tenant != "" || b.Active() || snap.Hidden == 0 {
		t.Errorf("without pg_monitor: hidden %d, %+v", snap.Hidden, b)
	}
	if err := Cancel(ctx, noPool, other.pid); !errors.Is(err, ErrInsufficientPrivilege) || !strings.Contains(err.Error(), "pg_signal_backend") {
		t.Errorf("cancel without the right: %v", err)
	}
	if err := Terminate(ctx, noPool, other.pid); !errors.Is(err, ErrInsufficientPrivilege) {
		t.Errorf("terminate without the right: %v", err)
	}
}

// TestLongTenantsStayApart: two sessions whose tenants are names too long
// to be valid, the same for their first 200 bytes, are two tenants, each
// under its own stand-in (tenant.Substitute), and counted; none is
// merged with the other or with the untagged load.
func TestLongTenantsStayApart(t *testing.T) {
	sfx := suffix(t)
	pool := newPool(t, "", "")
	ctx := context.Background()
	long := strings.Repeat("a", 200) + sfx
	one, two := connect(t), connect(t)
	sctx, stop := context.WithCancel(ctx)
	one.start(sctx, tagged("SELECT pg_sleep(60)", long+"-1", "r"))
	two.start(sctx, tagged("SELECT pg_sleep(60)", long+"-2", "r"))
	defer func() { stop(); one.wait(t); two.wait(t) }()

	met, err := NewMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	snap := waitFor(t, NewSampler(pool, WithMetrics(met)), "the sessions", func(s Snapshot) bool {
		b1, ok1 := byPID(s, one.pid)
		b2, ok2 := byPID(s, two.pid)
		return ok1 && ok2 && b1.Active() && b2.Active()
	})
	for _, c := range []struct {
		s    *session
		name string
	}{{one, long + "-1"}, {two, long + "-2"}} {
		want, _ := tenant.Substitute(c.name)
		if b, _ := byPID(snap, c.s.pid); b.Tenant != want || !b.InvalidTenant() || b.Route != "r" {
			t.Errorf("%.12q…: tenant %q, invalid %v, route %q; want %q", c.name, b.Tenant, b.InvalidTenant(), b.Route, want)
		}
	}
	b1, _ := byPID(snap, one.pid)
	b2, _ := byPID(snap, two.pid)
	if b1.Tenant == b2.Tenant || b1.Tenant == "" {
		t.Errorf("merged: %q and %q", b1.Tenant, b2.Tenant)
	}
	// Other sessions of the server may count too: at least ours.
	if snap.InvalidTenants < 2 || met.InvalidTenants() < 2 {
		t.Errorf("counted %d in the snapshot, %d in all", snap.InvalidTenants, met.InvalidTenants())
	}
}

// TestTruncatedQuery: a statement longer than track_activity_query_size
// loses its trailing comment and counts as untagged; one whose comment
// opens the statement keeps its tenant.
func TestTruncatedQuery(t *testing.T) {
	sfx := suffix(t)
	pool := newPool(t, "", "")
	ctx := context.Background()
	var size int
	if err := pool.QueryRow(ctx, `SELECT setting::int FROM pg_settings WHERE name = 'track_activity_query_size'`).Scan(&size); err != nil {
		t.Fatal(err)
	}
	pad := "'" + strings.Repeat("x", size) + "'"
	cut, lead, bad := connect(t), connect(t), connect(t)
	sctx, stop := context.WithCancel(ctx)
	cut.start(sctx, tagged("SELECT pg_sleep(60), "+pad, "cut-"+sfx, "r"))
	lead.start(sctx, "/*tenant='lead-"+sfx+"'*/ SELECT pg_sleep(60), "+pad)
	bad.start(sctx, "SELECT pg_sleep(60) /*route='%ZZ',tenant='bad-"+sfx+"'*/")
	defer func() { stop(); cut.wait(t); lead.wait(t); bad.wait(t) }()

	met, err := NewMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	smp := NewSampler(pool, WithMetrics(met))
	snap := waitFor(t, smp, "the long statements", func(s Snapshot) bool {
		b1, ok1 := byPID(s, cut.pid)
		b2, ok2 := byPID(s, lead.pid)
		b3, ok3 := byPID(s, bad.pid)
		return ok1 && ok2 && ok3 && b1.Active() && b2.Active() && b3.Active()
	})
	if _, err := smp.Sample(ctx); err != nil && !errors.Is(err, ErrInsufficientPrivilege) {
		t.Fatal(err)
	}
	// Statements of other sessions of the server may be counted too: at
	// least ours (that each counts once is TestMetricsCountEachStatementOnce).
	if b3, _ := byPID(snap, bad.pid); !b3.Malformed || b3.Tenant != "bad-"+sfx || snap.Malformed < 1 {
		t.Errorf("malformed: %+v (snapshot counts %d)", b3, snap.Malformed)
	}
	if b1, _ := byPID(snap, cut.pid); !b1.TagsCut || snap.TagsCut < 1 {
		t.Errorf("cut: %+v", b1)
	}
	if mal, tr := met.Counts(); mal < 1 || tr < 1 {
		t.Errorf("counted %d malformed, %d cut", mal, tr)
	}
	b1, _ := byPID(snap, cut.pid)
	if !b1.Truncated || b1.Tenant != "" || b1.Tags != nil || len(b1.Query) >= size {
		t.Errorf("cut: truncated %v, tenant %q, %d bytes", b1.Truncated, b1.Tenant, len(b1.Query))
	}
	b2, _ := byPID(snap, lead.pid)
	if !b2.Truncated || b2.Tenant != "lead-"+sfx {
		t.Errorf("lead: truncated %v, tenant %q", b2.Truncated, b2.Tenant)
	}
	agg := NewAggregator()
	agg.Add(snap)
	w := agg.Cut(time.Now())
	if l := load(w, "cut-"+sfx); l.AAS != 0 {
		t.Errorf("the cut statement was attributed: %+v", l)
	}
}

// TestSampleExcludesItself: the sampler's own backend and sampling queries
// are never in a snapshot; idle sessions are only with WithIdle.
func TestSampleExcludesItself(t *testing.T) {
	sfx := suffix(t)
	cfg, err := pgxpool.ParseConfig(testsvc.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	ctx := context.Background()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	c, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	own := int32(c.Conn().PgConn().PID())
	c.Release()

	idler := connect(t)
	ten := "idle-" + sfx
	if _, err := idler.conn.Exec(ctx, tagged("SELECT 1", ten, "GET /idle")); err != nil {
		t.Fatal(err)
	}
	// A session whose statement carries the sampler's marker is taken for
	// another sampler and left out; the same statement without it is not.
	other, plain := connect(t), connect(t)
	sctx, stop := context.WithCancel(ctx)
	other.start(sctx, "SELECT /* "+marker+" */ pg_sleep(60)")
	plain.start(sctx, tagged("SELECT pg_sleep(60)", "plain-"+sfx, "r"))
	defer func() { stop(); other.wait(t); plain.wait(t) }()
	waitFor(t, NewSampler(pool), "the plain session", func(s Snapshot) bool { return countActive(s, "plain-"+sfx) == 1 })

	clock := func() time.Time { return t0 }
	for _, tt := range []struct {
		opts []Option
		idle bool
	}{{nil, false}, {[]Option{WithIdle(true), WithClock(clock)}, true}} {
		snap, err := NewSampler(pool, tt.opts...).Sample(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := byPID(snap, own); ok {
			t.Errorf("the sampler's own backend %d is in the snapshot", own)
		}
		for _, b := range snap.Backends {
			if strings.Contains(b.Query, marker) {
				t.Errorf("a sampling query is in the snapshot: %+v", b)
			}
		}
		if _, ok := byPID(snap, other.pid); ok {
			t.Errorf("a session running the sampler's query is in the snapshot")
		}
		if _, ok := byPID(snap, plain.pid); !ok {
			t.Errorf("the plain session is missing")
		}
		b, ok := byPID(snap, idler.pid)
		if ok != tt.idle {
			t.Errorf("WithIdle(%v): idle session present = %v", tt.idle, ok)
		}
		if ok && (b.Tenant != ten || b.State != StateIdle || b.Duration != 0) {
			t.Errorf("idle session: %+v", b)
		}
		if tt.idle && !snap.Time.Equal(t0) {
			t.Errorf("WithClock: time %v", snap.Time)
		}
	}
}

func TestSampleError(t *testing.T) {
	pool := newPool(t, "", "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	snap, err := NewSampler(pool).Sample(ctx)
	if !errors.Is(err, ErrSample) || !errors.Is(err, context.Canceled) || snap.Backends != nil {
		t.Errorf("cancelled sample: %v, %+v", err, snap)
	}
	// Run bounds each sample by WithTimeout.
	var got []error
	rctx, rstop := context.WithTimeout(context.Background(), 200*time.Millisecond)
	NewSampler(pool, WithTimeout(time.Nanosecond)).Run(rctx, 50*time.Millisecond, func(s Snapshot, err error) {
		got = append(got, err)
	})
	rstop()
	if len(got) == 0 || !errors.Is(got[0], ErrSample) || !errors.Is(got[0], context.DeadlineExceeded) {
		t.Errorf("timed-out samples: %v", got)
	}
	if err := NewSampler(pool).Check(ctx); !errors.Is(err, ErrSample) {
		t.Errorf("check with a cancelled context: %v", err)
	}

	// Run reports a failing sample and goes on; it returns when ctx ends.
	pool.Close()
	var mu sync.Mutex
	var errs []error
	rctx, stop := context.WithCancel(context.Background())
	// A timeout only for a Run that never calls back: it stops at the
	// second failing sample.
	rctx, timeout := context.WithTimeout(rctx, 20*time.Second)
	defer timeout()
	NewSampler(pool).Run(rctx, 50*time.Millisecond, func(_ Snapshot, err error) {
		mu.Lock()
		errs = append(errs, err)
		if len(errs) == 2 {
			stop()
		}
		mu.Unlock()
	})
	if len(errs) < 2 {
		t.Fatalf("%d callbacks", len(errs))
	}
	for _, err := range errs {
		if !errors.Is(err, ErrSample) {
			t.Errorf("closed pool: %v", err)
		}
	}
}

// TestParallelWorkers: a tagged statement run by a leader and its parallel
// workers is one statement, and every process of it is load of its tenant.
func TestParallelWorkers(t *testing.T) {
	sfx := suffix(t)
	table, fn := "qtop_pgactivity_par_"+sfx, "qtop_pgactivity_sleepy_"+sfx
	pool := newPool(t, "", "")
	ctx := context.Background()
	for _, sql := range []string{
		fmt.Sprintf(`CREATE TABLE %s AS SELECT g FROM generate_series(1, 100000) g`, table),
		fmt.Sprintf(`ANALYZE %s`, table),
		// pg_sleep is parallel-restricted; this wrapper is declared safe.
		fmt.Sprintf(`CREATE FUNCTION %s(int) RETURNS bool LANGUAGE plpgsql PARALLEL SAFE AS $$ BEGIN PERFORM pg_sleep(0.01); RETURN true; END $$`, fn),
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	t.Cleanup(func() {
		pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+table)
		pool.Exec(context.Background(), "DROP FUNCTION IF EXISTS "+fn+"(int)")
	})
	leader := connect(t)
	for _, set := range []string{"max_parallel_workers_per_gather = 2", "parallel_setup_cost = 0", "parallel_tuple_cost = 0", "min_parallel_table_scan_size = 0"} {
		if _, err := leader.conn.Exec(ctx, "SET "+set); err != nil {
			t.Fatal(err)
		}
	}
	ten := "par-" + sfx
	sctx, stop := context.WithCancel(ctx)
	leader.start(sctx, tagged(fmt.Sprintf("SELECT count(*) FROM %s WHERE %s(g)", table, fn), ten, "GET /report"))
	defer func() { stop(); leader.wait(t) }()

	smp := NewSampler(pool)
	snap := waitFor(t, smp, "the leader with a worker", func(s Snapshot) bool {
		return countActive(s, ten) >= 2
	})
	workers := 0
	for _, b := range snap.Backends {
		if b.Tenant != ten {
			continue
		}
		switch b.LeaderPID {
		case 0:
			if b.PID != leader.pid {
				t.Errorf("a client backend of the tenant that is not the leader: %+v", b)
			}
		case leader.pid:
			workers++
			if b.Route != "GET /report" {
				t.Errorf("worker: %+v", b)
			}
		default:
			t.Errorf("worker of another leader: %+v", b)
		}
	}
	agg := NewAggregator()
	agg.Add(snap)
	w := agg.Cut(time.Now())
	l := load(w, ten)
	t.Logf("%d workers; tenant load %+v", workers, l)
	if workers == 0 || !near(l.AAS, float64(1+workers)) || l.Statements != 1 {
		t.Errorf("%d workers, load %+v", workers, l)
	}
	n := 0
	for _, b := range w.Longest {
		if b.Tenant == ten {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the statement is %d times in Longest", n)
	}
}

func TestServerMajor(t *testing.T) {
	for v, want := range map[string]int{"15.18 (Debian 15.18-0+deb12u1)": 15, "9.6.24": 9, "17beta1": 17, "": 0, "x": 0, "99999999999999": 0} {
		if got := serverMajor(v); got != want {
			t.Errorf("serverMajor(%q) = %d, want %d", v, got, want)
		}
	}
}

// TestSampleOwnDatabase: a sampler reads the sessions of its pool's
// database only; WithAllDatabases(true) reads those of every database.
// Before, a collector sampling one application's database billed (and its
// budgets could cancel) the sessions of another database on the server.
func TestSampleOwnDatabase(t *testing.T) {
	sfx := suffix(t)
	ctx := context.Background()
	admin := connect(t)
	db := "qtop_pga_" + sfx
	if _, err := admin.conn.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := admin.conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)"); err != nil {
			t.Logf("drop database %s: %v", db, err)
		}
	})
	cfg, err := pgx.ParseConfig(testsvc.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Database = db
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	elsewhere := &session{conn: conn, pid: int32(conn.PgConn().PID())}
	here := connect(t)
	sctx, stop := context.WithCancel(ctx)
	elsewhere.start(sctx, tagged("SELECT pg_sleep(60)", "elsewhere-"+sfx, "r"))
	here.start(sctx, tagged("SELECT pg_sleep(60)", "here-"+sfx, "r"))
	defer func() {
		stop()
		elsewhere.wait(t)
		here.wait(t)
		conn.Close(context.Background()) // before the database is dropped
	}()
	pool := newPool(t, "", "")
	all := waitFor(t, NewSampler(pool, WithAllDatabases(true)), "both sessions", func(s Snapshot) bool {
		return countActive(s, "here-"+sfx) == 1 && countActive(s, "elsewhere-"+sfx) == 1
	})
	if b, _ := byPID(all, elsewhere.pid); b.Database != db {
		t.Errorf("the other database's session says database %q, want %q", b.Database, db)
	}
	own, err := NewSampler(pool).Sample(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if countActive(own, "here-"+sfx) != 1 {
		t.Errorf("the session of the pool's database is missing: %+v", own.Backends)
	}
	if _, ok := byPID(own, elsewhere.pid); ok {
		t.Errorf("a session of database %s is in the snapshot of the pool's database", db)
	}
}
