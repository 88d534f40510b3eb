package sqlcomment_test

import (
	"context"
	"errors"
	"fmt"
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
