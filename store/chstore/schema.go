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

// Features are what the schema uses beyond ClickHouse 18.16.
type Features struct {
	LowCardinality bool // LowCardinality(String), 19.3
	Codecs         bool // CODEC(DoubleDelta|T64|Gorilla|ZSTD), all there from 19.11
	TTL            bool // table TTL, 19.6
	AddColumnIfNot bool // ALTER … ADD COLUMN IF NOT EXISTS
}

// FeaturesOf returns what a server of version v supports.
func FeaturesOf(v Version) Features {
	return Features{
		LowCardinality: v.atLeast(19, 3),
		Codecs:         v.atLeast(19, 11),
		TTL:            v.atLeast(19, 6),
		AddColumnIfNot: v.atLeast(20, 1),
	}
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
}

// Table names. With a cluster, reads and writes go to Table+DistSuffix.
const (
	TableRollups    = "rollups"
	TableHotKeys    = "hot_keys"
	TableStatements = "statements"
	TableAudit      = "audit"
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

// target is the table reads and writes use.
func (s Schema) target(table string) string {
	if s.Cluster != "" {
		return s.Database + "." + table + DistSuffix
	}
	return s.Database + "." + table
}

func (s Schema) onCluster() string {
	if s.Cluster == "" || s.NodeLocal {
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
	if s.Cluster != "" && s.Replicated {
		args := fmt.Sprintf("'/clickhouse/tables/{shard}/%s/%s', '{replica}'", s.Database, table)
		if version != "" {
			args += ", " + version
		}
		return "ReplicatedReplacingMergeTree(" + args + ")"
	}
	return "ReplacingMergeTree(" + version + ")"
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
	if s.Replicated && s.Cluster == "" {
		return fmt.Errorf("%w: replicated tables need a cluster", ErrConfig)
	}
	if s.Retention < 0 || s.Retention > 0 && s.Retention < time.Hour {
		return fmt.Errorf("%w: retention %v must be 0 (keep all) or at least an hour", ErrConfig, s.Retention)
	}
	return nil
}

// CreateDatabase is run before the migrations.
func (s Schema) CreateDatabase() string {
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
	}
}

func (s Schema) migration1() []Step {
	lc, db, on := s.lc(), s.Database, s.onCluster()
	var steps []Step
	add := func(table, columns, engine, partition, order, ttl, shard string) {
		steps = append(steps, Step{SQL: fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s%s\n(\n%s\n)\nENGINE = %s\nPARTITION BY %s\nORDER BY (%s)%s",
			db, table, on, columns, engine, partition, order, ttl)})
		if s.Cluster != "" {
			steps = append(steps, Step{SQL: fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s%s%s AS %s.%s\nENGINE = Distributed(%s, %s, %s, %s)",
				db, table, DistSuffix, on, db, table, s.Cluster, db, table, shard)})
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
	shards := s.Cluster != "" && s.Replicated && !s.NodeLocal
	on := s.onCluster()
	if shards {
		on = ""
	}
	steps := []Step{{
		SQL:        fmt.Sprintf("ALTER TABLE %s.%s%s ADD COLUMN %s%s AFTER rows", s.Database, TableRollups, on, ifNot, col),
		AddColumn:  &Column{TableRollups, "active_session_seconds"},
		EveryShard: shards,
	}}
	if s.Cluster != "" {
		every := s.Replicated && !s.NodeLocal
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
