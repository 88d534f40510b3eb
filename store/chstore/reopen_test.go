package chstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/internal/testsvc"
)

// An Open that fails after registering its metrics (here the migration:
// the server refuses tables in its system database; on a cluster, ON
// CLUSTER DDL without ZooKeeper) takes them back, so the next Open on the
// same registry — the collector opening a store that was unreachable at
// start, every few seconds until it answers — fails for the same reason
// and succeeds once the cause is gone, not with "duplicate metrics
// collector registration attempted" for ever.
func TestFailedOpenUnregistersMetrics(t *testing.T) {
	addr := testsvc.ClickHouse(t)
	reg := prometheus.NewRegistry()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	db := testDB(t, addr)
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A migrations table the store cannot read: Open fails in migrate,
	// after its metrics are registered.
	for _, q := range []string{"CREATE DATABASE " + db, "CREATE TABLE " + db + "." + TableMigrations + " (x UInt8) ENGINE = Memory"} {
		if err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		s, err := Open(ctx, addr, db, WithRegisterer(reg))
		if err == nil {
			s.Close()
			t.Fatal("opened over a migrations table without a version column")
		}
		if strings.Contains(err.Error(), "registration") {
			t.Fatalf("open %d: %v", i, err)
		}
	}
	if err := conn.Exec(ctx, "DROP TABLE "+db+"."+TableMigrations); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, addr, db, WithRegisterer(reg))
	if err != nil {
		t.Fatalf("open after failed opens: %v", err)
	}
	s.Close()
}

// An Open that fails before its metrics are made (nothing listens) has
// nothing to take back, and does not panic trying.
func TestFailedDialUnregistersNothing(t *testing.T) {
	reg := prometheus.NewRegistry()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range 2 {
		if s, err := Open(ctx, "127.0.0.1:1", "x", WithRegisterer(reg), WithDialTimeout(time.Second)); err == nil {
			s.Close()
			t.Fatal("opened a store where nothing listens")
		}
	}
}
