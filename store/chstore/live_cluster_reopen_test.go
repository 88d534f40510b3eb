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
