package sqlcomment_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/sqlcomment"
	"github.com/qtop-dev/qtop/tenant"
)

// waitInFlight waits until budget i has n statements in flight.
func waitInFlight(t *testing.T, b *sqlcomment.Budgets, i int, n int64) {
	t.Helper()
	testsvc.Eventually(t, 10*time.Second, fmt.Sprintf("budget %d with %d statements in flight", i, n), func() bool {
		bs, _ := b.Stats()
		return bs[i].InFlight == n
	})
}

// TestPostgresBudget runs the budget rules through database/sql and pgx's
// stdlib on the real server: a concurrency budget of 1 in Enforce mode
// refuses a second statement before it is sent, a transaction is refused
// at its begin and never halfway, and a runaway rule cancels a statement
// on the server and then refuses its shape for the cool-down.
func TestPostgresBudget(t *testing.T) {
	b := sqlcomment.NewBudgets()
	if err := b.Set([]policy.Budget{{ID: "analytics", Match: []map[string]string{{"tenant": "analytics"}},
		Concurrency: 1, Mode: policy.Enforce, Reason: "test"}},
		[]policy.Runaway{{ID: "long", Match: []map[string]string{{"tenant": "runaway"}}, AfterSeconds: 0.2,
			Action: policy.Cancel, CooldownSeconds: 600, Reason: "test"}}); err != nil {
		t.Fatal(err)
	}
	db := openPG(t, sqlcomment.WithBudgets(b))
	ctx := context.Background()
	an := tenant.With(ctx, tenant.Tags{Tenant: "analytics"})
	acme := tenant.With(ctx, tenant.Tags{Tenant: "acme"})

	// A transaction begun while the budget has room.
	tx, err := db.BeginTx(an, nil)
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		rows, err := db.QueryContext(an, "SELECT pg_sleep(0.05)")
		if err == nil {
			<-release // hold the statement in flight until the checks are done
			for rows.Next() {
			}
			err = rows.Close()
		}
		done <- err
	}()
	waitInFlight(t, b, 0, 1)

	_, err = db.ExecContext(an, "SELECT 1")
	var be *sqlcomment.BudgetError
	if !errors.Is(err, sqlcomment.ErrBudget) || !errors.As(err, &be) || be.Limit != sqlcomment.LimitConcurrency || be.Budget != "analytics" {
		t.Fatalf("second analytics statement: err = %v, want a concurrency refusal", err)
	}
	if _, err := db.ExecContext(acme, "SELECT 1"); err != nil {
		t.Fatalf("another tenant: %v", err)
	}
	if _, err := db.BeginTx(an, nil); !errors.Is(err, sqlcomment.ErrBudget) {
		t.Fatalf("begin while full: err = %v, want ErrBudget", err)
	}
	// Inside the transaction begun before: over the limit, still sent.
	var n int
	if err := tx.QueryRowContext(an, "SELECT 41 + 1").Scan(&n); err != nil || n != 42 {
		t.Fatalf("statement inside the transaction: %v, %d", err, n)
	}
	if _, err := tx.ExecContext(an, "SELECT 2"); err != nil {
		t.Fatalf("second statement inside the transaction: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("commit: %v", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(an, "SELECT 1"); err != nil {
		t.Fatalf("after the first statement ended: %v", err)
	}
	bs, _ := b.Stats()
	if s := bs[0]; s.Refused[sqlcomment.LimitConcurrency-1] != 2 || s.InTx[sqlcomment.LimitConcurrency-1] != 2 || s.InFlight != 0 {
		t.Fatalf("stats = %+v", s)
	}

	// Runaway: cancelled by its deadline on the server, then watched.
	rw := tenant.With(ctx, tenant.Tags{Tenant: "runaway"})
	_, err = db.ExecContext(rw, "SELECT pg_sleep(30)")
	if err == nil {
		t.Fatal("a runaway statement was not cancelled")
	}
	_, err = db.ExecContext(rw, "SELECT pg_sleep(0)")
	if !errors.As(err, &be) || be.Limit != sqlcomment.LimitWatch || be.Budget != "long" || be.RetryAfter <= 0 {
		t.Fatalf("same shape in the cool-down: err = %v, want a watch refusal", err)
	}
	if _, err := db.ExecContext(rw, "SELECT 1"); err != nil {
		t.Fatalf("another shape: %v", err)
	}
	_, rs := b.Stats()
	if rs[0].Cancelled != 1 || rs[0].Refused != 1 {
		t.Fatalf("runaway stats = %+v", rs[0])
	}
	// No session of ours still runs the statement. The cancel request
	// travels on its own connection, so the server may still be ending the
	// statement when the client has returned: wait for it, bounded.
	pg := plainPG(t)
	testsvc.Eventually(t, 10*time.Second, "the cancelled statement ended on the server", func() bool {
		var running int
		if err := pg.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE state = 'active' AND query LIKE 'SELECT pg_sleep(30)%tenant=''runaway''%'`).Scan(&running); err != nil {
			t.Fatal(err)
		}
		return running == 0
	})
}

// TestPostgresBudgetPrepared: executions of a database/sql prepared
// statement are budgeted with the tags of the context each runs in.
func TestPostgresBudgetPrepared(t *testing.T) {
	b := sqlcomment.NewBudgets()
	if err := b.Set([]policy.Budget{{ID: "analytics", Match: []map[string]string{{"tenant": "analytics"}},
		Concurrency: 1, Mode: policy.Enforce, Reason: "test"}}, nil); err != nil {
		t.Fatal(err)
	}
	db := openPG(t, sqlcomment.WithBudgets(b))
	ctx := context.Background()
	stmt, err := db.PrepareContext(ctx, "SELECT $1::int8 + 1") // prepared without tags
	if err != nil {
		t.Fatal(err)
	}
	defer stmt.Close()
	an := tenant.With(ctx, tenant.Tags{Tenant: "analytics"})
	rows, err := stmt.QueryContext(an, 1) // in flight until closed
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stmt.ExecContext(an, 2); !errors.Is(err, sqlcomment.ErrBudget) {
		t.Fatalf("second execution: err = %v, want ErrBudget", err)
	}
	var n int64
	if err := stmt.QueryRowContext(ctx, 41).Scan(&n); err != nil || n != 42 {
		t.Fatalf("untagged execution: %v %d", err, n)
	}
	rows.Close()
	if err := stmt.QueryRowContext(an, 1).Scan(&n); err != nil || n != 2 {
		t.Fatalf("after the first closed: %v %d", err, n)
	}
	if bs, _ := b.Stats(); bs[0].Refused[sqlcomment.LimitConcurrency-1] != 1 || bs[0].InFlight != 0 {
		t.Fatalf("stats = %+v", bs[0])
	}
}

// wantRunaway fails t unless err is the error of a statement that rule's
// deadline of after ended: it names the rule and keeps the driver's error,
// errors.Is DeadlineExceeded and ErrRunaway.
func wantRunaway(t *testing.T, what string, err error, rule string, after time.Duration) {
	t.Helper()
	want := fmt.Sprintf("sqlcomment: cancelled by runaway rule %q after %v: ", rule, after)
	var re *sqlcomment.RunawayError
	if !errors.As(err, &re) || re.Rule != rule || re.After != after || !strings.HasPrefix(err.Error(), want) ||
		!errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, sqlcomment.ErrRunaway) ||
		!errors.Is(re.Err, context.DeadlineExceeded) {
		t.Fatalf("%s: err = %v, want %q + the driver's deadline error", what, err, want)
	}
}

// wantNotRunaway fails t unless err is the caller's own target error, not
// put on a runaway rule.
func wantNotRunaway(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) || errors.Is(err, sqlcomment.ErrRunaway) || strings.Contains(err.Error(), "runaway") {
		t.Fatalf("%s: err = %v, want the caller's %v and no runaway rule", what, err, target)
	}
}

// runawayRows is a query whose first rows reach the client at once (they
// fill the server's send buffer) and whose last runs into the deadline, so
// that the deadline ends it in rows.Next.
const runawayRows = "SELECT CASE WHEN g < 1000 THEN repeat('x', 1000) ELSE pg_sleep(30)::text END FROM generate_series(1, 1000) g"

// TestPostgresRunawayError: a statement that a runaway rule's deadline
// ends reaches the caller with an error naming the rule, on every path
// database/sql has (Exec, Query then rows.Next and rows.Err, QueryRow then
// Scan, and the same through a prepared statement), and one that the
// caller's own earlier deadline or cancel ends does not.
func TestPostgresRunawayError(t *testing.T) {
	const after = 500 * time.Millisecond
	b := sqlcomment.NewBudgets()
	if err := b.Set(nil, []policy.Runaway{
		{ID: "long-reports", Match: []map[string]string{{"tenant": "reports"}}, AfterSeconds: after.Seconds(),
			Action: policy.Cancel, Reason: "test"},
		{ID: "slow", Match: []map[string]string{{"tenant": "slow"}}, AfterSeconds: 600, Action: policy.Cancel, Reason: "test"},
	}); err != nil {
		t.Fatal(err)
	}
	db := openPG(t, sqlcomment.WithBudgets(b))
	ctx := context.Background()
	rw := tenant.With(ctx, tenant.Tags{Tenant: "reports"})

	// The caller's own deadline, later than the rule's.
	later, cancel := context.WithTimeout(rw, time.Hour)
	defer cancel()
	_, err := db.ExecContext(later, "SELECT pg_sleep(30)")
	wantRunaway(t, "Exec", err, "long-reports", after)

	rows, err := db.QueryContext(rw, runawayRows)
	if err != nil {
		t.Fatalf("Query: %v, want the first row before the deadline", err)
	}
	n := 0
	for rows.Next() {
		n++
	}
	if n == 0 || n == 1000 {
		t.Fatalf("%d rows before the deadline, want some and not the last", n)
	}
	wantRunaway(t, "rows.Err", rows.Err(), "long-reports", after)
	rows.Close()

	var s string
	wantRunaway(t, "QueryRow", db.QueryRowContext(rw, "SELECT pg_sleep(30)::text").Scan(&s), "long-reports", after)

	stmt, err := db.PrepareContext(ctx, "SELECT pg_sleep($1::float8)::text")
	if err != nil {
		t.Fatal(err)
	}
	defer stmt.Close()
	_, err = stmt.ExecContext(rw, 30)
	wantRunaway(t, "Stmt.Exec", err, "long-reports", after)
	wantRunaway(t, "Stmt.QueryRow", stmt.QueryRowContext(rw, 30).Scan(&s), "long-reports", after)

	// The caller's deadline or cancel comes before the rule's.
	sl := tenant.With(ctx, tenant.Tags{Tenant: "slow"})
	early, cancel := context.WithTimeout(sl, 200*time.Millisecond)
	defer cancel()
	_, err = db.ExecContext(early, "SELECT pg_sleep(30)")
	wantNotRunaway(t, "caller's deadline", err, context.DeadlineExceeded)
	stopped, stop := context.WithCancel(sl)
	defer stop()
	time.AfterFunc(200*time.Millisecond, stop)
	err = db.QueryRowContext(stopped, "SELECT pg_sleep(30)::text").Scan(&s)
	wantNotRunaway(t, "caller's cancel", err, context.Canceled)

	_, rs := b.Stats()
	if rs[0].Cancelled != 5 || rs[1].Cancelled != 0 {
		t.Fatalf("runaway stats = %+v", rs)
	}
}
