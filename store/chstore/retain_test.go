package chstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/store/storetest"
)

// chMinutes reads the distinct minutes of a table's rows through conn
// (the Distributed table on a cluster), after sync.
func chMinutes(t *testing.T, conn driver.Conn, sc Schema, sync func(table string)) storetest.Minutes {
	return func(table, tenantName string) []time.Time {
		t.Helper()
		if sync != nil {
			sync(table)
		}
		col := "minute"
		if table == TableStatements {
			col = "toStartOfMinute(time)"
		}
		rows, err := conn.Query(context.Background(), "SELECT DISTINCT "+col+" AS m FROM "+sc.target(table)+
			" WHERE tenant = ? OR ? = '' ORDER BY m", tenantName, tenantName)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []time.Time
		for rows.Next() {
			var m time.Time
			if err := rows.Scan(&m); err != nil {
				t.Fatal(err)
			}
			out = append(out, m.UTC())
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
}

// TestRetainDropsOldPartitions: on ClickHouse 18.16 (no TTL) Retain drops
// the daily partitions whose every row is older than the point asked, in
// every table but the audit; the day that straddles it stays whole.
func TestRetainDropsOldPartitions(t *testing.T) {
	s, _, _ := openTest(t, WithRetention(24*time.Hour))
	if s.schema.features().TTL {
		t.Fatalf("server %v has TTL; this test is for servers without", s.schema.Version)
	}
	storetest.WriteAged(t, s)
	// 2 whole days × 2 tenants × 3 tables; one partition per table and day.
	got := storetest.CheckRetain(t, s, chMinutes(t, s.conn, s.schema, nil), true, 12)
	if got.Partitions != 6 {
		t.Errorf("dropped %d partitions, want 6 (3 tables × 2 days)", got.Partitions)
	}
}

func TestEraseTenant(t *testing.T) {
	s, _, _ := openTest(t)
	storetest.WriteAged(t, s)
	storetest.CheckErase(t, s, chMinutes(t, s.conn, s.schema, nil))
}

// TestLiveClusterRetainAndErase: on the replicated 2×2 cluster, Retain
// drops old partitions on one replica of each shard and the other
// replica follows; EraseTenant erases on every shard.
func TestLiveClusterRetainAndErase(t *testing.T) {
	c := newLiveCluster(t)
	s := c.open(t)
	storetest.WriteAged(t, s)
	sync := func(table string) { c.syncReplicas(t, table) }
	storetest.CheckRetain(t, s, chMinutes(t, s.conn, s.schema, sync), true, 12)
	for i := range c.addrs {
		for _, table := range TenantTables {
			var n uint64
			q := "SELECT count() FROM " + c.db + "." + table + " WHERE " + map[bool]string{true: "time", false: "minute"}[table == TableStatements] + " < toDateTime(?)"
			if err := c.node(t, i).QueryRow(context.Background(), q, storetest.AgedMinutes[2].Unix()).Scan(&n); err != nil || n != 0 {
				t.Errorf("node %s: %d rows of %s in dropped days (%v)", c.addrs[i], n, table, err)
			}
		}
	}

	c2 := newLiveCluster(t)
	s2 := c2.open(t)
	storetest.WriteAged(t, s2)
	storetest.CheckErase(t, s2, chMinutes(t, s2.conn, s2.schema, func(table string) { c2.syncReplicas(t, table) }))
}

func TestModifyTTLSQL(t *testing.T) {
	sc := Schema{Database: "q", Version: Version{24, 8}, Retention: 90 * 24 * time.Hour}
	if got, want := sc.ModifyTTLSQL(TableRollups, "minute"), "ALTER TABLE q.rollups MODIFY TTL minute + INTERVAL 7776000 SECOND"; got != want {
		t.Errorf("ModifyTTLSQL = %q, want %q", got, want)
	}
	// What servers print back in system.tables.engine_full.
	engine := "ReplacingMergeTree(version) PARTITION BY toYYYYMMDD(minute) ORDER BY (tenant, minute) TTL minute + toIntervalSecond(7776000) SETTINGS index_granularity = 8192"
	if m := ttlSeconds.FindStringSubmatch(engine); m == nil || m[1] != "7776000" {
		t.Errorf("TTL not found in %q: %v", engine, m)
	}
	if m := ttlSeconds.FindStringSubmatch(strings.Replace(engine, "TTL minute + toIntervalSecond(7776000) ", "", 1)); m != nil {
		t.Errorf("TTL found where there is none: %v", m)
	}
}

// TestReadAuditExactRange: a change made within the second before to is
// read (erase records are read back at once), one at to is not.
func TestReadAuditExactRange(t *testing.T) {
	s, _, _ := openTest(t)
	at := storetest.T0.Add(500 * time.Millisecond)
	if err := s.WriteAudit(context.Background(), []store.Audit{{Time: at, Who: "w", Action: "erase", Rule: "{}"}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		from, to time.Time
		want     int
	}{
		{at, at.Add(time.Nanosecond), 1},
		{at.Add(-time.Hour), at.Add(100 * time.Millisecond), 1},
		{at.Add(-time.Hour), at, 0},
		{at.Add(time.Nanosecond), at.Add(time.Hour), 0},
	} {
		got, err := s.ReadAudit(context.Background(), c.from, c.to)
		if err != nil || len(got) != c.want {
			t.Errorf("ReadAudit(%v, %v) = %d rows (%v), want %d", c.from, c.to, len(got), err, c.want)
		}
	}
}
