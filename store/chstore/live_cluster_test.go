package chstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/store/storetest"
)

// liveCluster is the test cluster of scripts/services (2 shards × 2
// replicas on ZooKeeper) and a fresh database on it, dropped ON CLUSTER
// when the test ends (which also removes its replicas' ZooKeeper nodes).
type liveCluster struct {
	name  string
	addrs []string // shard 1 replica 1, shard 1 replica 2, shard 2 replica 1, shard 2 replica 2
	db    string
}

func newLiveCluster(t testing.TB) liveCluster {
	t.Helper()
	name, addrs := testsvc.ClickHouseCluster(t)
	c := liveCluster{name: name, addrs: addrs, db: fmt.Sprintf("qtop_cl_%d_%d", os.Getpid(), dbSeq.Add(1))}
	t.Cleanup(func() {
		conn := c.node(t, 0)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+c.db+" ON CLUSTER "+c.name); err != nil {
			t.Logf("drop %s: %v", c.db, err)
		}
	})
	return c
}

// node is a plain connection to node i (not through the store).
func (c liveCluster) node(t testing.TB, i int) clickhouse.Conn {
	t.Helper()
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{c.addrs[i]}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// open opens the store on the cluster through the nodes listed (all of
// them, in order, when none is given).
func (c liveCluster) open(t testing.TB, nodes ...int) *Store {
	t.Helper()
	addrs := c.addrs
	if len(nodes) > 0 {
		addrs = nil
		for _, i := range nodes {
			addrs = append(addrs, c.addrs[i])
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := Open(ctx, strings.Join(addrs, ","), c.db, WithCluster(c.name), WithReplicated())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// syncReplicas waits until every replica of table has fetched what the
// others have.
func (c liveCluster) syncReplicas(t testing.TB, table string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range c.addrs {
		if err := c.node(t, i).Exec(ctx, "SYSTEM SYNC REPLICA "+c.db+"."+table); err != nil {
			t.Fatalf("sync replica %s on %s: %v", table, c.addrs[i], err)
		}
	}
}

// localCount counts the rows of table stored on node i itself.
func (c liveCluster) localCount(t testing.TB, i int, table string) uint64 {
	t.Helper()
	var n uint64
	if err := c.node(t, i).QueryRow(context.Background(), "SELECT count() FROM "+c.db+"."+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestLiveClusterSchemaAndDistributed: the schema is created ON CLUSTER
// with Replicated engines on every node, rows written through the
// Distributed table land on both shards (by tenant) and on both replicas
// of each, and a store opened on another node reads them back whole.
func TestLiveClusterSchemaAndDistributed(t *testing.T) {
	c := newLiveCluster(t)
	s := c.open(t, 0)
	ctx := context.Background()
	for i := range c.addrs {
		for table, want := range map[string]string{
			TableRollups: "ReplicatedReplacingMergeTree", TableRollups + DistSuffix: "Distributed",
			TableHotKeys: "ReplicatedReplacingMergeTree", TableAudit + DistSuffix: "Distributed",
		} {
			var engine string
			err := c.node(t, i).QueryRow(ctx, "SELECT engine FROM system.tables WHERE database = ? AND name = ?", c.db, table).Scan(&engine)
			if err != nil || engine != want {
				t.Fatalf("node %s: %s engine %q (%v), want %s", c.addrs[i], table, engine, err, want)
			}
		}
	}
	var rows []store.Rollup
	for i := range 40 {
		rows = append(rows, storetest.Row(i%3, "w1", fmt.Sprintf("tenant%02d", i), "/r", uint64(i+1)))
	}
	if err := s.WriteRollups(ctx, rows); err != nil {
		t.Fatal(err)
	}
	c.syncReplicas(t, TableRollups)
	s1, s2 := c.localCount(t, 0, TableRollups), c.localCount(t, 2, TableRollups)
	if s1 == 0 || s2 == 0 || s1+s2 != uint64(len(rows)) {
		t.Fatalf("shard 1 holds %d rows, shard 2 %d; want both > 0, %d in all", s1, s2, len(rows))
	}
	if r1, r2 := c.localCount(t, 1, TableRollups), c.localCount(t, 3, TableRollups); r1 != s1 || r2 != s2 {
		t.Fatalf("replicas hold %d and %d rows, want %d and %d", r1, r2, s1, s2)
	}
	other := c.open(t, 3)
	from, to := storetest.T0, storetest.T0.Add(time.Hour)
	u, err := other.Usage(ctx, from, to, false)
	if err != nil {
		t.Fatal(err)
	}
	storetest.CheckUsage(t, u, storetest.ExpectUsage(rows, from, to, false))
}

// TestLiveClusterNeedsItsCluster: a cluster's database opened without
// its cluster is refused (its node's tables hold one shard: a report
// would sum half, an erase leave the tenant on the other shard).
func TestLiveClusterNeedsItsCluster(t *testing.T) {
	c := newLiveCluster(t)
	c.open(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, opts := range [][]Option{nil, {WithExisting()}} {
		s, err := Open(ctx, c.addrs[2], c.db, opts...)
		if err == nil {
			s.Close()
			t.Fatal("opened without its cluster")
		}
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "--cluster") {
			t.Fatalf("error %v", err)
		}
	}
}

// TestLiveClusterConformance runs the store conformance suite on the
// replicated cluster, every figure read through the Distributed tables.
// Its cases run in parallel: each waits mostly on ON CLUSTER DDL.
func TestLiveClusterConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		t.Parallel()
		return newLiveCluster(t).open(t)
	})
}
