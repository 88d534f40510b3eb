package pgxcomment_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/sqlcomment"
	"github.com/qtop-dev/qtop/sqlcomment/pgxcomment"
	"github.com/qtop-dev/qtop/tenant"
)

// TestPostgresBudget: the budget rules through a wrapped pgx pool on the
// real server (concurrency refusal before sending, a transaction refused
// at Begin and never halfway, a runaway statement cancelled by its
// deadline and its shape then watched).
func TestPostgresBudget(t *testing.T) {
	b := sqlcomment.NewBudgets()
	if err := b.Set([]policy.Budget{{ID: "analytics", Match: []map[string]string{{"tenant": "analytics"}},
		Concurrency: 1, Mode: policy.Enforce, Reason: "test"}},
		[]policy.Runaway{{ID: "long", Match: []map[string]string{{"tenant": "runaway"}}, AfterSeconds: 0.2,
			Action: policy.Cancel, CooldownSeconds: 600, Reason: "test"}}); err != nil {
		t.Fatal(err)
	}
	p := pool(t)
	db := pgxcomment.Wrap(p, sqlcomment.WithBudgets(b))
	ctx := context.Background()
	an := tenant.With(ctx, tenant.Tags{Tenant: "analytics"})

	tx, err := db.Begin(an)
	if err != nil {
		t.Fatal(err)
	}
	txdb := db.With(tx)
	rows, err := db.Query(an, "SELECT pg_sleep(0.05)") // in flight until closed
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(an, "SELECT 1"); !errors.Is(err, sqlcomment.ErrBudget) {
		t.Fatalf("second analytics statement: err = %v, want ErrBudget", err)
	}
	if _, err := db.Begin(an); !errors.Is(err, sqlcomment.ErrBudget) {
		t.Fatalf("begin while full: err = %v, want ErrBudget", err)
	}
	var n int
	if err := txdb.QueryRow(an, "SELECT 41 + 1").Scan(&n); err != nil || n != 42 {
		t.Fatalf("inside the transaction: %v, %d", err, n)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(an, "SELECT 1"); err != nil {
		t.Fatalf("after the first ended: %v", err)
	}

	rw := tenant.With(ctx, tenant.Tags{Tenant: "runaway"})
	start := time.Now()
	if _, err := db.Exec(rw, "SELECT pg_sleep(30)"); err == nil {
		t.Fatal("a runaway statement was not cancelled")
	}
	took := time.Since(start)
	var be *sqlcomment.BudgetError
	if _, err := db.Exec(rw, "SELECT pg_sleep(0)"); !errors.As(err, &be) || be.Limit != sqlcomment.LimitWatch {
		t.Fatalf("same shape in the cool-down: err = %v, want a watch refusal", err)
	}
	_, rs := b.Stats()
	if rs[0].Cancelled != 1 || rs[0].Refused != 1 {
		t.Fatalf("runaway stats = %+v", rs[0])
	}
	ev := b.Events()
	if last := ev[len(ev)-1]; last.Handled != "refused" || ev[len(ev)-2].Handled != "cancelled" || ev[len(ev)-2].Duration > took {
		t.Fatalf("events = %+v", ev)
	}
	// The pool's connection is usable after the cancel.
	if err := p.QueryRow(ctx, "SELECT 1").Scan(&n); err != nil {
		t.Fatal(err)
	}
}

// wantRunaway fails t unless err is the error of a statement that rule's
// deadline of after ended: it names the rule and keeps pgx's error,
// errors.Is DeadlineExceeded and sqlcomment.ErrRunaway.
func wantRunaway(t *testing.T, what string, err error, rule string, after time.Duration) {
	t.Helper()
	want := fmt.Sprintf("sqlcomment: cancelled by runaway rule %q after %v: ", rule, after)
	var re *sqlcomment.RunawayError
	if !errors.As(err, &re) || re.Rule != rule || re.After != after || !strings.HasPrefix(err.Error(), want) ||
		!errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, sqlcomment.ErrRunaway) ||
		!errors.Is(re.Err, context.DeadlineExceeded) {
		t.Fatalf("%s: err = %v, want %q + pgx's deadline error", what, err, want)
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

// TestPostgresRunawayError: a statement that a runaway rule's deadline
// ends reaches the caller with an error naming the rule on every path pgx
// has (Exec, Query then rows.Err, which is where pgx reports it, QueryRow
// then Scan, pgx.CollectRows), and one that the caller's own earlier
// deadline or cancel ends does not.
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
	db := pgxcomment.Wrap(pool(t), sqlcomment.WithBudgets(b))
	ctx := context.Background()
	rw := tenant.With(ctx, tenant.Tags{Tenant: "reports"})

	// The caller's own deadline, later than the rule's.
	later, cancel := context.WithTimeout(rw, time.Hour)
	defer cancel()
	_, err := db.Exec(later, "SELECT pg_sleep(30)")
	wantRunaway(t, "Exec", err, "long-reports", after)

	// Rows that reach the client before the deadline, then the deadline.
	rows, err := db.Query(rw, "SELECT CASE WHEN g < 1000 THEN repeat('x', 1000) ELSE pg_sleep(30)::text END FROM generate_series(1, 1000) g")
	if err != nil {
		t.Fatalf("Query: %v, want the error in rows.Err", err)
	}
	n := 0
	for rows.Next() {
		n++
	}
	if n == 0 || n == 1000 {
		t.Fatalf("%d rows before the deadline, want some and not the last", n)
	}
	wantRunaway(t, "rows.Err", rows.Err(), "long-reports", after)

	var s string
	wantRunaway(t, "QueryRow", db.QueryRow(rw, "SELECT pg_sleep(30)::text").Scan(&s), "long-reports", after)
	rows, err = db.Query(rw, "SELECT pg_sleep(30)::text")
	if err == nil {
		_, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	wantRunaway(t, "CollectRows", err, "long-reports", after)

	// The caller's deadline or cancel comes before the rule's.
	sl := tenant.With(ctx, tenant.Tags{Tenant: "slow"})
	early, cancel := context.WithTimeout(sl, 200*time.Millisecond)
	defer cancel()
	_, err = db.Exec(early, "SELECT pg_sleep(30)")
	wantNotRunaway(t, "caller's deadline", err, context.DeadlineExceeded)
	stopped, stop := context.WithCancel(sl)
	defer stop()
	time.AfterFunc(200*time.Millisecond, stop)
	err = db.QueryRow(stopped, "SELECT pg_sleep(30)::text").Scan(&s)
	wantNotRunaway(t, "caller's cancel", err, context.Canceled)

	_, rs := b.Stats()
	if rs[0].Cancelled != 4 || rs[1].Cancelled != 0 {
		t.Fatalf("runaway stats = %+v", rs)
	}
}
