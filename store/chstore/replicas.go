package chstore

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// appliedFunc says what is left before a replica has applied a change
// (empty: nothing), or fails.
type appliedFunc func(ctx context.Context, conn driver.Conn) (string, error)

// onShardsApplied runs run on the first answering replica of each shard of
// a replicated cluster, then waits until every replica of the shard has
// applied what run did, as the appliedFunc run returns says (at most five
// minutes when ctx has no deadline). A change made on one replica reaches
// the others through ZooKeeper a moment later; a Distributed read picks
// any replica, so a change waited for on one only could still be read
// undone. A replica that does not answer is skipped with a warning: it
// applies the change when it is back, and reads skip it meanwhile.
func onShardsApplied(ctx context.Context, s *Store, what string, run func(driver.Conn) (appliedFunc, error)) error {
	ctx, cancel := boundWait(ctx)
	defer cancel()
	shards, err := clusterNodes(ctx, s)
	if err != nil {
		return err
	}
	dial := func(addr string) (driver.Conn, error) { return dialNode(s, addr) }
	for _, replicas := range shards {
		var applied appliedFunc
		err := onFirstAnswering(ctx, replicas, dial, func(conn driver.Conn) (err error) {
			applied, err = run(conn)
			return err
		})
		if err != nil {
			return err
		}
		for _, addr := range replicas {
			conn, err := dialPinged(ctx, dial, addr)
			if err != nil {
				s.cfg.log.Warn("chstore: "+what+": a replica does not answer; it applies the change when it is back",
					"node", addr, "err", err)
				continue
			}
			err = waitApplied(ctx, conn, what, applied)
			conn.Close()
			if err != nil {
				return fmt.Errorf("chstore: node %s: %w", addr, err)
			}
		}
	}
	return nil
}

// boundWait gives ctx a deadline five minutes ahead when it has none, so
// that a wait for the servers to apply a change ends.
func boundWait(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, 5*time.Minute)
}

// waitApplied polls applied on the replica until nothing is left.
func waitApplied(ctx context.Context, conn driver.Conn, what string, applied appliedFunc) error {
	for {
		left, err := applied(ctx, conn)
		if err == nil && left == "" {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("chstore: %s: not done on the node (%s, %v): %w", what, left, err, ctx.Err())
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// queuedOf counts the entries of a type in the replica's replication
// queue for the table.
func queuedOf(ctx context.Context, conn driver.Conn, database, table, entryType string) (uint64, error) {
	var n uint64
	err := conn.QueryRow(ctx, "SELECT count() FROM system.replication_queue WHERE database = ? AND table = ? AND type = ?",
		database, table, entryType).Scan(&n)
	return n, err
}
