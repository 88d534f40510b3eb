package chstore

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/store/storetest"
)

// TestLiveClusterRetryDeduplicated is TestRetryAfterDroppedLink on the
// replicated cluster: the reply of a committed insert is lost, the writer
// retries the same batch, and Replicated tables drop the identical blocks
// (on both shards), so the rows are on disk once, on every replica — where
// the single server keeps them twice until a merge.
func TestLiveClusterRetryDeduplicated(t *testing.T) {
	c := newLiveCluster(t)
	c.open(t, 0) // the schema
	p := newCutProxy(t, c.addrs[0])
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := Open(ctx, p.addr(), c.db, WithCluster(c.name), WithReplicated(), WithMaxConns(1))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range c.addrs { // keep parts apart: a duplicate would stay visible
		if err := c.node(t, i).Exec(ctx, "SYSTEM STOP MERGES "+c.db+".rollups"); err != nil {
			t.Fatal(err)
		}
	}
	const n = 20000
	batch := bigBatch(n)
	p.after, p.keepSend = 8<<10, true
	p.armed.Store(true)
	if err := s.WriteRollups(ctx, batch); err == nil {
		t.Fatalf("the write through a cut link succeeded (cuts %d)", p.cuts.Load())
	}
	total := func() uint64 { return c.localCount(t, 0, TableRollups) + c.localCount(t, 2, TableRollups) }
	testsvc.Poll(30*time.Second, func() bool { return total() == n })
	if got := total(); got != n {
		t.Fatalf("after the lost reply the shards hold %d rows, want %d (committed)", got, n)
	}
	for range 2 { // the retry, and a second one for good measure
		if err := s.WriteRollups(ctx, batch); err != nil {
			t.Fatalf("retry: %v", err)
		}
	}
	c.syncReplicas(t, TableRollups)
	for i := range c.addrs {
		shardRows := c.localCount(t, i, TableRollups)
		if i%2 == 1 && shardRows != c.localCount(t, i-1, TableRollups) {
			t.Fatalf("replica %s holds %d rows, its peer %d", c.addrs[i], shardRows, c.localCount(t, i-1, TableRollups))
		}
	}
	if got := total(); got != n {
		t.Fatalf("after the retries the shards hold %d rows on disk, want %d: identical blocks were not deduplicated", got, n)
	}
	from, to := storetest.T0, storetest.T0.Add(time.Hour)
	u, err := c.open(t, 3).Usage(ctx, from, to, true)
	if err != nil {
		t.Fatal(err)
	}
	storetest.CheckUsage(t, u, storetest.ExpectUsage(batch, from, to, true))
}

// TestLiveClusterConcurrentMigrations: collectors that start together on
// different nodes all migrate the same database without an error, whether
// it is new or at an older schema version (both then add the same column;
// the one that comes second finds it there), and the replicas of each
// table share one ZooKeeper path although each collector renders its own
// incarnation.
func TestLiveClusterConcurrentMigrations(t *testing.T) {
	for _, from := range []int{0, 1} {
		t.Run(fmt.Sprintf("from version %d", from), func(t *testing.T) {
			c := newLiveCluster(t)
			if from > 0 {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				old, err := Open(ctx, c.addrs[0], c.db, WithCluster(c.name), WithReplicated(), func(cf *config) { cf.maxMigration = from })
				cancel()
				if err != nil {
					t.Fatal(err)
				}
				old.Close()
				var has uint64
				c.node(t, 1).QueryRow(context.Background(), "SELECT count() FROM system.columns WHERE database = ? AND name = 'active_session_seconds'", c.db).Scan(&has)
				if has != 0 {
					t.Fatalf("version %d already has the new column", from)
				}
			}
			nodes := []int{1, 2, 3}
			errs := make([]error, len(nodes))
			var wg sync.WaitGroup
			for i, n := range nodes {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
					defer cancel()
					s, err := Open(ctx, c.addrs[n], c.db, WithCluster(c.name), WithReplicated())
					if err == nil {
						s.Close()
					}
					errs[i] = err
				}()
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Errorf("collector on %s: %v", c.addrs[nodes[i]], err)
				}
			}
			for i := range c.addrs {
				var n uint64
				err := c.node(t, i).QueryRow(context.Background(), `SELECT count() FROM system.columns
WHERE database = ? AND name = 'active_session_seconds' AND table IN ('rollups', 'rollups_dist')`, c.db).Scan(&n)
				if err != nil || n != 2 {
					t.Errorf("node %s: %d of rollups and rollups_dist have the column (%v), want 2", c.addrs[i], n, err)
				}
			}
			// Each collector rendered its own incarnation of the replica
			// paths: every table's two replicas still met at one path.
			for i := range c.addrs {
				var tables, paired uint64
				err := c.node(t, i).QueryRow(context.Background(), `SELECT count(), countIf(total_replicas = 2 AND active_replicas = 2)
FROM system.replicas WHERE database = ?`, c.db).Scan(&tables, &paired)
				if err != nil || tables != 6 || paired != tables {
					t.Errorf("node %s: %d of %d replicated tables have both replicas at their path (%v), want 6 of 6", c.addrs[i], paired, tables, err)
				}
			}
		})
	}
}
