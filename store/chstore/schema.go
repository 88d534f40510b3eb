package chstore

import (
	"fmt"
	"strings"
	"time"

	"github.com/qtop-dev/qtop/store"
)

// Version is a ClickHouse server version, as far as the schema cares.
type Version struct{ Major, Minor int }

func (v Version) String() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

func (v Version) atLeast(major, minor int) bool {
	return v.Major > major || v.Major == major && v.Minor >= minor
}

// Features are what the store uses beyond ClickHouse 18.16.
type Features struct {
	LowCardinality bool // LowCardinality(String), 19.3
	Codecs         bool // CODEC(DoubleDelta|T64|Gorilla|ZSTD), all there from 19.11
	TTL            bool // table TTL, 19.6
	AddColumnIfNot bool // ALTER … ADD COLUMN IF NOT EXISTS
	AsyncInsert    bool // async_insert and wait_for_async_insert, 21.11
	// ReplicatedDatabase is the Replicated database engine (DDL replicated
	// by the database itself); qtop takes it from 23.1, where it is still
	// experimental (Open sends allow_experimental_database_replicated
	// before 24.4, which enables it by default).
	ReplicatedDatabase bool
	// LightweightDelete is DELETE FROM … WHERE (rows masked at once,
	// removed by merges) with mutations_sync, generally available from 23.3;
	// older servers erase with an ALTER TABLE … DELETE mutation.
	LightweightDelete bool
	// ForegroundInsertName is distributed_foreground_insert, 23.10; older
	// servers call the setting insert_distributed_sync (newer ones keep
	// that name as an alias).
	ForegroundInsertName bool
}

// FeaturesOf returns what a server of version v supports.
func FeaturesOf(v Version) Features {
	return Features{
		LowCardinality:       v.atLeast(19, 3),
		Codecs:               v.atLeast(19, 11),
		TTL:                  v.atLeast(19, 6),
		AddColumnIfNot:       v.atLeast(20, 1),
		AsyncInsert:          v.atLeast(21, 11),
		ReplicatedDatabase:   v.atLeast(23, 1),
		LightweightDelete:    v.atLeast(23, 3),
		ForegroundInsertName: v.atLeast(23, 10),
	}
}

// Mode is how the ClickHouse deployment is run, which decides who
// replicates the DDL and the data.
type Mode string

// Modes. WithMode picks one; by default Open detects it.
const (
	// ModeAuto (Open only) detects the mode: cloud where the server has
	// SharedMergeTree, replicated-database where the database already is
	// one, explicit otherwise.
	ModeAuto Mode = ""
	// ModeExplicit is a single server, or with a cluster qtop's own
	// choreography: ON CLUSTER DDL, Replicated… engines with ZooKeeper
	// paths, …_dist Distributed tables. Works from 18.16.
	ModeExplicit Mode = "explicit"
	// ModeReplicatedDatabase creates the database with ENGINE =
	// Replicated (ON CLUSTER, once): the database replicates every later
	// DDL statement to all its replicas, tables take Replicated… engines
	// without arguments (their ZooKeeper path is the database's default,
	// unique per table), and …_dist tables use the database's own cluster.
	// Needs 23.1 or later and ZooKeeper or Keeper.
	ModeReplicatedDatabase Mode = "replicated-database"
	// ModeCloud renders engines without arguments and no ON CLUSTER or
	// Distributed tables: ClickHouse Cloud makes every MergeTree a
	// SharedMergeTree on shared storage and replicates DDL itself.
	ModeCloud Mode = "cloud"
)

// ParseMode reads a mode's name ("" is ModeAuto).
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeAuto, ModeExplicit, ModeReplicatedDatabase, ModeCloud:
		return m, nil
	}
	return "", fmt.Errorf("%w: mode %q: want explicit, replicated-database or cloud", ErrConfig, s)
}

// Schema renders the store's DDL for one server version and layout.
type Schema struct {
	Database string
	Version  Version
	// Cluster, when set, renders sharded tables: the local tables plus a
	// …_dist Distributed table over them sharded by tenant (hot keys by key).
	Cluster string
	// Replicated renders Replicated… engines (needs ZooKeeper or Keeper and
	// the {shard} and {replica} macros on every node).
	Replicated bool
	// NodeLocal leaves out ON CLUSTER: each node's tables are created by a
	// collector connected to it (clusters without distributed DDL).
	NodeLocal bool
	// Retention adds a TTL on the minute (servers from 19.6; 0 keeps all).
	Retention time.Duration
	// Mode is how the deployment is run; "" renders ModeExplicit.
	Mode Mode
	// UUIDPaths puts {uuid} in the ZooKeeper path of the explicit
	// layout's Replicated… engines: unique per table incarnation, so a
	// dropped and re-created table never meets its old replicas (Atomic
	// databases, the default from 20.10, free a dropped table's path only
	// after a delay). Open sets it where the database is Atomic.
	UUIDPaths bool
	// Incarnation, where UUIDPaths cannot be used (Ordinary databases, as
	// on 18.16), is appended to the ZooKeeper path of the explicit
	// layout's Replicated… engines, for the same reason: Open sets it to a
	// new value each time (the time it renders the schema). CREATE TABLE
	// IF NOT EXISTS … ON CLUSTER runs in one order on every node, so the
	// replicas of a table all take the incarnation of whichever collector
	// created it first, and the tables that exist keep theirs.
	Incarnation string
}

// Table names. With a cluster, reads and writes go to Table+DistSuffix.
const (
	TableRollups    = "rollups"
	TableHotKeys    = "hot_keys"
	TableStatements = "statements"
	TableAudit      = "audit"
	// TableSums holds the sums of closed hours (sums.go): per hour and per
	// minute, by tenant and route, each computation tagged with a
	// generation, and the marks that say which generation of an hour is
	// complete and when rollups were last written into it.
	TableSums       = "rollups_sums"
	TableMigrations = "schema_migrations"
	DistSuffix      = "_dist"
)

// Step is one statement of a migration. A step that adds a column names it,
// so it is skipped where the column exists (18.16 has no ADD COLUMN IF NOT
// EXISTS, and a collector may die between a step and recording the version).
type Step struct {
	SQL       string
	AddColumn *Column // table and column this step adds, or nil
	// EveryNode runs SQL on each node of the cluster in turn, without ON
	// CLUSTER: ClickHouse refuses ALTER … ON CLUSTER of a table that is
	// not replicated (the Distributed tables) on a cluster whose shards
	// are, as it would run it on one replica of each shard only.
	EveryNode bool
	// EveryShard runs SQL without ON CLUSTER on one replica of each shard
	// in turn, and waits until every replica has the column: a Replicated
	// table passes an ALTER on to its other replicas itself, and on 18.16
	// an ALTER … ON CLUSTER of a replicated table can stop a node's DDL
	// worker for good ("Node exists" on the shard's executed marker, when
	// both replicas take the task at once), after which every ON CLUSTER
	// statement waits for its timeout.
	EveryShard bool
}

// Column names a column for Step.AddColumn.
type Column struct{ Table, Name string }

// Migration is one numbered schema change.
type Migration struct {
	Version int
	Name    string
	Steps   []Step
}

// mode is the rendered mode (ModeExplicit for "").
func (s Schema) mode() Mode {
	if s.Mode == ModeAuto {
		return ModeExplicit
	}
	return s.Mode
}

// sharded reports whether the layout has …_dist Distributed tables.
func (s Schema) sharded() bool {
	switch s.mode() {
	case ModeReplicatedDatabase:
		return true
	case ModeCloud:
		return false
	}
	return s.Cluster != ""
}

// distCluster is the cluster the Distributed tables spread over: the
// Replicated database's own cluster (named after it) in that mode.
func (s Schema) distCluster() string {
	if s.mode() == ModeReplicatedDatabase {
		return s.Database
	}
	return s.Cluster
}

// replicated reports whether the tables have Replicated… engines.
func (s Schema) replicated() bool {
	switch s.mode() {
	case ModeReplicatedDatabase:
		return true
	case ModeCloud:
		return false
	}
	return s.Cluster != "" && s.Replicated
}

// target is the table reads and writes use.
func (s Schema) target(table string) string {
	if s.sharded() {
		return s.Database + "." + table + DistSuffix
	}
	return s.Database + "." + table
}

// onCluster is the ON CLUSTER clause of the explicit layout's DDL.
func (s Schema) onCluster() string {
	if s.Cluster == "" || s.NodeLocal || s.mode() != ModeExplicit {
		return ""
	}
	return " ON CLUSTER " + s.Cluster
}

func (s Schema) features() Features { return FeaturesOf(s.Version) }

// lc is a low-cardinality string column where the server has the type.
func (s Schema) lc() string {
	if s.features().LowCardinality {
		return "LowCardinality(String)"
	}
	return "String"
}

// codec returns " CODEC(c)" where the server has codecs.
func (s Schema) codec(c string) string {
	if s.features().Codecs {
		return " CODEC(" + c + ")"
	}
	return ""
}

// engine renders a ReplacingMergeTree, replicated when asked.
func (s Schema) engine(table, version string) string {
	if !s.replicated() {
		return "ReplacingMergeTree(" + version + ")"
	}
	if s.mode() == ModeReplicatedDatabase {
		// No arguments: the database's default path, /clickhouse/tables/{uuid}/{shard}.
		return "ReplicatedReplacingMergeTree(" + version + ")"
	}
	args := "'" + s.ZooKeeperPath(table) + "', '{replica}'"
	if version != "" {
		args += ", " + version
	}
	return "ReplicatedReplacingMergeTree(" + args + ")"
}

// plainEngine renders a MergeTree (rows are never replaced), replicated
// when asked.
func (s Schema) plainEngine(table string) string {
	switch {
	case !s.replicated():
		return "MergeTree()"
	case s.mode() == ModeReplicatedDatabase:
		return "ReplicatedMergeTree()"
	}
	return "ReplicatedMergeTree('" + s.ZooKeeperPath(table) + "', '{replica}')"
}

// ZooKeeperPath is the ZooKeeper path of a table's Replicated… engine in
// the explicit layout: /clickhouse/tables/{uuid}/{shard} with UUIDPaths,
// /clickhouse/tables/{shard}/DB/TABLE otherwise, followed by
// /Incarnation when set.
func (s Schema) ZooKeeperPath(table string) string {
	if s.UUIDPaths {
		return "/clickhouse/tables/{uuid}/{shard}"
	}
	p := fmt.Sprintf("/clickhouse/tables/{shard}/%s/%s", s.Database, table)
	if s.Incarnation != "" {
		p += "/" + s.Incarnation
	}
	return p
}

func (s Schema) ttl(column string) string {
	if s.Retention <= 0 || !s.features().TTL {
		return ""
	}
	return fmt.Sprintf("\nTTL %s + INTERVAL %d SECOND", column, int64(s.Retention/time.Second))
}

// Validate checks names spliced into DDL.
func (s Schema) Validate() error {
	if !validIdent(s.Database) {
		return fmt.Errorf("%w: database %q must be letters, digits and _", ErrConfig, s.Database)
	}
	if s.Cluster != "" && !validIdent(s.Cluster) {
		return fmt.Errorf("%w: cluster %q must be letters, digits and _", ErrConfig, s.Cluster)
	}
	if s.Replicated && s.Cluster == "" && s.mode() == ModeExplicit {
		return fmt.Errorf("%w: replicated tables need a cluster", ErrConfig)
	}
	if s.Incarnation != "" && !validIdent("i"+s.Incarnation) {
		return fmt.Errorf("%w: incarnation %q must be letters, digits and _", ErrConfig, s.Incarnation)
	}
	if _, err := ParseMode(string(s.Mode)); err != nil {
		return err
	}
	switch s.mode() {
	case ModeReplicatedDatabase:
		if s.Cluster == "" || s.NodeLocal {
			return fmt.Errorf("%w: mode %s needs a cluster to create the database on (ON CLUSTER, once) and no node-local DDL", ErrConfig, s.mode())
		}
	case ModeCloud:
		if s.Cluster != "" || s.Replicated || s.NodeLocal {
			return fmt.Errorf("%w: mode %s takes no cluster, replicated engines or node-local DDL (the service replicates itself)", ErrConfig, s.mode())
		}
	}
	if s.Retention < 0 || s.Retention > 0 && s.Retention < time.Hour {
		return fmt.Errorf("%w: retention %v must be 0 (keep all) or at least an hour", ErrConfig, s.Retention)
	}
	return nil
}

// CreateDatabase is run before the migrations.
func (s Schema) CreateDatabase() string {
	if s.mode() == ModeReplicatedDatabase {
		path := "/clickhouse/databases/" + s.Database
		if s.Incarnation != "" {
			path += "/" + s.Incarnation
		}
		return fmt.Sprintf("CREATE DATABASE IF NOT EXISTS %s ON CLUSTER %s ENGINE = Replicated('%s', '{shard}', '{replica}')",
			s.Database, s.Cluster, path)
	}
	return "CREATE DATABASE IF NOT EXISTS " + s.Database + s.onCluster()
}

// CreateMigrations creates the table that records applied migrations. It
// is per node (never distributed): each node records what it has.
func (s Schema) CreateMigrations() string {
	return fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s.%s%s
(
    version UInt32,
    name String,
    applied_at DateTime
)
ENGINE = %s
ORDER BY version`, s.Database, TableMigrations, s.onCluster(), s.engine(TableMigrations, ""))
}

// Migrations returns every migration, oldest first.
func (s Schema) Migrations() []Migration {
	return []Migration{
		{Version: 1, Name: "rollups, hot keys, statements, audit", Steps: s.migration1()},
		{Version: 2, Name: "pg sampler active-session seconds", Steps: s.migration2()},
		{Version: 3, Name: "sums of closed hours", Steps: s.migration3()},
	}
}

func (s Schema) migration1() []Step {
	lc, db, on := s.lc(), s.Database, s.onCluster()
	var steps []Step
	add := func(table, columns, engine, partition, order, ttl, shard string) {
		steps = append(steps, Step{SQL: fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s%s\n(\n%s\n)\nENGINE = %s\nPARTITION BY %s\nORDER BY (%s)%s",
			db, table, on, columns, engine, partition, order, ttl)})
		if s.sharded() {
			steps = append(steps, Step{SQL: fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s%s%s AS %s.%s\nENGINE = Distributed(%s, %s, %s, %s)",
				db, table, DistSuffix, on, db, table, s.distCluster(), db, table, shard)})
		}
	}
	cols := func(lines ...string) string { return "    " + strings.Join(lines, ",\n    ") }

	// Rollups: one row per minute × writer × service × tenant × route × kind;
	// the latest version of a row wins, so a retried or replayed batch
	// replaces itself. Latency histograms are sparse (bucket, count).
	add(TableRollups, cols(
		"minute DateTime"+s.codec("DoubleDelta, LZ4"),
		"writer "+lc,
		"version UInt64"+s.codec("T64, LZ4"),
		"service "+lc,
		"tenant String",
		"route "+lc,
		"tier UInt8",
		"kind "+lc,
		"count UInt64"+s.codec("T64, LZ4"),
		"errors UInt64"+s.codec("T64, LZ4"),
		"duration_seconds Float64"+s.codec("Gorilla, LZ4"),
		"ru Float64"+s.codec("Gorilla, LZ4"),
		"bytes UInt64"+s.codec("T64, LZ4"),
		"rows UInt64"+s.codec("T64, LZ4"),
		"latency_idx Array(UInt16)",
		"latency_cnt Array(UInt64)",
	), s.engine(TableRollups, "version"), "toYYYYMMDD(minute)",
		"tenant, minute, route, kind, service, writer", s.ttl("minute"), "cityHash64(tenant)")

	add(TableHotKeys, cols(
		"minute DateTime"+s.codec("DoubleDelta, LZ4"),
		"writer "+lc,
		"version UInt64",
		"key String",
		"tenant String",
		"count UInt64"+s.codec("T64, LZ4"),
		"err UInt64"+s.codec("T64, LZ4"),
	), s.engine(TableHotKeys, "version"), "toYYYYMMDD(minute)",
		"minute, key, writer", s.ttl("minute"), "cityHash64(key)")

	// Statements and audit rows are replaced by an identical retry too:
	// the sorting key is the whole identity of a sample or a change.
	add(TableStatements, cols(
		"time DateTime",
		"time_ns UInt32",
		"writer "+lc,
		"pid Int32",
		"tenant String",
		"route "+lc,
		"application "+lc,
		"query String"+s.codec("ZSTD(1)"),
		"state "+lc,
		"wait_event_type "+lc,
		"wait_event "+lc,
		"duration_seconds Float64",
	), s.engine(TableStatements, ""), "toYYYYMMDD(time)",
		"time, writer, pid, time_ns", s.ttl("time"), "cityHash64(tenant)")

	add(TableAudit, cols(
		"time DateTime",
		"time_ns UInt32",
		"who String",
		"action String",
		"policy_version UInt64",
		"rule String",
	), s.engine(TableAudit, ""), "toYYYYMM(time)",
		"time, time_ns, who, policy_version, action", "", "cityHash64(who)")
	return steps
}

// migration2 adds the pg sampler's measure: an ALTER, as a schema that
// already holds data would get it.
func (s Schema) migration2() []Step {
	col := "active_session_seconds Float64 DEFAULT 0" + s.codec("Gorilla, LZ4")
	ifNot := ""
	if s.features().AddColumnIfNot {
		ifNot = "IF NOT EXISTS "
	}
	// The explicit layout's replicated ALTER goes to one replica of each
	// shard; a Replicated database passes any ALTER on itself.
	shards := s.mode() == ModeExplicit && s.Cluster != "" && s.Replicated && !s.NodeLocal
	on := s.onCluster()
	if shards {
		on = ""
	}
	steps := []Step{{
		SQL:        fmt.Sprintf("ALTER TABLE %s.%s%s ADD COLUMN %s%s AFTER rows", s.Database, TableRollups, on, ifNot, col),
		AddColumn:  &Column{TableRollups, "active_session_seconds"},
		EveryShard: shards,
	}}
	if s.sharded() {
		every := s.mode() == ModeExplicit && s.Replicated && !s.NodeLocal
		on := s.onCluster()
		if every {
			on = ""
		}
		steps = append(steps, Step{
			SQL:       fmt.Sprintf("ALTER TABLE %s.%s%s%s ADD COLUMN %sactive_session_seconds Float64 DEFAULT 0 AFTER rows", s.Database, TableRollups, DistSuffix, on, ifNot),
			AddColumn: &Column{TableRollups + DistSuffix, "active_session_seconds"},
			EveryNode: every,
		})
	}
	return steps
}

// migration3 adds the sums of closed hours (sums.go): a plain MergeTree,
// so reads need no FINAL; sharded by hour, so an hour's sums, its marks
// and its generations sit on one shard and a computation's rows and its
// "summed" mark go in one part. Every hour that already holds rollups is
// marked written (at generation 1), so the store sums an upgraded
// database's history too. On a node-local cluster each node marks the
// hours of its own rows.
func (s Schema) migration3() []Step {
	db, on := s.Database, s.onCluster()
	cols := strings.Join([]string{
		"kind UInt8",
		"hour DateTime",
		"gen UInt64",
		"minute DateTime",
		"tenant String",
		"route " + s.lc(),
		"requests UInt64",
		"errors UInt64",
		"duration_seconds Float64",
		"db_seconds Float64",
		"ru Float64",
		"bytes UInt64",
	}, ",\n    ")
	steps := []Step{{SQL: fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s%s\n(\n    %s\n)\nENGINE = %s\nPARTITION BY toYYYYMMDD(hour)\nORDER BY (kind, hour, gen, minute, tenant, route)%s",
		db, TableSums, on, cols, s.plainEngine(TableSums), s.ttl("hour"))}}
	if s.sharded() {
		steps = append(steps, Step{SQL: fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s%s%s AS %s.%s\nENGINE = Distributed(%s, %s, %s, cityHash64(hour))",
			db, TableSums, DistSuffix, on, db, TableSums, s.distCluster(), db, TableSums)})
	}
	from := s.target(TableRollups)
	if s.NodeLocal {
		from = db + "." + TableRollups
	}
	steps = append(steps, Step{SQL: fmt.Sprintf("INSERT INTO %s (kind, hour, gen)\nSELECT DISTINCT %d, toStartOfHour(minute), 1 FROM %s",
		s.target(TableSums), sumWritten, from)})
	return steps
}

// DDL renders every statement Open may run, in order, for golden tests and
// for operators who create the schema by hand.
func (s Schema) DDL() string {
	var b strings.Builder
	b.WriteString(s.CreateDatabase() + ";\n\n" + s.CreateMigrations() + ";\n")
	for _, m := range s.Migrations() {
		fmt.Fprintf(&b, "\n-- migration %d: %s\n", m.Version, m.Name)
		for _, st := range m.Steps {
			b.WriteString(st.SQL + ";")
			if st.EveryNode {
				b.WriteString(" -- on every node of the cluster, one by one")
			}
			if st.EveryShard {
				b.WriteString(" -- on one replica of each shard, one by one (replication does the rest)")
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

func validIdent(s string) bool { return store.ValidIdent(s) }
