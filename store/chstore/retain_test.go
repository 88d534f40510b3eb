package chstore

import (
	"context"
	"fmt"
	"slices"
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

// TestLiveClusterEraseWaitsForReplicas: on ClickHouse 18.16 the erasure
// is a mutation run on each shard's first replica; EraseTenant returns only
// once the shard's other replica has applied it too. The build before
// returned while that replica still held the tenant's rows, and a
// Distributed read that picked it read the erased tenant.
func TestLiveClusterEraseWaitsForReplicas(t *testing.T) {
	c := newLiveCluster(t)
	s := c.open(t)
	if s.schema.features().LightweightDelete {
		t.Skip("a lightweight DELETE waits for every replica itself (mutations_sync 2)")
	}
	storetest.WriteAged(t, s)
	c.waitsForSecondReplicas(t, func() error {
		_, err := s.EraseTenant(context.Background(), "acme")
		return err
	})
	c.noRowsOnAnyNode(t, "tenant = 'acme'")
}

// TestLiveClusterRetainWaitsForReplicas: Retain drops partitions on each
// shard's first replica and returns once the other replica has dropped
// them too; the build before returned at once.
func TestLiveClusterRetainWaitsForReplicas(t *testing.T) {
	c := newLiveCluster(t)
	s := c.open(t)
	storetest.WriteAged(t, s)
	c.waitsForSecondReplicas(t, func() error {
		_, err := s.Retain(context.Background(), storetest.RetainBefore)
		return err
	})
	day := storetest.RetainBefore.Truncate(24 * time.Hour).Unix()
	c.noRowsOnAnyNode(t, fmt.Sprintf("minute < toDateTime(%d)", day))
}

// waitsForSecondReplicas makes each shard's first replica (the one the
// store changes) the leader, stops the replication queues of the second,
// runs change, and checks that it does not return while
// they are stopped; then it starts them and wants change to succeed. The
// two seconds only bound how long the test looks for an early return; a
// correct build passes however long the change takes.
func (c liveCluster) waitsForSecondReplicas(t *testing.T, change func() error) {
	t.Helper()
	tables := append(slices.Clip(TenantTables), TableSums)
	for _, table := range tables {
		c.syncReplicas(t, table)
	}
	queues := func(i int, verb string) {
		for _, table := range tables {
			if err := c.node(t, i).Exec(context.Background(), "SYSTEM "+verb+" REPLICATION QUEUES "+c.db+"."+table); err != nil {
				t.Fatalf("%s queues on %s: %v", verb, c.addrs[i], err)
			}
		}
	}
	second := []int{1, 3} // each shard's second replica (scripts/services' layout)
	for _, i := range second {
		c.leadFrom(t, i-1, i, tables)
	}
	for _, i := range second {
		queues(i, "STOP")
		t.Cleanup(func() { queues(i, "START") })
	}
	done := make(chan error, 1)
	go func() { done <- change() }()
	select {
	case err := <-done:
		t.Fatalf("the change returned (%v) while the second replicas' queues were stopped", err)
	case <-time.After(2 * time.Second):
	}
	for _, i := range second {
		queues(i, "START")
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// leadFrom makes node first the leader of the tables' replicas, restarting
// node second's replicas where it leads. ClickHouse 18.16 sends a DROP
// PARTITION to the leader and waits for the leader to run it, so a change
// made on a replica that does not lead waits for the leader anyway.
func (c liveCluster) leadFrom(t *testing.T, first, second int, tables []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	leads := func(i int, table string) bool {
		var leader uint8
		q := "SELECT is_leader FROM system.replicas WHERE database = ? AND table = ?"
		if err := c.node(t, i).QueryRow(ctx, q, c.db, table).Scan(&leader); err != nil {
			t.Fatal(err)
		}
		return leader == 1
	}
	for _, table := range tables {
		if leads(first, table) {
			continue
		}
		if err := c.node(t, second).Exec(ctx, "SYSTEM RESTART REPLICA "+c.db+"."+table); err != nil {
			t.Fatalf("restart replica %s on %s: %v", table, c.addrs[second], err)
		}
		for !leads(first, table) {
			select {
			case <-ctx.Done():
				t.Fatalf("%s on %s did not become the leader", table, c.addrs[first])
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}

// noRowsOnAnyNode wants no row matching where in the rollups and hot keys
// stored on any node.
func (c liveCluster) noRowsOnAnyNode(t *testing.T, where string) {
	t.Helper()
	for i := range c.addrs {
		for _, table := range []string{TableRollups, TableHotKeys} {
			var n uint64
			q := "SELECT count() FROM " + c.db + "." + table + " WHERE " + where
			if err := c.node(t, i).QueryRow(context.Background(), q).Scan(&n); err != nil || n != 0 {
				t.Errorf("node %s: %d rows of %s where %s after the change (%v)", c.addrs[i], n, table, where, err)
			}
		}
	}
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

// TestModernEngineRetention runs, on the modern engine (chdb), the schema
// with a TTL, the TTL change syncTTL makes, and Retain's partition query
// and drop: the server prints the TTL back in the form syncTTL reads, the
// change takes, and the query finds exactly the old day.
func TestModernEngineRetention(t *testing.T) {
	run := modernEngine(t)
	modern := parseVersion(t, strings.TrimSpace(string(run("version"))))
	db := "qtop_retention"
	sc := Schema{Database: db, Version: modern, Retention: 90 * 24 * time.Hour}
	later := sc
	later.Retention = 30 * 24 * time.Hour
	now := time.Now().UTC()
	var steps []map[string]string
	add := func(name, sql string) { steps = append(steps, map[string]string{"name": name, "sql": sql}) }
	for _, q := range sc.statements() {
		add("", q)
	}
	add("engine_before", "SELECT engine_full FROM system.tables WHERE database = '"+db+"' AND name = 'rollups'")
	for _, a := range agedTables {
		add("", later.ModifyTTLSQL(a.table, a.column))
	}
	add("engine_after", "SELECT engine_full FROM system.tables WHERE database = '"+db+"' AND name = 'rollups'")
	for _, days := range []int{10, 9, 0} {
		add("", fmt.Sprintf("INSERT INTO %s.rollups (minute, writer, version, service, tenant, route, tier, kind, count, errors, duration_seconds, ru, bytes, rows) VALUES (toDateTime(%d), 'w', 1, 'api', 'acme', '/', 2, 'request', 1, 0, 0, 0, 0, 0)",
			db, now.Add(-time.Duration(days)*24*time.Hour).Unix()))
	}
	add("old", OldPartitionsSQL(db, TableRollups, now.Add(-5*24*time.Hour)))
	add("", fmt.Sprintf("ALTER TABLE %s.rollups DROP PARTITION %s", db, now.Add(-10*24*time.Hour).Format("20060102")))
	add("left", "SELECT count() FROM "+db+".rollups")
	got := runModern(t, run, steps)

	ttl := func(name string) string {
		if len(got[name]) != 1 {
			t.Fatalf("%s: %v", name, got[name])
		}
		m := ttlSeconds.FindStringSubmatch(fmt.Sprint(got[name][0][0]))
		if m == nil {
			t.Fatalf("no TTL that syncTTL reads in %v's engine_full: %v", modern, got[name][0][0])
		}
		return m[1]
	}
	if b, a := ttl("engine_before"), ttl("engine_after"); b != "7776000" || a != "2592000" {
		t.Errorf("TTL seconds %s then %s, want 7776000 then 2592000", b, a)
	}
	old := got["old"]
	if len(old) != 2 || fmt.Sprint(old[0][0]) != now.Add(-10*24*time.Hour).Format("20060102") || fmt.Sprint(old[1][0]) != now.Add(-9*24*time.Hour).Format("20060102") {
		t.Errorf("old partitions %v, want the days 10 and 9 days ago", old)
	}
	if n := got["left"]; len(n) != 1 || fmt.Sprint(n[0][0]) != "2" {
		t.Errorf("rows after dropping one day: %v, want 2", n)
	}
	t.Logf("modern engine %v: TTL set, changed and read back; old partitions found and dropped", modern)
}
