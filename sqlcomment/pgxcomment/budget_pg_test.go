package pgxcomment_test

import (
	"context"
	"errors"
	"testing"
	"time"

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
