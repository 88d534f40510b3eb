package chstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// resolveMode settles the schema's mode: the one asked for, or with
// ModeAuto the one detected (cloud where the server has SharedMergeTree,
// replicated-database where the database already is one, explicit
// otherwise), and checks the server can run it.
func (s *Store) resolveMode(ctx context.Context, sc *Schema) error {
	if sc.Mode == ModeAuto {
		m, err := detectMode(ctx, s.conn, sc)
		if err != nil {
			return err
		}
		sc.Mode = m
		if m != ModeExplicit {
			s.cfg.log.Info("chstore: detected mode", "mode", string(m), "server", sc.Version.String())
		}
	}
	if sc.Mode == ModeReplicatedDatabase {
		if !sc.features().ReplicatedDatabase {
			return fmt.Errorf("%w: mode %s needs ClickHouse 23.1 or later (server %v)", ErrConfig, sc.Mode, sc.Version)
		}
		// Unique per database incarnation, as for the explicit layout's tables.
		sc.Incarnation = newIncarnation()
	}
	return sc.Validate()
}

func detectMode(ctx context.Context, conn driver.Conn, sc *Schema) (Mode, error) {
	if !sc.Version.atLeast(22, 1) {
		return ModeExplicit, nil
	}
	var n uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM system.table_engines WHERE name = 'SharedMergeTree'").Scan(&n); err != nil {
		return "", fmt.Errorf("chstore: detect mode: %w", err)
	}
	if n > 0 {
		return ModeCloud, nil
	}
	engine, err := databaseEngine(ctx, conn, sc.Database)
	if err != nil {
		return "", err
	}
	if engine == "Replicated" {
		return ModeReplicatedDatabase, nil
	}
	return ModeExplicit, nil
}

// databaseEngine is the engine of database ("" when it does not exist).
func databaseEngine(ctx context.Context, conn driver.Conn, database string) (string, error) {
	rows, err := conn.Query(ctx, "SELECT engine FROM system.databases WHERE name = ?", database)
	if err != nil {
		return "", fmt.Errorf("chstore: look up database %s: %w", database, err)
	}
	defer rows.Close()
	var engine string
	if rows.Next() {
		if err := rows.Scan(&engine); err != nil {
			return "", fmt.Errorf("chstore: look up database %s: %w", database, err)
		}
	}
	return engine, rows.Err()
}

// choosePaths makes the ZooKeeper paths of the explicit layout's
// Replicated… tables unique per table incarnation, once the database
// exists: {uuid} in an Atomic database (the server fills in the table's
// UUID, the same on every replica of an ON CLUSTER create), a new
// incarnation suffix in an Ordinary one (18.16). Node-local DDL keeps the
// fixed path: each node's collector creates its own replicas, which must
// meet at one path.
func (s *Store) choosePaths(ctx context.Context) error {
	sc := &s.schema
	if sc.mode() != ModeExplicit || !sc.replicated() || sc.NodeLocal {
		return nil
	}
	engine, err := databaseEngine(ctx, s.conn, sc.Database)
	if err != nil {
		return err
	}
	if engine == "Atomic" {
		sc.UUIDPaths = true
		return nil
	}
	sc.Incarnation = newIncarnation()
	return nil
}

// newIncarnation is the time in base 36: distinct for every Open that
// renders a schema (a collision would need two in the same nanosecond, and
// then they render the same paths, which is harmless).
func newIncarnation() string { return strconv.FormatInt(time.Now().UnixNano(), 36) }

// ddlContext carries what the server needs to create the database: the
// Replicated engine was experimental before 24.4.
func (s Schema) ddlContext(ctx context.Context) context.Context {
	if s.mode() == ModeReplicatedDatabase && !s.Version.atLeast(24, 4) {
		return clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{"allow_experimental_database_replicated": 1}))
	}
	return ctx
}

// InsertSettings are the settings every write sends, by version and
// layout: through Distributed tables the insert waits until every shard
// has its rows (distributed_foreground_insert, insert_distributed_sync
// before 23.10), so a nil error means stored, not queued; with async
// inserts the server batches small inserts and still answers only once
// they are stored.
func (s Schema) InsertSettings(async bool) clickhouse.Settings {
	set := clickhouse.Settings{}
	f := s.features()
	if s.sharded() {
		if f.ForegroundInsertName {
			set["distributed_foreground_insert"] = 1
		} else {
			set["insert_distributed_sync"] = 1
		}
	}
	if async && f.AsyncInsert {
		set["async_insert"] = 1
		set["wait_for_async_insert"] = 1
	}
	return set
}
