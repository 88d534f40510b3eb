package chstore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/store/storetest"
)

// localCluster returns a one-shard cluster of this server from
// system.clusters, or skips: a cluster whose shards are all this server
// would read every row once per shard.
func localCluster(t *testing.T, s *Store) string {
	t.Helper()
	var name string
	err := s.conn.QueryRow(context.Background(), `SELECT cluster FROM system.clusters
GROUP BY cluster HAVING count() = 1 AND any(is_local) = 1 AND any(port) = 9000 ORDER BY cluster LIMIT 1`).Scan(&name)
	if err != nil || name == "" {
		t.Skipf("the server config has no one-shard local test cluster (%v)", err)
	}
	return name
}

// TestClusterNodeLocal runs the non-replicated cluster schema for real:
// local tables plus …_dist Distributed tables, written and read through
// the Distributed tables, with the whole conformance suite.
func TestClusterNodeLocal(t *testing.T) {
	plain, addr, _ := openTest(t)
	cluster := localCluster(t, plain)
	storetest.Run(t, func(t *testing.T) store.Store {
		db := testDB(t, addr)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s, err := Open(ctx, addr, db, WithCluster(cluster), WithNodeLocalDDL())
		if err != nil {
			t.Fatal(err)
		}
		var engine string
		if err := s.conn.QueryRow(ctx, "SELECT engine FROM system.tables WHERE database = ? AND name = 'rollups_dist'", db).Scan(&engine); err != nil || engine != "Distributed" {
			t.Fatalf("rollups_dist engine %q, %v", engine, err)
		}
		if got := s.schema.target(TableRollups); got != db+".rollups_dist" {
			t.Fatalf("writes go to %s", got)
		}
		return s
	})
}

// TestClusterNeedsDistributedDDL: without ZooKeeper, ON CLUSTER cannot
// run; Open says so and names the way out.
func TestClusterNeedsDistributedDDL(t *testing.T) {
	plain, addr, _ := openTest(t)
	cluster := localCluster(t, plain)
	var zk uint64
	plain.conn.QueryRow(context.Background(), "SELECT count() FROM system.tables WHERE database = 'system' AND name = 'zookeeper'").Scan(&zk)
	if zk > 0 {
		t.Skip("this server has ZooKeeper: ON CLUSTER works here")
	}
	db := testDB(t, addr)
	_, err := Open(context.Background(), addr, db, WithCluster(cluster))
	if !errors.Is(err, ErrNoDistributedDDL) {
		t.Fatalf("Open with ON CLUSTER on a server without ZooKeeper = %v, want ErrNoDistributedDDL", err)
	}
}

func TestOpenConfigErrors(t *testing.T) {
	addr := "127.0.0.1:1" // never dialled: the configuration is refused first
	for name, opts := range map[string][]Option{
		"node-local without cluster": {WithNodeLocalDDL()},
		"replicated without cluster": {WithReplicated()},
		"bad cluster name":           {WithCluster("a;b")},
		"short retention":            {WithRetention(time.Second)},
		"zero dial timeout":          {WithDialTimeout(0)},
	} {
		if _, err := Open(context.Background(), addr, "qtop", opts...); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: Open = %v, want ErrConfig", name, err)
		}
	}
	if _, err := Open(context.Background(), addr, "bad-name"); !errors.Is(err, ErrConfig) {
		t.Errorf("bad database name: %v", err)
	}
}

func TestUnknownCluster(t *testing.T) {
	addr := openAddr(t)
	_, err := Open(context.Background(), addr, testDB(t, addr), WithCluster("no_such_cluster"), WithNodeLocalDDL())
	if !errors.Is(err, ErrConfig) {
		t.Fatalf("Open with an unknown cluster = %v, want ErrConfig", err)
	}
}

func TestServerDown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := Open(ctx, "127.0.0.1:1", "qtop", WithDialTimeout(time.Second))
	if err == nil {
		t.Fatal("Open of a closed port succeeded")
	}
}

// TestMigrationAddsColumn: a database created at schema version 1 (before
// active_session_seconds existed) with data in it gets the column by an
// ALTER at the next Open; old rows read as 0; opening again changes nothing.
func TestMigrationAddsColumn(t *testing.T) {
	addr := openAddr(t)
	db := testDB(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	v1, err := Open(ctx, addr, db, func(c *config) { c.maxMigration = 1 })
	if err != nil {
		t.Fatal(err)
	}
	if has, _ := hasColumn(ctx, v1.conn, v1.schema.Database, TableRollups, "active_session_seconds"); has {
		t.Fatal("schema version 1 already has the column")
	}
	// Written at version 1: the column list has no active_session_seconds.
	b, err := v1.conn.PrepareBatch(ctx, fmt.Sprintf(`INSERT INTO %s.rollups (minute, writer, version, service, tenant, route, tier, kind,
    count, errors, duration_seconds, ru, bytes, rows, latency_idx, latency_cnt)`, db))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Append(storetest.T0, "w1", uint64(1), "api", "acme", "/", uint8(3), "request", uint64(10), uint64(1), 0.1, 15.0,
		uint64(1000), uint64(30), []uint16{}, []uint64{}); err != nil {
		t.Fatal(err)
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
	v1.Close()
	old := storetest.Row(0, "w1", "acme", "/", 10)
	pg := store.Rollup{Minute: storetest.T0, Writer: "w1", Tenant: "acme", Kind: store.KindPG, ActiveSessionSeconds: 30}
	for i := range 2 {
		s, err := Open(ctx, addr, db)
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		var n uint64
		want := uint64(len(s.schema.Migrations()))
		if err := s.conn.QueryRow(ctx, fmt.Sprintf("SELECT count() FROM %s.schema_migrations", db)).Scan(&n); err != nil || n != want {
			t.Fatalf("open %d: %d migrations recorded, %v; want %d", i, n, err, want)
		}
		if err := s.WriteRollups(ctx, []store.Rollup{pg}); err != nil {
			t.Fatal(err)
		}
		u, err := s.Usage(ctx, storetest.T0, storetest.T0.Add(time.Hour), false)
		if err != nil {
			t.Fatal(err)
		}
		storetest.CheckUsage(t, u, storetest.ExpectUsage([]store.Rollup{old, pg}, storetest.T0, storetest.T0.Add(time.Hour), false))
		s.Close()
	}
}

// TestMigrationResumesAfterCrash: a collector that died after the ALTER but
// before recording the migration does not make the next Open fail.
func TestMigrationResumesAfterCrash(t *testing.T) {
	s, addr, db := openTest(t)
	ctx := context.Background()
	if err := s.conn.Exec(ctx, fmt.Sprintf("ALTER TABLE %s.schema_migrations DELETE WHERE version = 2", db)); err != nil {
		t.Fatal(err)
	}
	// Mutations are asynchronous.
	testsvc.Eventually(t, 30*time.Second, "the mutation deleting migration 2", func() bool {
		var n uint64
		s.conn.QueryRow(ctx, fmt.Sprintf("SELECT count() FROM %s.schema_migrations WHERE version = 2", db)).Scan(&n)
		return n == 0
	})
	again, err := Open(ctx, addr, db)
	if err != nil {
		t.Fatalf("reopen after a half-recorded migration: %v", err)
	}
	again.Close()
}

func openAddr(t *testing.T) string {
	t.Helper()
	return testsvcClickHouse(t)
}
