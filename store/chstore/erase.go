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
// mutation is waited for on each node that ran it, and its shard's other
// replica applies it when it replicates. On a cluster it runs on one
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
	if !sc.sharded() {
		err = run(s.conn)
	} else {
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
