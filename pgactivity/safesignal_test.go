package pgactivity

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/internal/testsvc"
)

// TestCancelStatementOnlyTheOneShown: the sample shows statement A; by
// the time the cancel goes out the session runs statement B. The cancel of
// A must leave B running (B then ends by itself) and say so; the cancel of
// C (as sampled) stops it. (The failure seen with pg_cancel_backend(pid)
// alone: B cancelled.)
func TestCancelStatementOnlyTheOneShown(t *testing.T) {
	sfx := suffix(t)
	pool := newPool(t, "", "")
	ctx := context.Background()
	s := connect(t)
	smp := NewSampler(pool)
	a := "SELECT pg_sleep(60) /*tenant='a-" + sfx + "'*/"
	// B ends by itself: had a cancel of A reached it, it would not.
	b := "SELECT pg_sleep(2) /*tenant='b-" + sfx + "'*/"
	c := "SELECT pg_sleep(60) /*tenant='c-" + sfx + "'*/"

	s.start(ctx, a)
	snapA := waitFor(t, smp, "statement A", func(x Snapshot) bool {
		bk, ok := byPID(x, s.pid)
		return ok && bk.Active() && strings.Contains(bk.Query, "a-"+sfx)
	})
	ba, _ := byPID(snapA, s.pid)
	if ba.BackendStart.IsZero() || ba.QueryStart.IsZero() {
		t.Fatalf("sample lacks the start times: %+v", ba)
	}
	// A ends (as if by itself) and B starts on the same backend.
	if err := Cancel(ctx, pool, s.pid); err != nil {
		t.Fatal(err)
	}
	if err := s.wait(t); err == nil {
		t.Fatal("A was not cancelled")
	}
	s.start(ctx, b)
	waitFor(t, smp, "statement B", func(x Snapshot) bool {
		bk, ok := byPID(x, s.pid)
		return ok && bk.Active() && strings.Contains(bk.Query, "b-"+sfx)
	})
	err := CancelStatement(ctx, pool, TargetOf(&ba), "qtop test")
	if !errors.Is(err, ErrMovedOn) || !strings.Contains(err.Error(), "another statement") {
		t.Fatalf("cancel of A while B runs: %v", err)
	}
	if err := s.wait(t); err != nil {
		t.Fatalf("B was touched: %v", err)
	}
	// A statement shown is cancelled.
	s.start(ctx, c)
	snapC := waitFor(t, smp, "statement C", func(x Snapshot) bool {
		bk, ok := byPID(x, s.pid)
		return ok && bk.Active() && strings.Contains(bk.Query, "c-"+sfx)
	})
	cc, _ := byPID(snapC, s.pid)
	if err := CancelStatement(ctx, pool, TargetOf(&cc), "qtop test"); err != nil {
		t.Fatalf("cancel of C: %v", err)
	}
	if err := s.wait(t); err == nil || !strings.Contains(err.Error(), "cancel") {
		t.Fatalf("C not cancelled: %v", err)
	}
	// The session lives on, idle: a cancel of the finished C does nothing.
	if err := CancelStatement(ctx, pool, TargetOf(&cc), "qtop test"); !errors.Is(err, ErrMovedOn) || !strings.Contains(err.Error(), "idle") {
		t.Fatalf("cancel of a finished statement: %v", err)
	}
	if err := CancelStatement(ctx, pool, Target{PID: s.pid}, "x"); !errors.Is(err, ErrBadPID) {
		t.Fatalf("cancel without query_start: %v", err)
	}
}

// TestTerminateSessionOnlyTheOneShown: terminate acts only on the session
// (backend_start) and, when given, the transaction (xact_start) shown.
func TestTerminateSessionOnlyTheOneShown(t *testing.T) {
	pool := newPool(t, "", "")
	ctx := context.Background()
	s := connect(t)
	if _, err := s.conn.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.conn.Exec(ctx, "SELECT txid_current()"); err != nil {
		t.Fatal(err)
	}
	smp := NewSampler(pool)
	snap := waitFor(t, smp, "the session idle in its transaction", func(x Snapshot) bool {
		bk, ok := byPID(x, s.pid)
		return ok && bk.State == StateIdleInTransaction
	})
	bk, _ := byPID(snap, s.pid)
	tg := TargetOf(&bk)
	if tg.XactStart.IsZero() || tg.BackendStart.IsZero() {
		t.Fatalf("target %+v", tg)
	}
	other := tg
	other.BackendStart = tg.BackendStart.Add(-time.Second) // an earlier session of the same pid
	if err := TerminateSession(ctx, pool, other, "qtop test"); !errors.Is(err, ErrMovedOn) {
		t.Fatalf("terminate of another session: %v", err)
	}
	// The transaction shown ends; a new one starts.
	if _, err := s.conn.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.conn.Exec(ctx, "BEGIN; SELECT txid_current()"); err != nil {
		t.Fatal(err)
	}
	if err := TerminateSession(ctx, pool, tg, "qtop test"); !errors.Is(err, ErrMovedOn) {
		t.Fatalf("terminate of a finished transaction: %v", err)
	}
	if err := s.conn.Ping(ctx); err != nil {
		t.Fatalf("the session was terminated: %v", err)
	}
	// The session shown, in any transaction.
	tg.XactStart = time.Time{}
	if err := TerminateSession(ctx, pool, tg, "qtop (alice); DROP TABLE x"); err != nil {
		t.Fatalf("terminate: %v", err)
	}
	testsvc.Eventually(t, 10*time.Second, "the session terminated", func() bool { return s.conn.Ping(ctx) != nil })
	// The backend may still be exiting: terminating it succeeds until it
	// is gone, then reports no backend.
	var err error
	if !testsvc.Poll(10*time.Second, func() bool {
		err = TerminateSession(ctx, pool, tg, "x")
		return err != nil
	}) || !errors.Is(err, ErrNoBackend) {
		t.Fatalf("terminate of an ended backend: %v", err)
	}
}

func TestCommentSafe(t *testing.T) {
	for in, want := range map[string]string{
		"qtop (alice)":           "qtop (alice)",
		"*/ DROP TABLE t; --":    "__ DROP TABLE t_ --",
		"":                       "qtop",
		strings.Repeat("é", 100): strings.Repeat("_", MaxActor),
	} {
		if got := commentSafe(in); got != want {
			t.Errorf("commentSafe(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestSessionFields: the sampler reads the client address, the session's
// start and the age of the snapshot a session holds (backend_xmin): a
// session idle in a REPEATABLE READ transaction holds one (it keeps
// VACUUM from removing rows dead since).
func TestSessionFields(t *testing.T) {
	pool := newPool(t, "", "")
	ctx := context.Background()
	s := connect(t)
	if _, err := s.conn.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.conn.Exec(ctx, "SELECT count(*) FROM pg_class"); err != nil {
		t.Fatal(err)
	}
	snap := waitFor(t, NewSampler(pool), "the session holding its snapshot", func(x Snapshot) bool {
		b, ok := byPID(x, s.pid)
		return ok && b.State == StateIdleInTransaction
	})
	b, _ := byPID(snap, s.pid)
	if b.XminAge < 0 || b.BackendStart.IsZero() || b.XactStart.IsZero() || b.Client != "127.0.0.1" {
		t.Fatalf("session fields: xmin age %d, backend_start %v, xact_start %v, client %q", b.XminAge, b.BackendStart, b.XactStart, b.Client)
	}
	if _, err := s.conn.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
}

// TestSignalHiddenSession: a role with pg_signal_backend but not
// pg_monitor cannot see another role's session, so the checked cancel
// and terminate cannot tell whether it still runs what was shown. They
// must leave it alone and say which grant is missing, not that the
// backend "moved on" (it did not: the check read nulls).
func TestSignalHiddenSession(t *testing.T) {
	sfx := suffix(t)
	admin := newPool(t, "", "")
	ctx := context.Background()
	var super bool
	if err := admin.QueryRow(ctx, `SELECT rolsuper FROM pg_roles WHERE rolname = current_user`).Scan(&super); err != nil {
		t.Fatal(err)
	}
	if !super {
		t.Skip("the test role is not a superuser: cannot create roles to test privileges with")
	}
	role := "qtop_sig_" + sfx
	for _, sql := range []string{
		`CREATE ROLE ` + role + ` LOGIN PASSWORD 'pw'`,
		`GRANT pg_signal_backend TO ` + role,
	} {
		if _, err := admin.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	t.Cleanup(func() {
		if _, err := admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+role); err != nil {
			t.Errorf("drop role %s: %v", role, err)
		}
	})
	s := connect(t) // the test server's role
	s.start(ctx, "SELECT pg_sleep(3) /*tenant='hidden-"+sfx+"'*/")
	snap := waitFor(t, NewSampler(admin), "the statement", func(x Snapshot) bool {
		b, ok := byPID(x, s.pid)
		return ok && b.Active() && strings.Contains(b.Query, "hidden-"+sfx)
	})
	b, _ := byPID(snap, s.pid)
	sigPool := newPool(t, role, "pw")
	for what, err := range map[string]error{
		"cancel":    CancelStatement(ctx, sigPool, TargetOf(&b), "qtop test"),
		"terminate": TerminateSession(ctx, sigPool, TargetOf(&b), "qtop test"),
	} {
		if !errors.Is(err, ErrInsufficientPrivilege) || errors.Is(err, ErrMovedOn) || !strings.Contains(err.Error(), "GRANT pg_monitor") {
			t.Errorf("%s of a session hidden from the role: %v; want ErrInsufficientPrivilege naming pg_monitor", what, err)
		}
	}
	if err := s.wait(t); err != nil {
		t.Fatalf("the hidden session's statement was signalled: %v", err)
	}
}
