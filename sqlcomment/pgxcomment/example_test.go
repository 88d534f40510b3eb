package pgxcomment_test

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/qtop-dev/qtop/sqlcomment"
	"github.com/qtop-dev/qtop/sqlcomment/pgxcomment"
	"github.com/qtop-dev/qtop/tenant"
)

// printer stands in for a *pgxpool.Pool and prints what it is sent.
type printer struct{}

func (printer) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	fmt.Println(sql, args)
	return pgconn.CommandTag{}, nil
}
func (printer) Query(context.Context, string, ...any) (pgx.Rows, error) { return nil, nil }
func (printer) QueryRow(context.Context, string, ...any) pgx.Row        { return nil }

func Example() {
	db := pgxcomment.Wrap(printer{}, sqlcomment.WithApplication("billing"))

	// No tenant: the text never varies, pgx's statement cache is used.
	db.Exec(context.Background(), "DELETE FROM sessions WHERE expires < now()")

	// A tenant: sent in QueryExecModeExec, so nothing is prepared per tenant.
	ctx := tenant.With(context.Background(), tenant.Tags{Tenant: "acme", Route: "POST /invoices"})
	db.Exec(ctx, "UPDATE invoices SET paid = true WHERE id = $1", 42)
	// Output:
	// DELETE FROM sessions WHERE expires < now() /*application='billing'*/ []
	// UPDATE invoices SET paid = true WHERE id = $1 /*application='billing',route='POST%20%2Finvoices',tenant='acme'*/ [exec 42]
}
