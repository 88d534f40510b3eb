package sqlcomment_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/sqlcomment"
	"github.com/qtop-dev/qtop/sqlcomment/pgxcomment"
	"github.com/qtop-dev/qtop/tenant"
)

// openPG opens the test PostgreSQL through pgx's stdlib wrapped by
// WrapConnector.
func openPG(t *testing.T, opts ...sqlcomment.Option) *sql.DB {
	t.Helper()
	cfg, err := pgx.ParseConfig(testsvc.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	opts = append([]sqlcomment.Option{sqlcomment.WithApplication("sqlcomment-test"), pgxcomment.StdlibExecMode()}, opts...)
	db := sql.OpenDB(sqlcomment.WrapConnector(stdlib.GetConnector(*cfg), opts...))
	t.Cleanup(func() { db.Close() })
	return db
}

// plainPG opens an unwrapped connection, to look at the server from aside.
func plainPG(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", testsvc.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func unique(prefix string) string { return fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()) }

type eventLog struct {
	mu sync.Mutex
	ev []sqlcomment.Event
}

func (l *eventLog) observe(_ context.Context, e sqlcomment.Event) {
	l.mu.Lock()
	l.ev = append(l.ev, e)
	l.mu.Unlock()
}

func (l *eventLog) events() []sqlcomment.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]sqlcomment.Event(nil), l.ev...)
}

// TestPostgresStdlib runs database/sql's features through the wrapper on a
// real server, with and without an Observer (which wraps rows, statements
// and transactions).
func TestPostgresStdlib(t *testing.T) {
	for _, observed := range []bool{false, true} {
		t.Run(fmt.Sprintf("observer=%v", observed), func(t *testing.T) {
			log := &eventLog{}
			var opts []sqlcomment.Option
			if observed {
				opts = append(opts, sqlcomment.WithObserver(log.observe))
			}
			db := openPG(t, opts...)
			ctx := tenant.With(context.Background(), tenant.Tags{Tenant: "acme", Route: "GET /r", Tier: tenant.T2})

			if err := db.PingContext(ctx); err != nil {
				t.Fatalf("Ping: %v", err)
			}

			// BeginTx with isolation levels and read-only.
			for _, lv := range []struct {
				level sql.IsolationLevel
				want  string
			}{
				{sql.LevelDefault, "read committed"},
				{sql.LevelReadCommitted, "read committed"},
				{sql.LevelRepeatableRead, "repeatable read"},
				{sql.LevelSerializable, "serializable"},
			} {
				for _, ro := range []bool{false, true} {
					tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: lv.level, ReadOnly: ro})
					if err != nil {
						t.Fatalf("BeginTx(%v, %v): %v", lv.level, ro, err)
					}
					var iso, rdonly string
					if err := tx.QueryRowContext(ctx, "SHOW transaction_isolation").Scan(&iso); err != nil {
						t.Fatal(err)
					}
					if err := tx.QueryRowContext(ctx, "SHOW transaction_read_only").Scan(&rdonly); err != nil {
						t.Fatal(err)
					}
					if iso != lv.want || (rdonly == "on") != ro {
						t.Errorf("BeginTx(%v, read-only %v): isolation %q, read only %q", lv.level, ro, iso, rdonly)
					}
					if ro {
						_, err := tx.ExecContext(ctx, "CREATE TEMP TABLE sqlcomment_ro (a int)")
						if err == nil || !strings.Contains(err.Error(), "read-only") {
							t.Errorf("write in a read-only transaction: %v", err)
						}
						tx.Rollback()
					} else if err := tx.Commit(); err != nil {
						t.Fatal(err)
					}
				}
			}

			// Named values: pgx.NamedArgs passes database/sql's checks only
			// because the wrapper forwards the driver's NamedValueChecker.
			var sum int
			if err := db.QueryRowContext(ctx, "SELECT @a::int + @b::int", pgx.NamedArgs{"a": 1, "b": 2}).Scan(&sum); err != nil || sum != 3 {
				t.Errorf("named args: %d, %v", sum, err)
			}

			// Column types.
			rows, err := db.QueryContext(ctx, "SELECT 1::int4 AS a, 'x'::varchar(10) AS b, 1.5::numeric(10,2) AS c")
			if err != nil {
				t.Fatal(err)
			}
			cts, err := rows.ColumnTypes()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, ct := range cts {
				l, lok := ct.Length()
				p, s, dok := ct.DecimalSize()
				got = append(got, fmt.Sprintf("%s %s %v %d/%v %d.%d/%v", ct.Name(), ct.DatabaseTypeName(), ct.ScanType(), l, lok, p, s, dok))
			}
			rows.Close()
			want := []string{"a INT4 int32 0/false 0.0/false", "b VARCHAR string 10/true 0.0/false", "c NUMERIC float64 0/false 10.2/true"}
			if strings.Join(got, "; ") != strings.Join(want, "; ") {
				t.Errorf("column types:\n got %q\nwant %q", got, want)
			}

			// Conn.Raw reaches pgx's connection through Unwrap.
			c, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			err = c.Raw(func(dc any) error {
				pc, ok := sqlcomment.Unwrap(dc).(*stdlib.Conn)
				if !ok {
					return fmt.Errorf("raw conn is %T", sqlcomment.Unwrap(dc))
				}
				var one int
				return pc.Conn().QueryRow(ctx, "SELECT 1").Scan(&one)
			})
			if err != nil {
				t.Errorf("Raw: %v", err)
			}
			c.Close()

			// Prepared statements carry the comment of the context they are
			// prepared in.
			st, err := db.PrepareContext(ctx, "SELECT $1::int * 2")
			if err != nil {
				t.Fatal(err)
			}
			var two int
			if err := st.QueryRowContext(ctx, 1).Scan(&two); err != nil || two != 2 {
				t.Errorf("prepared: %d, %v", two, err)
			}
			st.Close()

			if observed {
				ops := map[sqlcomment.Op]int{}
				for _, e := range log.events() {
					ops[e.Op]++
					if e.Tags.Tenant != "acme" || !e.Tagged {
						t.Errorf("event without tags: %+v", e)
					}
				}
				if ops[sqlcomment.OpBegin] != 8 || ops[sqlcomment.OpCommit] != 4 || ops[sqlcomment.OpRollback] != 4 ||
					ops[sqlcomment.OpPing] < 1 || ops[sqlcomment.OpQuery] < 19 || ops[sqlcomment.OpPrepare] != 1 {
					t.Errorf("events by op: %v", ops)
				}
			}
		})
	}
}

// TestPostgresSessionReset: a connection returned with a transaction left
// open is discarded, because the wrapper forwards pgx's ResetSession.
func TestPostgresSessionReset(t *testing.T) {
	db := openPG(t)
	db.SetMaxOpenConns(1)
	ctx := context.Background()
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var pid1, pid2 int
	if err := c.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ExecContext(ctx, "BEGIN"); err != nil { // behind database/sql's back
		t.Fatal(err)
	}
	c.Close()
	if err := db.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid2); err != nil {
		t.Fatal(err)
	}
	if pid1 == pid2 {
		t.Errorf("the connection with an open transaction was reused (pid %d): ResetSession not forwarded", pid1)
	}
}

// TestPostgresActivity: a tagged statement shows in pg_stat_activity with
// its comment, and Parse recovers the tenant from there.
func TestPostgresActivity(t *testing.T) {
	db := openPG(t)
	watch := plainPG(t)
	name := unique("acme")
	ctx, cancel := context.WithCancel(tenant.With(context.Background(), tenant.Tags{Tenant: name, Route: "GET /slow"}))
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := db.ExecContext(ctx, "SELECT pg_sleep(10)")
		done <- err
	}()
	q := waitActivity(t, watch, name)
	cancel()
	<-done
	tags, err := sqlcomment.Parse(q)
	if err != nil {
		t.Fatalf("Parse(%q): %v", q, err)
	}
	if tags["tenant"] != name || tags["route"] != "GET /slow" || tags["application"] != "sqlcomment-test" {
		t.Errorf("Parse(pg_stat_activity.query) = %v", tags)
	}
	if !strings.HasPrefix(q, "SELECT pg_sleep(10) /*") {
		t.Errorf("pg_stat_activity.query = %q", q)
	}
}

// waitActivity polls pg_stat_activity for a running statement whose text
// mentions name, and returns its text.
func waitActivity(t *testing.T, watch *sql.DB, name string) string {
	t.Helper()
	var q string
	testsvc.Eventually(t, 8*time.Second, "a running statement for "+name+" in pg_stat_activity", func() bool {
		err := watch.QueryRow(`SELECT query FROM pg_stat_activity
			WHERE state = 'active' AND pid <> pg_backend_pid() AND query LIKE '%' || $1 || '%'`, name).Scan(&q)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			t.Fatal(err)
		}
		return err == nil
	})
	return q
}

// TestPostgresStatStatements: the same statement run by three tenants is
// one row of pg_stat_statements, which normalises comments away: the
// tenant is lost there, which is why qtop samples pg_stat_activity.
func TestPostgresStatStatements(t *testing.T) {
	db := openPG(t)
	watch := plainPG(t)
	if _, err := watch.Exec("CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		t.Fatalf("pg_stat_statements: %v", err)
	}
	// A table of its own gives the statement its own query id (column
	// aliases and constants are not part of it).
	col := strings.ReplaceAll(unique("sqlcomment_pgss"), "-", "_")
	if _, err := watch.Exec("CREATE TABLE " + col + " (a int)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { watch.Exec("DROP TABLE " + col) })
	stmt := fmt.Sprintf("SELECT count(*) FROM %s WHERE a = $1", col)
	for _, who := range []string{"acme", "globex", "initech"} {
		ctx := tenant.With(context.Background(), tenant.Tags{Tenant: who})
		var n int
		if err := db.QueryRowContext(ctx, stmt, 7).Scan(&n); err != nil {
			t.Fatal(err)
		}
	}
	var rows, calls int
	var text string
	err := watch.QueryRow(`SELECT count(*), coalesce(sum(calls), 0), coalesce(max(query), '')
		FROM pg_stat_statements WHERE query LIKE 'SELECT count(*) FROM ' || $1 || '%'`, col).Scan(&rows, &calls, &text)
	if err != nil {
		t.Fatal(err)
	}
	if rows != 1 || calls != 3 {
		t.Errorf("pg_stat_statements has %d rows, %d calls for the statement; want 1 row, 3 calls", rows, calls)
	}
	t.Logf("pg_stat_statements keeps one text for all tenants: %s", text)
}

var _ driver.Connector = sqlcomment.WrapConnector(stdlib.GetConnector(pgx.ConnConfig{}))
