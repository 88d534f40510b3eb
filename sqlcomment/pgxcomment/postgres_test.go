package pgxcomment_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/sqlcomment"
	"github.com/qtop-dev/qtop/sqlcomment/pgxcomment"
	"github.com/qtop-dev/qtop/tenant"
)

func pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.New(context.Background(), testsvc.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func conn(t testing.TB) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), testsvc.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func prepared(t testing.TB, c *pgx.Conn) int {
	t.Helper()
	var n int
	// Simple protocol: the count itself prepares nothing.
	if err := c.QueryRow(context.Background(), "SELECT count(*) FROM pg_prepared_statements", pgx.QueryExecModeSimpleProtocol).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

type eventLog struct {
	mu sync.Mutex
	ev []sqlcomment.Event
}

func (l *eventLog) observe(_ context.Context, e sqlcomment.Event) {
	l.mu.Lock()
	l.ev = append(l.ev, e)
	l.mu.Unlock()
}

func (l *eventLog) take() []sqlcomment.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	ev := l.ev
	l.ev = nil
	return ev
}

// TestPostgresObserver: one event per statement, with rows read or
// affected, errors, and the duration until the rows are closed.
func TestPostgresObserver(t *testing.T) {
	p := pool(t)
	log := &eventLog{}
	db := pgxcomment.Wrap(p, sqlcomment.WithObserver(log.observe))
	ctx := tenant.With(context.Background(), tenant.Tags{Tenant: "acme", Tier: tenant.T1})
	table := fmt.Sprintf("sqlcomment_pgx_%d", time.Now().UnixNano())
	if _, err := p.Exec(ctx, "CREATE TABLE "+table+" (a int)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Exec(context.Background(), "DROP TABLE "+table) })

	check := func(step string, op sqlcomment.Op, rows int64, wantErr bool) {
		t.Helper()
		ev := log.take()
		if len(ev) != 1 {
			t.Fatalf("%s: %d events, want 1: %+v", step, len(ev), ev)
		}
		e := ev[0]
		if e.Op != op || e.Rows != rows || (e.Err != nil) != wantErr || !e.Tagged || e.Tags.Tenant != "acme" ||
			!strings.Contains(e.Query, "tenant='acme'") || e.Duration <= 0 {
			t.Errorf("%s: event %+v; want op %v, rows %d, error %v", step, e, op, rows, wantErr)
		}
	}

	if _, err := db.Exec(ctx, "INSERT INTO "+table+" SELECT generate_series(1, $1::int)", 5); err != nil {
		t.Fatal(err)
	}
	check("insert", sqlcomment.OpExec, 5, false)

	rows, err := db.Query(ctx, "SELECT a FROM "+table+" ORDER BY a")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		n++
	}
	check("query to the end", sqlcomment.OpQuery, 5, false)
	rows.Close()
	if len(log.take()) != 0 || n != 5 {
		t.Errorf("rows reported twice, or %d rows read", n)
	}

	rows, err = db.Query(ctx, "SELECT a FROM "+table+" ORDER BY a")
	if err != nil {
		t.Fatal(err)
	}
	rows.Next()
	rows.Next()
	rows.Close()
	check("query closed early", sqlcomment.OpQuery, 2, false)

	var a int
	if err := db.QueryRow(ctx, "SELECT a FROM "+table+" WHERE a = $1", 3).Scan(&a); err != nil || a != 3 {
		t.Fatalf("QueryRow: %d, %v", a, err)
	}
	check("query row", sqlcomment.OpQuery, 1, false)
	if err := db.QueryRow(ctx, "SELECT a FROM "+table+" WHERE a = $1", 99).Scan(&a); !errors.Is(err, pgx.ErrNoRows) {
		t.Fatalf("QueryRow without rows: %v", err)
	}
	check("query row, no rows", sqlcomment.OpQuery, 0, false)

	if _, err := db.Exec(ctx, "SELEC 1"); err == nil {
		t.Fatal("a syntax error passed")
	}
	check("exec error", sqlcomment.OpExec, -1, true)
	if err := db.QueryRow(ctx, "SELECT nope FROM "+table).Scan(&a); err == nil {
		t.Fatal("a bad column passed")
	}
	check("query error", sqlcomment.OpQuery, -1, true)

	tx, err := p.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.With(tx).Exec(ctx, "DELETE FROM "+table+" WHERE a > $1", 3); err != nil {
		t.Fatal(err)
	}
	check("exec in a transaction", sqlcomment.OpExec, 2, false)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestPostgresNoPreparedPerTenant: tagged statements through a DB leave
// nothing prepared on the server, where the same comments sent in pgx's
// default mode prepare one statement per tenant.
func TestPostgresNoPreparedPerTenant(t *testing.T) {
	c := conn(t)
	db := pgxcomment.Wrap(c)
	const q = "SELECT $1::int8 + 1"
	before := prepared(t, c)
	for i := 0; i < 300; i++ {
		ctx := tenant.With(context.Background(), tenant.Tags{Tenant: fmt.Sprintf("t%05d", i)})
		var x int64
		if err := db.QueryRow(ctx, q, i).Scan(&x); err != nil || x != int64(i)+1 {
			t.Fatalf("tagged: %d, %v", x, err)
		}
	}
	if got := prepared(t, c) - before; got != 0 {
		t.Errorf("300 tenants through the DB prepared %d statements, want 0", got)
	}
	for i := 0; i < 300; i++ {
		var x int64
		naive := sqlcomment.Append(q, map[string]string{"tenant": fmt.Sprintf("t%05d", i)})
		if err := c.QueryRow(context.Background(), naive, i).Scan(&x); err != nil {
			t.Fatal(err)
		}
	}
	if got := prepared(t, c) - before; got < 300 {
		t.Errorf("the naive way prepared %d statements; the test cannot tell the two apart", got)
	}
}

// TestPostgresActivity: pg_stat_activity shows the tagged statement with
// its comment, and Parse recovers the tenant.
func TestPostgresActivity(t *testing.T) {
	p := pool(t)
	db := pgxcomment.Wrap(p, sqlcomment.WithApplication("pgxcomment-test"))
	name := fmt.Sprintf("acme-%d", time.Now().UnixNano())
	ctx, cancel := context.WithCancel(tenant.With(context.Background(), tenant.Tags{Tenant: name}))
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := db.Exec(ctx, "SELECT pg_sleep($1::float8)", 10.0)
		done <- err
	}()
	var q string
	testsvc.Eventually(t, 8*time.Second, "a running statement for "+name+" in pg_stat_activity", func() bool {
		err := p.QueryRow(context.Background(), `SELECT query FROM pg_stat_activity
			WHERE state = 'active' AND pid <> pg_backend_pid() AND query LIKE '%' || $1 || '%'`, name).Scan(&q)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
		return err == nil
	})
	cancel()
	<-done
	tags, err := sqlcomment.Parse(q)
	if err != nil {
		t.Fatalf("Parse(%q): %v", q, err)
	}
	if tags["tenant"] != name || tags["application"] != "pgxcomment-test" {
		t.Errorf("Parse(pg_stat_activity.query) = %v (query %q)", tags, q)
	}
}
