package agent

import (
	"context"
	"net/http"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/sqlcomment"
)

// TestPostgresSQLTagging: with WithSQLTagging(ModeAuto) both of the
// agent's database paths send statements as written and name the tenant
// in application_name; the DB-time record names the same tenant.
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
	for i, s := range seen {
		if s[0] != q || s[1] != "agent-test|t=acme" {
			t.Errorf("path %d: PostgreSQL saw %q under %q", i, s[0], s[1])
		}
	}
	if got := rows(a); got["acme||db"].Count != 2 {
		t.Errorf("rows %v", got)
	}
	if _, err := newConfig([]Option{WithSQLTagging(sqlcomment.Mode(9))}); err == nil {
		t.Error("an unknown mode was accepted")
	}
}
