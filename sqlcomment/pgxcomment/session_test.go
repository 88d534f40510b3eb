package pgxcomment_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/sqlcomment"
	"github.com/qtop-dev/qtop/sqlcomment/pgxcomment"
	"github.com/qtop-dev/qtop/tenant"
)

// onePool is a pool of one connection, so that every statement reuses the
// connection of the one before; its own application_name is base.
func onePool(t *testing.T, base string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(testsvc.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	cfg.ConnConfig.RuntimeParams["application_name"] = base
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// shown reads, from another session, the application_name that
// pg_stat_activity shows for pid.
func shown(t *testing.T, watch *pgx.Conn, pid uint32) string {
	t.Helper()
	var name string
	if err := watch.QueryRow(context.Background(), "SELECT application_name FROM pg_stat_activity WHERE pid = $1", int32(pid)).Scan(&name); err != nil {
		t.Fatal(err)
	}
	return name
}

func pidOf(t *testing.T, p *pgxpool.Pool) uint32 {
	t.Helper()
	c, err := p.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	return c.Conn().PgConn().PID()
}

func tagged(name string, tier tenant.Tier) context.Context {
	return tenant.With(context.Background(), tenant.Tags{Tenant: name, Route: "GET /r", Tier: tier})
}

// TestPostgresSessionTransaction: a transaction begun through the DB shows
// its tenant in pg_stat_activity as soon as Begin returns (read by
// another session, 100 times out of 100), its statements are sent as written and stay
// prepared, and COMMIT and ROLLBACK both undo the tag.
func TestPostgresSessionTransaction(t *testing.T) {
	p := onePool(t, "base")
	watch := conn(t)
	pid := pidOf(t, p)
	db := pgxcomment.Wrap(p, sqlcomment.WithApplication("svc"), sqlcomment.WithMode(sqlcomment.ModeSession))
	for i := range 100 {
		end := [2]string{"commit", "rollback"}[i%2]
		name := fmt.Sprintf("tenant-%d", i)
		ctx := tagged(name, tenant.T2)
		tx, err := db.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := "svc|t=" + name + "|T2"
		if got := shown(t, watch, pid); got != want {
			t.Fatalf("after Begin pg_stat_activity shows %q, want %q", got, want)
		}
		var query, inside string
		if err := db.With(tx).QueryRow(ctx, "SELECT current_query(), current_setting('application_name')").Scan(&query, &inside); err != nil {
			t.Fatal(err)
		}
		if inside != want || strings.Contains(query, "/*") {
			t.Fatalf("inside: %q, sent %q", inside, query)
		}
		if end == "commit" {
			err = tx.Commit(ctx)
		} else {
			err = tx.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := shown(t, watch, pid); got != "base" {
			t.Fatalf("after %s pg_stat_activity shows %q", end, got)
		}
	}
	c, err := p.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	if n := prepared(t, c.Conn()); n != 1 {
		t.Fatalf("%d statements prepared for one statement text run by 100 tenants", n)
	}
}

// TestPostgresSessionReuse: one connection serves tenants a, b, nobody, a
// long and a non-ASCII one in turn, in single statements and transactions;
// each statement sees its own tenant (or the connection's own name), and
// between them pg_stat_activity shows the connection's own name, never the
// previous tenant's.
func TestPostgresSessionReuse(t *testing.T) {
	p := onePool(t, "base")
	watch := conn(t)
	pid := pidOf(t, p)
	db := pgxcomment.Wrap(p, sqlcomment.WithApplication("svc"), sqlcomment.WithMode(sqlcomment.ModeAuto))
	long := strings.Repeat("long-tenant-", 5)
	steps := []struct {
		ctx  context.Context
		want string
	}{
		{tagged("a", tenant.T1), "svc|t=a|T1"},
		{tagged("b", tenant.TierUnset), "svc|t=b"},
		{context.Background(), "base"},
		{tagged(long, tenant.T3), "svc|t=" + sqlcomment.TenantID(long) + "|T3"},
		{tagged("café", tenant.T0), "svc|t=caf%C3%A9|T0"},
		{tagged("a", tenant.T1), "svc|t=a|T1"},
	}
	const q = "SELECT current_setting('application_name'), (SELECT application_name FROM pg_stat_activity WHERE pid = pg_backend_pid())"
	for round := range 3 {
		for i, s := range steps {
			var inside, act string
			var err error
			switch round {
			case 0: // QueryRow outside a transaction
				err = db.QueryRow(s.ctx, q).Scan(&inside, &act)
			case 1: // Query with an argument, read to the end
				var rows pgx.Rows
				if rows, err = db.Query(s.ctx, q+" WHERE $1::int = 1", 1); err == nil {
					for rows.Next() {
						err = rows.Scan(&inside, &act)
					}
					if rows.Err() != nil {
						err = rows.Err()
					}
				}
			case 2: // a transaction
				var tx pgx.Tx
				if tx, err = db.Begin(s.ctx); err == nil {
					err = db.With(tx).QueryRow(s.ctx, q).Scan(&inside, &act)
					tx.Commit(s.ctx)
				}
			}
			if err != nil {
				t.Fatalf("round %d step %d: %v", round, i, err)
			}
			if inside != s.want || act != s.want {
				t.Fatalf("round %d step %d: the statement saw %q, pg_stat_activity %q; want %q", round, i, inside, act, s.want)
			}
			if got := shown(t, watch, pid); got != "base" {
				t.Fatalf("round %d step %d: between statements pg_stat_activity shows %q", round, i, got)
			}
		}
	}
	// Exec: with arguments (a batch), without (a simple query of several
	// statements), and a statement that refuses a transaction block.
	ctx := tagged("a", tenant.T1)
	table := fmt.Sprintf("pgxcomment_session_%d", pid)
	if _, err := db.Exec(ctx, "CREATE TEMP TABLE "+table+" (a text); INSERT INTO "+table+" VALUES (current_setting('application_name'))"); err != nil {
		t.Fatal(err)
	}
	if tag, err := db.Exec(ctx, "INSERT INTO "+table+" SELECT current_setting('application_name') WHERE $1::int = 1", 1); err != nil || tag.RowsAffected() != 1 {
		t.Fatal(tag, err)
	}
	if _, err := db.Exec(ctx, "VACUUM pg_class"); err != nil {
		t.Fatalf("VACUUM: %v", err)
	}
	rows, err := p.Query(context.Background(), "SELECT a FROM "+table)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(got) != 2 || got[0] != "svc|t=a|T1" || got[1] != got[0] {
		t.Fatalf("Exec saw %q, %v", got, err)
	}
}

// TestPostgresSessionBothAndComment: ModeComment keeps the comment and
// leaves application_name alone; ModeBoth does both in a transaction.
func TestPostgresSessionBothAndComment(t *testing.T) {
	p := onePool(t, "base")
	ctx := tagged("acme", tenant.T2)
	const q = "SELECT current_query(), current_setting('application_name')"
	for _, c := range []struct {
		mode    sqlcomment.Mode
		comment bool
		name    string
	}{{sqlcomment.ModeComment, true, "base"}, {sqlcomment.ModeBoth, true, "svc|t=acme|T2"}, {sqlcomment.ModeSession, false, "svc|t=acme|T2"}} {
		db := pgxcomment.Wrap(p, sqlcomment.WithApplication("svc"), sqlcomment.WithMode(c.mode))
		tx, err := db.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var query, name string
		err = db.With(tx).QueryRow(ctx, q).Scan(&query, &name)
		tx.Rollback(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(query, "tenant='acme'") != c.comment || name != c.name {
			t.Errorf("%v: sent %q with application_name %q", c.mode, query, name)
		}
	}
}

// TestPostgresSessionStdlib: database/sql over pgx's stdlib with
// StdlibSession: transactions are tagged in BEGIN's round trip and undone
// by ROLLBACK; single statements carry the comment and leave the
// connection's own name alone (TestPostgresSessionStdlibLeavesNoName).
func TestPostgresSessionStdlib(t *testing.T) {
	dsn := testsvc.Postgres(t)
	db := stdlibSessionDB(t, dsn)
	watch := conn(t)
	var pid uint32
	if err := db.QueryRow("SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	const q = "SELECT current_setting('application_name'), (SELECT query FROM pg_stat_activity WHERE pid = pg_backend_pid())"
	long := strings.Repeat("ü", 30)
	for i, s := range []struct {
		ctx     context.Context
		comment string
	}{
		{tagged("a", tenant.T1), "tenant='a'"},
		{tagged("b", tenant.T2), "tenant='b'"},
		{context.Background(), ""}, // the static tags only
		{tagged(long, tenant.TierUnset), "tenant='%C3%BC"},
	} {
		var inside, query string
		if err := db.QueryRowContext(s.ctx, q).Scan(&inside, &query); err != nil {
			t.Fatal(err)
		}
		if inside != "base" || !strings.Contains(query, s.comment) || (s.comment == "") != !strings.Contains(query, "tenant=") {
			t.Fatalf("step %d: ran under %q as %q, want base and %q", i, inside, query, s.comment)
		}
		// A transaction of the next tenant on the same connection.
		ctx := tagged(fmt.Sprintf("tx-%d", i), tenant.T3)
		tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: i%2 == 0})
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("svc|t=tx-%d|T3", i)
		if got := shown(t, watch, pid); got != want {
			t.Fatalf("step %d: in the transaction pg_stat_activity shows %q, want %q", i, got, want)
		}
		if err := tx.QueryRowContext(ctx, q).Scan(&inside, &query); err != nil || inside != want || strings.Contains(query, "/*") {
			t.Fatalf("step %d: %q %q %v", i, inside, query, err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if got := shown(t, watch, pid); got != "base" {
			t.Fatalf("step %d: after ROLLBACK pg_stat_activity shows %q, want the connection's own base", i, got)
		}
	}
	tx, err := db.Begin() // untagged
	if err != nil {
		t.Fatal(err)
	}
	if got := shown(t, watch, pid); got != "base" {
		t.Fatalf("untagged transaction shows %q", got)
	}
	tx.Commit()
	// A prepared statement: in a tagged transaction under its tenant.
	st, err := db.PrepareContext(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, name := range []string{"p1", "p2"} {
		ctx := tagged(name, tenant.T0)
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var inside, query string
		if err := tx.StmtContext(ctx, st).QueryRowContext(ctx).Scan(&inside, &query); err != nil || inside != "svc|t="+name+"|T0" {
			t.Fatalf("prepared: %q %v", inside, err)
		}
		tx.Rollback()
	}
}

// TestPostgresSessionStdlibLeavesNoName: no statement of a session mode
// leaves a name on the server session once it has run. Behind PgBouncer's
// transaction pooling a server session goes, between two statements of a
// client, to other clients, and a client that never set application_name
// is not given its own back: a name set for the session (SET, or
// set_config(…, false)) showed one tenant's name on another client's
// statements, another service's among them (bench/pgbouncer).
func TestPostgresSessionStdlibLeavesNoName(t *testing.T) {
	dsn := testsvc.Postgres(t)
	for _, mode := range []sqlcomment.Mode{sqlcomment.ModeSession, sqlcomment.ModeAuto, sqlcomment.ModeBoth} {
		db, err := sqlcomment.Open("pgx", dsn+sep(dsn)+"application_name=base", sqlcomment.WithApplication("svc"),
			sqlcomment.WithMode(mode), pgxcomment.StdlibSession(), pgxcomment.StdlibExecMode())
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		ctx := context.Background()
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		st, err := c.PrepareContext(ctx, "SELECT $1::int")
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		steps := []func(ctx context.Context) error{
			func(ctx context.Context) error { return c.QueryRowContext(ctx, "SELECT $1::int", 1).Scan(new(int)) },
			func(ctx context.Context) error { _, err := c.ExecContext(ctx, "SELECT $1::int", 1); return err },
			func(ctx context.Context) error { _, err := c.ExecContext(ctx, "SELECT 1"); return err },
			func(ctx context.Context) error { return st.QueryRowContext(ctx, 1).Scan(new(int)) },
			func(ctx context.Context) error {
				tx, err := c.BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				if err := tx.QueryRowContext(ctx, "SELECT 1").Scan(new(int)); err != nil {
					return err
				}
				return tx.Commit()
			},
		}
		for i, step := range steps {
			if err := step(tagged(fmt.Sprintf("t%d", i), tenant.T1)); err != nil {
				t.Fatal(err)
			}
			// What the server session carries on: read past the wrapper.
			var left string
			if err := c.Raw(func(dc any) error {
				pc := sqlcomment.Unwrap(dc).(interface{ Conn() *pgx.Conn }).Conn()
				return pc.QueryRow(ctx, "SELECT current_setting('application_name')", pgx.QueryExecModeSimpleProtocol).Scan(&left)
			}); err != nil {
				t.Fatal(err)
			}
			if left != "base" {
				t.Fatalf("%v, step %d: the session is left named %q, want its own base", mode, i, left)
			}
		}
	}
}

func sep(dsn string) string {
	if strings.Contains(dsn, "?") {
		return "&"
	}
	return "?"
}

// TestPostgresSessionBeginTx: the transaction's options hold beside the
// name.
func TestPostgresSessionBeginTx(t *testing.T) {
	db := pgxcomment.Wrap(conn(t), sqlcomment.WithApplication("svc"), sqlcomment.WithMode(sqlcomment.ModeSession))
	ctx := tagged("acme", tenant.T1)
	tx, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.Serializable, AccessMode: pgx.ReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var iso, ro, name string
	if err := db.With(tx).QueryRow(ctx, "SELECT current_setting('transaction_isolation'), current_setting('transaction_read_only'), current_setting('application_name')").Scan(&iso, &ro, &name); err != nil {
		t.Fatal(err)
	}
	if iso != "serializable" || ro != "on" || name != "svc|t=acme|T1" {
		t.Fatalf("%s %s %q", iso, ro, name)
	}
}

// TestPostgresSessionOwnTx: in ModeSession, statements that PostgreSQL
// refuses in a transaction block, or that end their own transaction,
// run as they would untagged (a leading comment does not hide them, with
// or without arguments), and carry their tenant in the comment instead.
func TestPostgresSessionOwnTx(t *testing.T) {
	p := onePool(t, "base")
	setup := conn(t)
	tbl := fmt.Sprintf("pgxc_owntx_%d", pidOf(t, p))
	ctx := context.Background()
	for _, q := range []string{
		"CREATE TABLE " + tbl + " (q text)",
		"CREATE PROCEDURE " + tbl + "_p(n int DEFAULT 0) LANGUAGE plpgsql AS $$ BEGIN INSERT INTO " + tbl + " VALUES (current_query()); COMMIT; END $$",
	} {
		if _, err := setup.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		setup.Exec(ctx, "DROP PROCEDURE IF EXISTS "+tbl+"_p")
		setup.Exec(ctx, "DROP TABLE IF EXISTS "+tbl)
	})
	db := pgxcomment.Wrap(p, sqlcomment.WithApplication("svc"), sqlcomment.WithMode(sqlcomment.ModeSession))
	tc := tagged("acme", tenant.T2)
	for _, c := range []struct {
		sql  string
		args []any
	}{
		{"/* nightly */ VACUUM " + tbl, nil},
		{"-- nightly\nVACUUM " + tbl, nil},
		{"CALL " + tbl + "_p()", nil},
		{"CALL " + tbl + "_p($1)", []any{5}},
		{"CREATE INDEX CONCURRENTLY " + tbl + "_i ON " + tbl + " (q)", nil},
		{"DROP INDEX CONCURRENTLY " + tbl + "_i", nil},
		{"DO $$ BEGIN COMMIT; END $$", nil},
	} {
		if _, err := db.Exec(tc, c.sql, c.args...); err != nil {
			t.Errorf("%q: %v", c.sql, err)
		}
	}
	// What PostgreSQL refuses outside a transaction block it refuses
	// tagged too: the tag's implicit transaction would have let it do
	// nothing silently.
	for _, q := range []string{"LOCK TABLE " + tbl, "SAVEPOINT a", "DECLARE c CURSOR FOR SELECT 1"} {
		if _, err := db.Exec(tc, q); err == nil || !strings.Contains(err.Error(), "transaction block") {
			t.Errorf("%q outside a transaction: %v, want PostgreSQL's refusal", q, err)
		}
	}
	// Result formats (a batch cannot carry them) are kept, with the
	// tenant in the comment.
	var sent string
	var n int
	if err := db.QueryRow(tc, "SELECT current_query(), $1::int", pgx.QueryResultFormats{pgx.TextFormatCode, pgx.TextFormatCode}, 7).Scan(&sent, &n); err != nil || n != 7 {
		t.Errorf("QueryResultFormats: %d, %v", n, err)
	} else if !strings.Contains(sent, "tenant='acme'") {
		t.Errorf("QueryResultFormats: sent without its tenant: %q", sent)
	}
	rows, err := setup.Query(ctx, "SELECT q FROM "+tbl)
	if err != nil {
		t.Fatal(err)
	}
	qs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 2 {
		t.Fatalf("the procedure ran %d times: %q", len(qs), qs)
	}
	for _, q := range qs {
		if !strings.Contains(q, "tenant='acme'") {
			t.Errorf("CALL sent without its tenant: %q", q)
		}
	}
}

// TestPostgresSessionSavepoint: a transaction's savepoint, begun through
// the DB of the transaction with a tagged context (Begin, or
// pgx.BeginFunc), runs in every session mode under the transaction's
// name. Before, the session modes refused it ("a transaction's savepoint
// takes no options").
func TestPostgresSessionSavepoint(t *testing.T) {
	for _, mode := range []sqlcomment.Mode{sqlcomment.ModeComment, sqlcomment.ModeSession, sqlcomment.ModeBoth, sqlcomment.ModeAuto} {
		db := pgxcomment.Wrap(onePool(t, "base"), sqlcomment.WithApplication("svc"), sqlcomment.WithMode(mode))
		ctx := tagged("acme", tenant.T1)
		tx, err := db.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		in := db.With(tx)
		sp, err := in.Begin(ctx)
		if err != nil {
			t.Fatalf("%v: savepoint: %v", mode, err)
		}
		var name string
		if err := db.With(sp).QueryRow(ctx, "SELECT current_setting('application_name')").Scan(&name); err != nil {
			t.Fatal(err)
		}
		if want := map[bool]string{false: "base", true: "svc|t=acme|T1"}[mode != sqlcomment.ModeComment]; name != want {
			t.Errorf("%v: in the savepoint under %q, want %q", mode, name, want)
		}
		if err := sp.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		if err := pgx.BeginFunc(ctx, in, func(pgx.Tx) error { return nil }); err != nil {
			t.Errorf("%v: pgx.BeginFunc on the transaction: %v", mode, err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPostgresSessionOwnName: without WithApplication, a session name's
// service is the application_name the connection opens with — the
// pool's or the DSN's — as the connection shows it between transactions
// and as ModeComment leaves it, through pgx and database/sql alike.
// Before, the service was empty ("|t=acme|T2") and the sampler lost it.
func TestPostgresSessionOwnName(t *testing.T) {
	ctx := tagged("acme", tenant.T2)
	db := pgxcomment.Wrap(onePool(t, "batchjob"), sqlcomment.WithMode(sqlcomment.ModeSession))
	check := func(path string, name string, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if name != "batchjob|t=acme|T2" {
			t.Errorf("%s: under %q, want batchjob|t=acme|T2", path, name)
		}
	}
	var name string
	err := db.QueryRow(ctx, "SELECT current_setting('application_name')").Scan(&name)
	check("pgx, a statement", name, err)
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	err = db.With(tx).QueryRow(ctx, "SELECT current_setting('application_name')").Scan(&name)
	check("pgx, a transaction", name, err)
	tx.Rollback(ctx)
	pc, err := onePool(t, "batchjob").Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Release()
	err = pgxcomment.Wrap(pc, sqlcomment.WithMode(sqlcomment.ModeSession)).QueryRow(ctx, "SELECT current_setting('application_name')").Scan(&name)
	check("pgx, a pool's acquired connection", name, err)

	dsn := testsvc.Postgres(t)
	sdb, err := sqlcomment.Open("pgx", dsn+sep(dsn)+"application_name=batchjob", sqlcomment.WithMode(sqlcomment.ModeSession),
		pgxcomment.StdlibSession(), pgxcomment.StdlibExecMode())
	if err != nil {
		t.Fatal(err)
	}
	defer sdb.Close()
	stx, err := sdb.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stx.Rollback()
	err = stx.QueryRowContext(ctx, "SELECT current_setting('application_name')").Scan(&name)
	check("database/sql, a transaction", name, err)
}

// untaggedTxQuery reads what a statement runs under and how
// pg_stat_activity shows it.
const untaggedTxQuery = "SELECT current_setting('application_name'), (SELECT query FROM pg_stat_activity WHERE pid = pg_backend_pid())"

// checkUntaggedTx fails t unless a statement of tenant zeta ran as it
// should in a transaction begun tagged (acme, T2: under its name, sent as
// written) or untagged (under the connection's own name, base, with
// tenant zeta in the comment, as the sampler reads it).
func checkUntaggedTx(t *testing.T, path string, tagged bool, name, query string, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	tags, perr := sqlcomment.Parse(query)
	switch {
	case tagged && (name != "svc|t=acme|T2" || strings.Contains(query, "/*")):
		t.Errorf("%s: tagged transaction: under %q as %q, want svc|t=acme|T2, no comment", path, name, query)
	case !tagged && (name != "base" || perr != nil || tags[sqlcomment.KeyTenant] != "zeta"):
		t.Errorf("%s: untagged transaction: under %q as %q (%v), want base and tenant='zeta'", path, name, query, perr)
	}
}

// TestPostgresSessionUntaggedTx: the same through pgx: in ModeSession, a
// transaction that Begin did not name (its context had no tenant: begun before the tenant is
// known, or in a shared helper) runs under the connection's own name, and
// db.With(tx) sends its statements, and its savepoints', with their own
// context's tenant in the comment (an untagged one as written, as outside
// a transaction); a named transaction keeps its statements as written
// under its name. Before, the unnamed
// transaction's statements were sent as written, and their load had no
// tenant at all.
func TestPostgresSessionUntaggedTx(t *testing.T) {
	ctx := tagged("zeta", tenant.T1)
	db := pgxcomment.Wrap(onePool(t, "base"), sqlcomment.WithApplication("svc"), sqlcomment.WithMode(sqlcomment.ModeSession))
	for _, begin := range []context.Context{context.Background(), tagged("acme", tenant.T2), context.Background()} {
		isTagged := begin != context.Background()
		tx, err := db.Begin(begin)
		if err != nil {
			t.Fatal(err)
		}
		var name, query string
		err = db.With(tx).QueryRow(ctx, untaggedTxQuery).Scan(&name, &query)
		checkUntaggedTx(t, "QueryRow", isTagged, name, query, err)
		sp, err := db.With(tx).Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		err = db.With(sp).QueryRow(ctx, untaggedTxQuery, pgx.QueryExecModeExec).Scan(&name, &query)
		checkUntaggedTx(t, "QueryRow in a savepoint", isTagged, name, query, err)
		var plain string // untagged: as written, as outside a transaction
		if err := db.With(tx).QueryRow(context.Background(), "SELECT current_query()").Scan(&plain); err != nil || plain != "SELECT current_query()" {
			t.Errorf("untagged statement sent as %q (%v), want it as written", plain, err)
		}
		sp2, err := tx.Begin(ctx) // the transaction's own Begin
		if err != nil {
			t.Fatal(err)
		}
		err = db.With(sp2).QueryRow(ctx, untaggedTxQuery).Scan(&name, &query)
		checkUntaggedTx(t, "QueryRow in tx.Begin's savepoint", isTagged, name, query, err)
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPostgresSessionStdlibUntaggedTx: database/sql with StdlibSession
// in ModeSession: a transaction begun with a context without a tenant
// (begun before the tenant is known, or in a shared helper) runs under the
// connection's own name, and its statements, those prepared in it
// included, carry their own context's tenant in the comment; a tagged
// transaction keeps its statements as written under its name, and an
// untagged one after it on the same connection is not taken for it.
// Before, the untagged transaction's statements were sent as written, and
// their load had no tenant at all.
func TestPostgresSessionStdlibUntaggedTx(t *testing.T) {
	ctx := tagged("zeta", tenant.T1)
	dsn := testsvc.Postgres(t)
	db := stdlibSessionDB(t, dsn)
	for _, begin := range []context.Context{context.Background(), tagged("acme", tenant.T2), context.Background()} {
		isTagged := begin != context.Background()
		tx, err := db.BeginTx(begin, nil)
		if err != nil {
			t.Fatal(err)
		}
		var name, query string
		err = tx.QueryRowContext(ctx, untaggedTxQuery).Scan(&name, &query)
		checkUntaggedTx(t, "QueryRowContext", isTagged, name, query, err)
		st, err := tx.PrepareContext(ctx, untaggedTxQuery)
		if err != nil {
			t.Fatal(err)
		}
		err = st.QueryRowContext(ctx).Scan(&name, &query)
		checkUntaggedTx(t, "a statement prepared in the transaction", isTagged, name, query, err)
		st.Close()
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
}

// stdlibSessionDB is database/sql over pgx's stdlib in ModeSession on dsn
// (service svc, the connection's own name "base"), one connection.
func stdlibSessionDB(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sqlcomment.Open("pgx", dsn+sep(dsn)+"application_name=base", sqlcomment.WithApplication("svc"),
		sqlcomment.WithMode(sqlcomment.ModeSession), pgxcomment.StdlibSession(), pgxcomment.StdlibExecMode())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1)
	return db
}
