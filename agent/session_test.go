package agent

import (
	"bytes"
	"context"
	"database/sql"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/sqlcomment"
	"github.com/qtop-dev/qtop/tenant"
)

// TestPostgresSQLTagging: with WithSQLTagging(ModeAuto) pgx sends a
// statement outside a transaction as written and names the tenant in
// application_name for its implicit transaction; database/sql, which
// cannot set it in the statement's round trip, sends the comment under
// the service's own name (a name set for the session would outlive the
// statement); in a transaction both name it in application_name; the
// DB-time records name the same tenant. Connections open under the
// service's name.
func TestPostgresSQLTagging(t *testing.T) {
	dsn := testsvc.Postgres(t)
	a := newAgent(t, WithService("agent-test"), WithTenant(FromHeader("X-Tenant", "")), WithSQLTagging(sqlcomment.ModeAuto))
	db, err := a.OpenDB("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	pdb, pool, err := a.OpenPgxPool(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	const q = "SELECT current_query(), current_setting('application_name')"
	var seen [2][2]string
	h := a.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := db.QueryRowContext(r.Context(), q).Scan(&seen[0][0], &seen[0][1]); err != nil {
			t.Error(err)
		}
		if err := pdb.QueryRow(r.Context(), q).Scan(&seen[1][0], &seen[1][1]); err != nil {
			t.Error(err)
		}
	}))
	serve(h, "GET", "/q", "X-Tenant", "acme")
	if s := seen[0]; !strings.HasPrefix(s[0], q+" /*") || !strings.Contains(s[0], "tenant='acme'") || s[1] != "agent-test" {
		t.Errorf("database/sql: PostgreSQL saw %q under %q", s[0], s[1])
	}
	if s := seen[1]; s[0] != q || s[1] != "agent-test|t=acme" {
		t.Errorf("pgx: PostgreSQL saw %q under %q", s[0], s[1])
	}
	// In a transaction database/sql names the tenant too; untagged, each
	// path runs under the service's name.
	h = a.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, err := db.BeginTx(r.Context(), nil)
		if err != nil {
			t.Error(err)
			return
		}
		defer tx.Rollback()
		if err := tx.QueryRowContext(r.Context(), q).Scan(&seen[0][0], &seen[0][1]); err != nil {
			t.Error(err)
		}
	}))
	serve(h, "GET", "/q", "X-Tenant", "acme")
	if s := seen[0]; s[0] != q || s[1] != "agent-test|t=acme" {
		t.Errorf("database/sql in a transaction: PostgreSQL saw %q under %q", s[0], s[1])
	}
	for i, name := range []string{"", ""} {
		if i == 0 {
			err = db.QueryRowContext(context.Background(), "SELECT current_setting('application_name')").Scan(&name)
		} else {
			err = pool.QueryRow(context.Background(), "SELECT current_setting('application_name')").Scan(&name)
		}
		if err != nil || name != "agent-test" {
			t.Errorf("path %d untagged: under %q, %v", i, name, err)
		}
	}
	if got := rows(a); got["acme||db"].Count != 5 { // two statements; BEGIN, one, ROLLBACK
		t.Errorf("rows %v", got)
	}
	if _, err := newConfig([]Option{WithSQLTagging(sqlcomment.Mode(9))}); err == nil {
		t.Error("an unknown mode was accepted")
	}
}

// TestPostgresSQLTaggingDoors: every database/sql door the agent offers
// onto pgx's stdlib driver — OpenDB("pgx"), OpenDB("pgx/v5") (the same
// driver under its other name) and WrapConnector of stdlib.GetConnector —
// tags a transaction in application_name and keeps one prepared
// statement for a text run by several tenants. Before, the last two fell
// back to the comment and prepared the text once per tenant.
func TestPostgresSQLTaggingDoors(t *testing.T) {
	dsn := testsvc.Postgres(t)
	var logged bytes.Buffer
	a := newAgent(t, WithService("doors"), WithTenant(FromHeader("X-Tenant", "")), WithSQLTagging(sqlcomment.ModeAuto),
		WithLogger(slog.New(slog.NewTextHandler(&logged, nil))))
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	open := map[string]func() (*sql.DB, error){
		"OpenDB pgx":    func() (*sql.DB, error) { return a.OpenDB("pgx", dsn) },
		"OpenDB pgx/v5": func() (*sql.DB, error) { return a.OpenDB("pgx/v5", dsn) },
		"WrapConnector": func() (*sql.DB, error) { return sql.OpenDB(a.WrapConnector(stdlib.GetConnector(*cfg))), nil },
	}
	for _, door := range []string{"OpenDB pgx", "OpenDB pgx/v5", "WrapConnector"} {
		db, err := open[door]()
		if err != nil {
			t.Fatal(err)
		}
		db.SetMaxOpenConns(1)
		for _, tn := range []string{"acme", "globex", "initech"} {
			ctx := tenant.With(context.Background(), tenant.Tags{Tenant: tn})
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var name string
			if err := tx.QueryRowContext(ctx, "SELECT current_setting('application_name') WHERE $1::int = 1", 1).Scan(&name); err != nil {
				t.Fatal(err)
			}
			tx.Rollback()
			if want := "doors|t=" + tn; name != want {
				t.Errorf("%s: %s's transaction ran under %q, want %q", door, tn, name, want)
			}
		}
		var n int
		if err := db.QueryRow("SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE '%$1::int = 1%' AND statement NOT LIKE '%pg_prepared%'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("%s: %d statements prepared for one text run by three tenants, want 1", door, n)
		}
		db.Close()
	}
	// Each handle says where its tenant goes.
	if n := strings.Count(logged.String(), "agent: SQL tagging"); n != 3 || strings.Count(logged.String(), "mode=session") != 3 {
		t.Errorf("logged:\n%s", logged.String())
	}
}
