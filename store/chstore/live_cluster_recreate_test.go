package chstore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/store/storetest"
)

// zkPaths returns the ZooKeeper path of each of qtop's replicated tables
// on node i.
func (c liveCluster) zkPaths(t *testing.T, i int) map[string]string {
	t.Helper()
	rows, err := c.node(t, i).Query(context.Background(), "SELECT table, zookeeper_path FROM system.replicas WHERE database = ?", c.db)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var table, path string
		if err := rows.Scan(&table, &path); err != nil {
			t.Fatal(err)
		}
		out[table] = path
	}
	return out
}

// TestLiveClusterDropRecreate drops qtop's database ON CLUSTER, leaves a
// replica behind at an old table path (as a node whose drop never ran
// does), and opens the store on the same name again: the new tables get
// replica paths of their own incarnation (an incarnation suffix on 18.16's
// Ordinary databases; {uuid} on Atomic ones), so they do not meet it, and
// writes and reads work as before, with none of the old rows. It also erases a tenant on the cluster
// (DeleteTenant: a mutation on one replica of each shard).
func TestLiveClusterDropRecreate(t *testing.T) {
	c := newLiveCluster(t)
	ctx := context.Background()
	from, to := storetest.T0, storetest.T0.Add(time.Hour)
	write := func(s *Store, writer string) []store.Rollup {
		var rows []store.Rollup
		for i := range 20 {
			rows = append(rows, storetest.Row(i%3, writer, fmt.Sprintf("tenant%02d", i), "/r", uint64(i+1)))
		}
		if err := s.WriteRollups(ctx, rows); err != nil {
			t.Fatal(err)
		}
		return rows
	}

	first := c.open(t, 0)
	rows := write(first, "w1")
	if err := first.DeleteTenant(ctx, "tenant03"); err != nil {
		t.Fatal(err)
	}
	c.syncReplicas(t, TableRollups)
	kept := rows[:0:0]
	for _, r := range rows {
		if r.Tenant != "tenant03" {
			kept = append(kept, r)
		}
	}
	u, err := first.Usage(ctx, from, to, false)
	if err != nil {
		t.Fatal(err)
	}
	storetest.CheckUsage(t, u, storetest.ExpectUsage(kept, from, to, false))
	for i := range c.addrs { // the shard's other replica applied the mutation too
		var n uint64
		if err := c.node(t, i).QueryRow(ctx, "SELECT count() FROM "+c.db+".rollups WHERE tenant = 'tenant03'").Scan(&n); err != nil || n != 0 {
			t.Fatalf("node %s still holds %d rows of the erased tenant (%v)", c.addrs[i], n, err)
		}
	}
	before := c.zkPaths(t, 0)
	if len(before) == 0 {
		t.Fatal("no replicated tables on node 0")
	}
	var replica0 string
	if err := c.node(t, 0).QueryRow(ctx, "SELECT replica_name FROM system.replicas WHERE database = ? AND table = 'rollups'", c.db).Scan(&replica0); err != nil {
		t.Fatal(err)
	}
	first.Close()

	dctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := c.node(t, 0).Exec(dctx, "DROP DATABASE "+c.db+" ON CLUSTER "+c.name); err != nil {
		t.Fatal(err)
	}

	// A replica whose drop never ran (its node was down past the DDL
	// queue's lifetime, or the database was dropped on one node only)
	// stays registered at its table's path: here one at the old path of
	// rollups, under node 0's replica name. A table created again at that
	// path on node 0 fails; the new incarnation's path does not meet it.
	leftover := c.db + "_leftover"
	t.Cleanup(func() { c.node(t, 0).Exec(context.Background(), "DROP DATABASE IF EXISTS "+leftover) })
	node0 := c.node(t, 0)
	if err := node0.Exec(dctx, "CREATE DATABASE "+leftover); err != nil {
		t.Fatal(err)
	}
	stale := fmt.Sprintf("CREATE TABLE %s.%%s (x UInt8) ENGINE = ReplicatedMergeTree('%s', '%s') ORDER BY x", leftover, before[TableRollups], replica0)
	if err := node0.Exec(dctx, fmt.Sprintf(stale, "stale")); err != nil {
		t.Fatal(err)
	}
	if err := node0.Exec(dctx, fmt.Sprintf(stale, "again")); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("a second replica %s at the old path: %v, want it to exist already", replica0, err)
	}

	again := c.open(t, 1, 0)
	after := c.zkPaths(t, 0)
	for table, p := range before {
		if after[table] == "" || after[table] == p {
			t.Errorf("%s: replica path %q after re-creating, was %q: want a new one", table, after[table], p)
		}
	}
	rows2 := write(again, "w2")
	c.syncReplicas(t, TableRollups) // a read may take its shard from the replica not written
	for _, i := range []int{0, 3} { // read through a node of each shard
		s := c.open(t, i)
		u, err := s.Usage(ctx, from, to, false)
		if err != nil {
			t.Fatal(err)
		}
		storetest.CheckUsage(t, u, storetest.ExpectUsage(rows2, from, to, false))
	}
	t.Logf("replica path of rollups: %s, then %s", before[TableRollups], after[TableRollups])
}
