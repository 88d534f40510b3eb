package testsvc_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/jackc/pgx/v5"

	"github.com/qtop-dev/qtop/internal/testsvc"
)

// TestPostgresRoundTrip proves the plumbing: the DSN from scripts/services
// reaches a real PostgreSQL with pg_stat_statements loaded.
func TestPostgresRoundTrip(t *testing.T) {
	dsn := testsvc.Postgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect %s: %v", dsn, err)
	}
	defer conn.Close(ctx)

	table := fmt.Sprintf("testsvc_%d", os.Getpid())
	if _, err := conn.Exec(ctx, "CREATE TEMP TABLE "+table+" (tenant text, n int)"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "INSERT INTO "+table+" VALUES ($1, $2)", "acme", 42); err != nil {
		t.Fatal(err)
	}
	var tenant string
	var n int
	if err := conn.QueryRow(ctx, "SELECT tenant, n FROM "+table).Scan(&tenant, &n); err != nil {
		t.Fatal(err)
	}
	if tenant != "acme" || n != 42 {
		t.Fatalf("read back (%q, %d), want (acme, 42)", tenant, n)
	}
	var calls int64
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_statements").Scan(&calls); err != nil {
		t.Fatalf("pg_stat_statements is not loaded: %v", err)
	}
}

// TestClickHouseRoundTrip proves the native protocol reaches ClickHouse and
// that an insert with an explicit column list works on its version.
func TestClickHouseRoundTrip(t *testing.T) {
	addr := testsvc.ClickHouse(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Ping(ctx); err != nil {
		t.Fatalf("ping %s: %v", addr, err)
	}
	table := fmt.Sprintf("default.testsvc_%d", os.Getpid())
	if err := conn.Exec(ctx, "CREATE TABLE "+table+" (tenant String, n UInt64) ENGINE = Memory"); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(context.Background(), "DROP TABLE IF EXISTS "+table)
	batch, err := conn.PrepareBatch(ctx, "INSERT INTO "+table+" (tenant, n)")
	if err != nil {
		t.Fatal(err)
	}
	if err := batch.Append("acme", uint64(42)); err != nil {
		t.Fatal(err)
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
	var tenant string
	var n uint64
	if err := conn.QueryRow(ctx, "SELECT tenant, n FROM "+table).Scan(&tenant, &n); err != nil {
		t.Fatal(err)
	}
	if tenant != "acme" || n != 42 {
		t.Fatalf("read back (%q, %d), want (acme, 42)", tenant, n)
	}
}

func TestRequiredFailsInsteadOfSkipping(t *testing.T) {
	t.Setenv("CI", "true")
	t.Setenv(testsvc.EnvPostgres, "")
	ft := &fakeTB{TB: t}
	func() {
		defer func() { recover() }()
		testsvc.Postgres(ft)
	}()
	if !ft.failed || ft.skipped {
		t.Fatalf("with CI=true a missing service must fail, not skip (failed=%v skipped=%v)", ft.failed, ft.skipped)
	}
	t.Setenv("CI", "")
	t.Setenv("QTOP_REQUIRE_SERVICES", "")
	ft = &fakeTB{TB: t}
	func() {
		defer func() { recover() }()
		testsvc.Postgres(ft)
	}()
	if ft.failed || !ft.skipped {
		t.Fatalf("outside CI a missing service must skip (failed=%v skipped=%v)", ft.failed, ft.skipped)
	}
}

// fakeTB records Fatalf and Skipf instead of ending the real test.
type fakeTB struct {
	testing.TB
	failed, skipped bool
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(string, ...any) {
	f.failed = true
	panic("fatal")
}
func (f *fakeTB) Skipf(string, ...any) {
	f.skipped = true
	panic("skip")
}

// TestPrivateClickHouseRestart: the private server stops and starts again
// and keeps its data, which is what outage tests rely on.
func TestPrivateClickHouseRestart(t *testing.T) {
	testsvc.ClickHouse(t) // the shared one being up means the binary is installed
	p := testsvc.StartPrivateClickHouse(t)
	ctx := context.Background()
	open := func() clickhouse.Conn {
		conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{p.Addr()}})
		if err != nil {
			t.Fatal(err)
		}
		return conn
	}
	conn := open()
	if err := conn.Exec(ctx, "CREATE TABLE default.kept (n UInt64) ENGINE = MergeTree ORDER BY n"); err != nil {
		t.Fatal(err)
	}
	batch, err := conn.PrepareBatch(ctx, "INSERT INTO default.kept (n)")
	if err != nil {
		t.Fatal(err)
	}
	if err := batch.Append(uint64(7)); err != nil {
		t.Fatal(err)
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	p.Stop()
	conn = open()
	if err := conn.Ping(ctx); err == nil {
		t.Fatal("the private server still answers after Stop")
	}
	conn.Close()
	p.Start()
	conn = open()
	defer conn.Close()
	var n uint64
	if err := conn.QueryRow(ctx, "SELECT n FROM default.kept").Scan(&n); err != nil || n != 7 {
		t.Fatalf("after the restart: n=%d err=%v", n, err)
	}
}
