package chstore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/store/storetest"
)

// lastDDL is the name of the newest ON CLUSTER statement on c's database
// in the cluster's DDL queue in ZooKeeper (query-SEQUENCE: names only
// grow, whatever the queue's cleanup removes); other tests' statements on
// the shared cluster, run meanwhile, are not counted.
func (c liveCluster) lastDDL(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var name string
	if err := c.node(t, 0).QueryRow(ctx, fmt.Sprintf("SELECT max(name) FROM system.zookeeper WHERE path = '/clickhouse/task_queue/ddl' AND position(value, '%s') > 0", c.db)).Scan(&name); err != nil {
		t.Fatal(err)
	}
	return name
}

// Opening a store whose schema is in place queues no ON CLUSTER
// statement: each waits for every node of the cluster, so with one replica
// down (a node's maintenance) a collector restarting, `collector erase` and
// `collector report --store` waited distributed_ddl_task_timeout (180 s)
// for the CREATE DATABASE … ON CLUSTER of every Open, then failed.
func TestLiveClusterReopenRunsNoDDL(t *testing.T) {
	c := newLiveCluster(t)
	c.open(t) // creates and migrates the schema
	before := c.lastDDL(t)
	if before == "" {
		t.Fatal("creating the schema queued no ON CLUSTER statement on its database: the queue is not read right")
	}
	c.open(t)
	if after := c.lastDDL(t); after != before {
		t.Fatalf("reopening queued ON CLUSTER statements (the newest was %s, now %s), want none", before, after)
	}
}

// A node that answers without qtop's schema (rebuilt empty: its replicas
// still registered in ZooKeeper, so no open creates its tables) is named
// by NodesWithoutSchema, and no longer once its tables are back. The test
// detaches the node's schema_migrations to stand for the rebuild.
func TestLiveClusterNodesWithoutSchema(t *testing.T) {
	c := newLiveCluster(t)
	s := c.open(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if missing, err := s.NodesWithoutSchema(ctx); err != nil || len(missing) != 0 {
		t.Fatalf("on a whole cluster: %v, %v; want none", missing, err)
	}
	node := c.node(t, 3)
	if err := node.Exec(ctx, "DETACH TABLE "+c.db+"."+TableMigrations); err != nil {
		t.Fatal(err)
	}
	attached := false
	attach := func() {
		if !attached {
			attached = true
			if err := node.Exec(ctx, "ATTACH TABLE "+c.db+"."+TableMigrations); err != nil {
				t.Error(err)
			}
		}
	}
	defer attach()
	missing, err := s.NodesWithoutSchema(ctx)
	if err != nil || len(missing) != 1 || missing[0] != c.addrs[3] {
		t.Fatalf("with %s's schema gone: %v, %v; want [%s]", c.addrs[3], missing, err, c.addrs[3])
	}
	attach()
	if missing, err := s.NodesWithoutSchema(ctx); err != nil || len(missing) != 0 {
		t.Fatalf("with the schema back: %v, %v; want none", missing, err)
	}
}

// A shard's first replica without qtop's tables (rebuilt empty; here its
// rollups detached) makes a synchronous Distributed insert to that shard
// fail with the remote node's UNKNOWN_TABLE (until the server, counting
// the replica's errors, prefers the other one), while reads go to the
// other replica. That is the store's layout, not the rows: the failure is
// store.ErrUnavailable, so the spool keeps such a batch however many
// replays fail, never a dead letter, and every row is stored.
func TestLiveClusterRebuiltReplicaIsNotPoison(t *testing.T) {
	c := newLiveCluster(t)
	s := c.open(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	first := c.node(t, 2) // shard 2's first replica: in_order sends its inserts there
	table := c.db + "." + TableRollups
	if err := first.Exec(ctx, "DETACH TABLE "+table); err != nil {
		t.Fatal(err)
	}
	attached := false
	attach := func() {
		if !attached {
			attached = true
			if err := first.Exec(context.Background(), "ATTACH TABLE "+table); err != nil {
				t.Error(err)
			}
		}
	}
	defer attach()
	var rows []store.Rollup
	var want uint64
	for i := range 20 { // tenants on both shards
		r := storetest.Row(0, "w", fmt.Sprintf("tenant%02d", i), "/r", uint64(i+1))
		rows, want = append(rows, r), want+r.Count
	}
	err := s.WriteRollups(ctx, rows)
	if err == nil {
		t.Fatal("the write succeeded with shard 2's first replica without its table: the test shows nothing")
	}
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("%v: not classified unavailable", err)
	}
	sp, err := store.NewSpool(s, t.TempDir(), store.WithRetry(time.Hour, time.Hour), store.WithCloseTimeout(0))
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	if err := sp.WriteRollups(ctx, rows); err != nil {
		t.Fatal(err)
	}
	for range 3 * store.DeadLetterAfter {
		if sp.Flush(ctx) == nil {
			break
		}
	}
	attach()
	if err := sp.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if st := sp.Stats(); st.DeadLetters != 0 || st.PendingRows != 0 {
		t.Fatalf("stats %+v: want every row stored, no dead letter", st)
	}
	u, err := s.Usage(ctx, rows[0].Minute, rows[0].Minute.Add(time.Minute), false)
	if err != nil {
		t.Fatal(err)
	}
	var got uint64
	for _, x := range u {
		got += x.Requests
	}
	if got != want {
		t.Fatalf("usage %d requests, want %d", got, want)
	}
}
