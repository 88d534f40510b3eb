package chstore

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/qtop-dev/qtop/store"
)

var (
	_ store.Retainer     = (*Store)(nil)
	_ store.TenantEraser = (*Store)(nil)
)

type agedTable struct{ table, column string }

// agedTables are the tables retention applies to, with their time
// column; every one is partitioned by its day (toYYYYMMDD). The audit is
// kept.
var agedTables = []agedTable{
	{TableRollups, "minute"},
	{TableHotKeys, "minute"},
	{TableStatements, "time"},
}

// Retain implements store.Retainer on every server: it drops the daily
// partitions whose every row is older than before (system.parts gives
// each partition's newest minute). Rows of the day that straddles before
// stay until the whole day is older; on servers with a TTL (19.6 and
// later, with WithRetention) merges remove them sooner. On a cluster it
// runs on one replica of each shard (replicated tables: a dropped
// partition replicates, and Retain returns once every replica has dropped
// it) or on every node, not ON CLUSTER, as DeleteTenant does. Dropping a partition is a metadata change: writes and reads go on
// meanwhile.
func (s *Store) Retain(ctx context.Context, before time.Time) (store.RetainResult, error) {
	if err := s.check(); err != nil {
		return store.RetainResult{}, err
	}
	var res store.RetainResult
	sc := s.schema
	day := before.UTC().Truncate(24 * time.Hour)
	straddled := false   // a node dropped rollups of before's own day
	var dropped []string // the tables a partition was dropped from, on the node run last ran on
	run := func(conn driver.Conn) error {
		dropped = dropped[:0]
		for _, t := range agedTables {
			days, err := dropOldPartitions(ctx, conn, sc.Database, t.table, before, &res)
			if err != nil {
				return err
			}
			if len(days) > 0 {
				dropped = append(dropped, t.table)
			}
			straddled = straddled || t.table == TableRollups && slices.Contains(days, dayNumber(day))
		}
		// The sums of the days wholly before before's day: their rollups
		// are gone on every node. Not counted in res.
		days, err := dropOldPartitions(ctx, conn, sc.Database, TableSums, day, &store.RetainResult{})
		if len(days) > 0 {
			dropped = append(dropped, TableSums)
		}
		return err
	}
	var err error
	switch {
	case !sc.sharded():
		err = run(s.conn)
	case sc.replicated():
		err = onShardsApplied(ctx, s, "retain", func(conn driver.Conn) (appliedFunc, error) {
			if err := run(conn); err != nil {
				return nil, err
			}
			return logApplied(ctx, conn, sc.Database, slices.Clone(dropped))
		})
	default:
		err = s.nodes(ctx, false, run)
	}
	if err != nil || !straddled {
		return res, err
	}
	// Rollups of before's day, before it, were dropped on some node: its
	// hours until before are summed again from what is left.
	var hours []time.Time
	for h := day; h.Before(before); h = h.Add(time.Hour) {
		hours = append(hours, h)
	}
	if err := markHours(ctx, s, hours); err != nil {
		return res, fmt.Errorf("chstore: retain: %w", err)
	}
	return res, nil
}

// logApplied reads where the replicated tables' logs end on the replica
// that dropped their partitions, and returns what another replica has
// left to do before it has dropped them too: pull the log past that end
// and run its queued DROP_RANGE entries.
func logApplied(ctx context.Context, conn driver.Conn, database string, tables []string) (appliedFunc, error) {
	ends := make([]uint64, len(tables))
	for i, table := range tables {
		err := conn.QueryRow(ctx, "SELECT log_max_index FROM system.replicas WHERE database = ? AND table = ?", database, table).Scan(&ends[i])
		if err != nil {
			return nil, fmt.Errorf("chstore: retain %s: read its replication log: %w", table, err)
		}
	}
	return func(ctx context.Context, conn driver.Conn) (string, error) {
		for i, table := range tables {
			var pointer uint64
			err := conn.QueryRow(ctx, "SELECT log_pointer FROM system.replicas WHERE database = ? AND table = ?", database, table).Scan(&pointer)
			if err != nil {
				return "", err
			}
			queued, err := queuedOf(ctx, conn, database, table, "DROP_RANGE")
			if err != nil {
				return "", err
			}
			if pointer <= ends[i] || queued != 0 {
				return fmt.Sprintf("%s: log pulled to %d of %d, %d partition drops queued", table, pointer, ends[i]+1, queued), nil
			}
		}
		return "", nil
	}, nil
}

// dayNumber is a day as its partition's name, YYYYMMDD.
func dayNumber(t time.Time) uint64 {
	y, m, d := t.Date()
	return uint64(y*10000 + int(m)*100 + d)
}

// dropOldPartitions drops, on one node, the table's partitions whose
// newest row is older than before, adding what it dropped to res. Only
// qtop's day partitions (YYYYMMDD) with a time range are considered. It
// returns the days it dropped.
func dropOldPartitions(ctx context.Context, conn driver.Conn, database, table string, before time.Time, res *store.RetainResult) ([]uint64, error) {
	rows, err := conn.Query(ctx, OldPartitionsSQL(database, table, before))
	if err != nil {
		return nil, fmt.Errorf("chstore: retain %s: list partitions: %w", table, err)
	}
	type part struct {
		day  uint64
		rows uint64
	}
	var parts []part
	for rows.Next() {
		var p string
		var n uint64
		if err := rows.Scan(&p, &n); err != nil {
			rows.Close()
			return nil, fmt.Errorf("chstore: retain %s: %w", table, err)
		}
		day, err := strconv.ParseUint(p, 10, 32)
		if err != nil {
			continue // not a day: not a partition of qtop's schema
		}
		parts = append(parts, part{day, n})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("chstore: retain %s: %w", table, err)
	}
	var days []uint64
	for _, p := range parts {
		q := fmt.Sprintf("ALTER TABLE %s.%s DROP PARTITION %d", database, table, p.day)
		if err := conn.Exec(ctx, q); err != nil {
			return days, fmt.Errorf("chstore: retain %s: drop partition %d: %w", table, p.day, err)
		}
		res.Partitions++
		res.Rows += p.rows
		days = append(days, p.day)
	}
	return days, nil
}

// OldPartitionsSQL renders the query Retain runs on each node: the
// table's day partitions (YYYYMMDD) whose every row is older than before
// (system.parts' max_time, there on 18.16), with their rows.
func OldPartitionsSQL(database, table string, before time.Time) string {
	return fmt.Sprintf(`SELECT partition, sum(rows) FROM system.parts
WHERE database = %s AND table = %s AND active AND toUInt32OrZero(partition) > 0
GROUP BY partition
HAVING toUInt32(min(min_time)) > 0 AND max(max_time) < toDateTime(%d)
ORDER BY partition`, quoteString(database), quoteString(table), clampUnix(before))
}

// EraseTenant implements store.TenantEraser: it counts the tenant's rows
// (every stored version of a rollup counts) and erases them with
// DeleteTenant.
func (s *Store) EraseTenant(ctx context.Context, tenantName string) (store.Erased, error) {
	if err := s.check(); err != nil {
		return store.Erased{}, err
	}
	var e store.Erased
	for i, n := range []*uint64{&e.Rollups, &e.HotKeys, &e.Statements} {
		table := TenantTables[i]
		err := s.conn.QueryRow(ctx, fmt.Sprintf("SELECT count() FROM %s WHERE tenant = ?", s.schema.target(table)), tenantName).Scan(n)
		if err != nil {
			return store.Erased{}, fmt.Errorf("chstore: erase tenant: count %s: %w", table, err)
		}
	}
	if err := s.DeleteTenant(ctx, tenantName); err != nil {
		return store.Erased{}, err
	}
	return e, nil
}

// ModifyTTLSQL renders the statement that sets a local table's TTL to the
// schema's Retention (servers from 19.6), without ON CLUSTER: syncTTL
// runs it on each node or shard itself.
func (s Schema) ModifyTTLSQL(table, column string) string {
	return fmt.Sprintf("ALTER TABLE %s.%s MODIFY TTL %s + INTERVAL %d SECOND", s.Database, table, column, int64(s.Retention/time.Second))
}

// ttlSeconds finds the TTL qtop renders in a table's engine_full, as the
// server prints it back ("TTL minute + toIntervalSecond(7776000)").
var ttlSeconds = regexp.MustCompile(`TTL\s+\w+\s*\+\s*toIntervalSecond\((\d+)\)`)

// syncTTL makes the TTL of the tables that exist follow the retention
// asked for (CREATE TABLE IF NOT EXISTS leaves an existing table's TTL as
// it was): ALTER TABLE … MODIFY TTL where it differs. Without a retention
// an existing TTL is kept and a warning says how to remove it.
func syncTTL(ctx context.Context, s *Store) error {
	sc := s.schema
	if !sc.features().TTL {
		return nil
	}
	run := func(conn driver.Conn) error {
		for _, t := range append(slices.Clip(agedTables), agedTable{TableSums, "hour"}) {
			var engine string
			err := conn.QueryRow(ctx, "SELECT engine_full FROM system.tables WHERE database = ? AND name = ?", sc.Database, t.table).Scan(&engine)
			if err != nil {
				return fmt.Errorf("chstore: read the TTL of %s: %w", t.table, err)
			}
			var have int64
			if m := ttlSeconds.FindStringSubmatch(engine); m != nil {
				have, _ = strconv.ParseInt(m[1], 10, 64)
			}
			want := int64(sc.Retention / time.Second)
			switch {
			case have == want:
			case want == 0:
				s.cfg.log.Warn("chstore: the table has a TTL and no retention was asked; it is kept",
					"table", sc.Database+"."+t.table, "ttl_seconds", have, "remove_with", "ALTER TABLE "+sc.Database+"."+t.table+" REMOVE TTL")
			default:
				if err := conn.Exec(ctx, sc.ModifyTTLSQL(t.table, t.column)); err != nil {
					return fmt.Errorf("chstore: set the TTL of %s: %w", t.table, err)
				}
				s.cfg.log.Info("chstore: TTL changed", "table", sc.Database+"."+t.table, "from_seconds", have, "to_seconds", want)
			}
		}
		return nil
	}
	if !sc.sharded() {
		return run(s.conn)
	}
	return s.nodes(ctx, sc.replicated(), run)
}
