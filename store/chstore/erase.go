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
	ctx, cancel := boundWait(ctx)
	defer cancel()
	return waitApplied(ctx, conn, "delete tenant from "+table, func(ctx context.Context, conn driver.Conn) (string, error) {
		var n uint64
		err := conn.QueryRow(ctx, "SELECT count() FROM system.mutations WHERE database = ? AND table = ? AND is_done = 0",
			database, table).Scan(&n)
		if err != nil || n == 0 {
			return "", err
		}
		return fmt.Sprintf("%d mutations pending", n), nil
	})
}

// deleteReplicated runs the old server's mutations (run) on the first
// answering replica of each shard and returns once every replica of the
// shard has applied them (onShardsApplied): before, a Distributed read
// that picked a replica still replicating a mutation read the erased
// tenant.
func deleteReplicated(ctx context.Context, s *Store, tenantName string, run func(driver.Conn) error) error {
	tables := append(slices.Clip(TenantTables), TableSums)
	command := "DELETE WHERE tenant = " + quoteString(tenantName)
	return onShardsApplied(ctx, s, "delete tenant", func(conn driver.Conn) (appliedFunc, error) {
		if err := run(conn); err != nil {
			return nil, err
		}
		ids, err := mutationIDs(ctx, conn, s.schema.Database, tables, command)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, conn driver.Conn) (string, error) {
			return mutationsApplied(ctx, conn, s.schema.Database, tables, ids)
		}, nil
	})
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

// mutationsApplied says what is left before the replica has applied each
// table's mutation ids[i]: it lists the mutation as done and has no
// MUTATE_PART queued for the table (a replica counts a mutation done once
// the parts it will have are mutated, which may be before it has fetched
// or mutated them). Empty when nothing is left.
func mutationsApplied(ctx context.Context, conn driver.Conn, database string, tables, ids []string) (string, error) {
	for i, table := range tables {
		if ids[i] == "" {
			continue
		}
		var done, queued uint64
		err := conn.QueryRow(ctx, "SELECT countIf(is_done = 1) FROM system.mutations WHERE database = ? AND table = ? AND mutation_id = ?",
			database, table, ids[i]).Scan(&done)
		if err == nil {
			queued, err = queuedOf(ctx, conn, database, table, "MUTATE_PART")
		}
		if err != nil {
			return "", err
		}
		if done != 1 || queued != 0 {
			return fmt.Sprintf("%s: mutation %s done %d, %d parts queued", table, ids[i], done, queued), nil
		}
	}
	return "", nil
}
