package chstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// TenantTables are the tables that hold a tenant's rows: DeleteTenant
// erases from these. Audit rows (policy changes) are kept.
var TenantTables = []string{TableRollups, TableHotKeys, TableStatements}

// DeleteTenantSQL renders the statement that erases one tenant's rows
// from a local table: a lightweight DELETE FROM on servers that have it
// (23.3: rows are masked at once and removed by merges), an ALTER TABLE …
// DELETE mutation before (the parts holding the tenant are rewritten in
// the background). Neither carries ON CLUSTER: DeleteTenant runs it on
// each shard itself.
func (s Schema) DeleteTenantSQL(table, tenantName string) string {
	where := "tenant = " + quoteString(tenantName)
	if s.features().LightweightDelete {
		return fmt.Sprintf("DELETE FROM %s.%s WHERE %s", s.Database, table, where)
	}
	return fmt.Sprintf("ALTER TABLE %s.%s DELETE WHERE %s", s.Database, table, where)
}

// quoteString is s as a ClickHouse string literal.
func quoteString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `'`, `\'`)
	return "'" + r.Replace(s) + "'"
}

// DeleteTenant erases one tenant's rows from every table that holds them
// (TenantTables and the sums of closed hours; not the audit log), for a
// tenant's erasure; the hours it had rows in are summed again. It returns
// once the rows no longer show in reads through this store: a lightweight
// delete waits for every replica (mutations_sync 2); an old server's
// mutation is waited for on the node that ran it and then on its shard's
// other replicas (deleteReplicated). On a cluster it runs on one
// replica of each shard (replicated tables) or on every node, not ON
// CLUSTER (ClickHouse 18.16's DDL worker cannot take a replicated ALTER
// ON CLUSTER reliably). A cancelled ctx stops the wait, not the
// mutation already queued.
func (s *Store) DeleteTenant(ctx context.Context, tenantName string) error {
	if err := s.check(); err != nil {
		return err
	}
	sc := s.schema
	hours, err := tenantHours(ctx, s, tenantName)
	if err != nil {
		return err
	}
	run := func(conn driver.Conn) error {
		for _, table := range append(slices.Clip(TenantTables), TableSums) {
			if err := deleteOn(ctx, conn, sc, table, tenantName); err != nil {
				return err
			}
		}
		return nil
	}
	switch {
	case !sc.sharded():
		err = run(s.conn)
	case sc.replicated() && !sc.features().LightweightDelete:
		err = deleteReplicated(ctx, s, tenantName, run)
	default:
		err = s.nodes(ctx, sc.replicated(), run)
	}
	if err != nil {
		return err
	}
	// A computation that read the tenant's rows before they were deleted
	// may write its sums after: the hours are marked written, so no sums
	// computed before now count, and they are summed again.
	if err := markHours(ctx, s, hours); err != nil {
		return fmt.Errorf("chstore: delete tenant: %w", err)
	}
	return nil
}

// tenantHours returns the hours that hold the tenant's rollups (the
// sorting key's prefix: a read of the tenant's rows only).
func tenantHours(ctx context.Context, s *Store, tenantName string) ([]time.Time, error) {
	rows, err := s.conn.Query(ctx, fmt.Sprintf("SELECT DISTINCT toStartOfHour(minute) FROM %s WHERE tenant = ?", s.schema.target(TableRollups)), tenantName)
	if err != nil {
		return nil, fmt.Errorf("chstore: delete tenant: hours: %w", err)
	}
	defer rows.Close()
	var hours []time.Time
	for rows.Next() {
		var h time.Time
		if err := rows.Scan(&h); err != nil {
			return nil, fmt.Errorf("chstore: delete tenant: hours: %w", err)
		}
		hours = append(hours, h.UTC())
	}
	return hours, rows.Err()
}

func deleteOn(ctx context.Context, conn driver.Conn, sc Schema, table, tenantName string) error {
	q := sc.DeleteTenantSQL(table, tenantName)
	if sc.features().LightweightDelete {
		ctx = clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{"mutations_sync": 2}))
		if err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("chstore: delete tenant from %s: %w", table, err)
		}
		return nil
	}
	if err := conn.Exec(ctx, q); err != nil {
		return fmt.Errorf("chstore: delete tenant from %s: %w", table, err)
	}
	return waitMutations(ctx, conn, sc.Database, table)
}

// waitMutations waits until the node has no unfinished mutation of the
// table (at most five minutes when ctx has no deadline).
func waitMutations(ctx context.Context, conn driver.Conn, database, table string) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
	}
	for {
		var n uint64
		err := conn.QueryRow(ctx, "SELECT count() FROM system.mutations WHERE database = ? AND table = ? AND is_done = 0",
			database, table).Scan(&n)
		if err == nil && n == 0 {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("chstore: delete tenant from %s: mutation not done (%d pending, %v): %w", table, n, err, ctx.Err())
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// deleteReplicated runs the old server's mutations (run) on the first
// answering replica of each shard, then waits until every replica of the
// shard has applied them: before, a Distributed read that picked a replica
// still replicating a mutation read the erased tenant. A replica that does
// not answer is skipped with a warning; it applies the mutations from
// ZooKeeper when it is back, and reads skip it meanwhile.
func deleteReplicated(ctx context.Context, s *Store, tenantName string, run func(driver.Conn) error) error {
	shards, err := clusterNodes(ctx, s)
	if err != nil {
		return err
	}
	dial := func(addr string) (driver.Conn, error) { return dialNode(s, addr) }
	tables := append(slices.Clip(TenantTables), TableSums)
	command := "DELETE WHERE tenant = " + quoteString(tenantName)
	for _, replicas := range shards {
		var ids []string // the mutation each table got, in tables' order
		err := onFirstAnswering(ctx, replicas, dial, func(conn driver.Conn) error {
			if err := run(conn); err != nil {
				return err
			}
			var err error
			ids, err = mutationIDs(ctx, conn, s.schema.Database, tables, command)
			return err
		})
		if err != nil {
			return err
		}
		for _, addr := range replicas {
			conn, err := dialPinged(ctx, dial, addr)
			if err != nil {
				s.cfg.log.Warn("chstore: delete tenant: a replica does not answer; it applies the erasure when it is back",
					"node", addr, "err", err)
				continue
			}
			err = waitApplied(ctx, conn, s.schema.Database, tables, ids)
			conn.Close()
			if err != nil {
				return fmt.Errorf("chstore: node %s: %w", addr, err)
			}
		}
	}
	return nil
}

// mutationIDs returns the newest mutation of each table whose command is
// command, as the node lists them (a shard's replicas share the ids).
func mutationIDs(ctx context.Context, conn driver.Conn, database string, tables []string, command string) ([]string, error) {
	ids := make([]string, len(tables))
	for i, table := range tables {
		err := conn.QueryRow(ctx, "SELECT max(mutation_id) FROM system.mutations WHERE database = ? AND table = ? AND command = ?",
			database, table, command).Scan(&ids[i])
		if err != nil {
			return nil, fmt.Errorf("chstore: delete tenant from %s: find its mutation: %w", table, err)
		}
	}
	return ids, nil
}

// waitApplied waits until the replica lists each table's mutation ids[i]
// as done and has no MUTATE_PART left in its replication queue for the
// table (a replica counts a mutation done once the parts it will have are
// mutated, which may be before it has fetched or mutated them itself).
// At most five minutes when ctx has no deadline.
func waitApplied(ctx context.Context, conn driver.Conn, database string, tables, ids []string) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
	}
	for i, table := range tables {
		if ids[i] == "" {
			continue
		}
		for {
			var done, queued uint64
			err := conn.QueryRow(ctx, "SELECT countIf(is_done = 1) FROM system.mutations WHERE database = ? AND table = ? AND mutation_id = ?",
				database, table, ids[i]).Scan(&done)
			if err == nil {
				err = conn.QueryRow(ctx, "SELECT count() FROM system.replication_queue WHERE database = ? AND table = ? AND type = 'MUTATE_PART'",
					database, table).Scan(&queued)
			}
			if err == nil && done == 1 && queued == 0 {
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("chstore: delete tenant from %s: mutation %s not applied (done %d, %d parts queued, %v): %w",
					table, ids[i], done, queued, err, ctx.Err())
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}
