package chstore

import (
	"context"
	"testing"
	"time"
)

// lastDDL is the name of the newest ON CLUSTER statement in the cluster's
// DDL queue in ZooKeeper (query-SEQUENCE: names only grow, whatever the
// queue's cleanup removes).
func (c liveCluster) lastDDL(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var name string
	if err := c.node(t, 0).QueryRow(ctx, "SELECT max(name) FROM system.zookeeper WHERE path = '/clickhouse/task_queue/ddl'").Scan(&name); err != nil {
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
