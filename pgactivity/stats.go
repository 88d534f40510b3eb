package pgactivity

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ServerStats are the server-wide figures pg_activity shows in its
// header, read at Time: counters to take deltas of (transactions, buffer
// hits and reads, summed over every database), the connected database's
// size, and the client sessions by state.
type ServerStats struct {
	Time              time.Time
	Xacts             int64 // xact_commit + xact_rollback
	BlksHit, BlksRead int64
	SizeBytes         int64 // pg_database_size(current_database())
	Database          string
	Active, Idle      int
	IdleInTx, Waiting int // idle in transaction (aborted included); waiting for a lock
}

const statsSQL = `SELECT /* ` + marker + ` */
	clock_timestamp(),
	(SELECT coalesce(sum(xact_commit + xact_rollback), 0)::int8 FROM pg_stat_database),
	(SELECT coalesce(sum(blks_hit), 0)::int8 FROM pg_stat_database),
	(SELECT coalesce(sum(blks_read), 0)::int8 FROM pg_stat_database),
	pg_database_size(current_database()),
	current_database(),
	count(*) FILTER (WHERE state = 'active'),
	count(*) FILTER (WHERE state = 'idle'),
	count(*) FILTER (WHERE state LIKE 'idle in transaction%'),
	count(*) FILTER (WHERE wait_event_type = 'Lock')
FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()`

// ReadStats reads the server's header figures in one statement.
func ReadStats(ctx context.Context, pool *pgxpool.Pool) (ServerStats, error) {
	var s ServerStats
	err := pool.QueryRow(ctx, statsSQL).Scan(&s.Time, &s.Xacts, &s.BlksHit, &s.BlksRead, &s.SizeBytes, &s.Database,
		&s.Active, &s.Idle, &s.IdleInTx, &s.Waiting)
	if err != nil {
		return ServerStats{}, fmt.Errorf("%w: server stats: %w", ErrSample, err)
	}
	return s, nil
}

// StatementStats is one pg_stat_statements entry: cumulative counters of
// one normalized statement (fingerprint, QueryID) of one role in one
// database.
type StatementStats struct {
	QueryID     int64
	Database    string
	Query       string // normalized: constants are $1, $2, …
	Calls, Rows int64
	TotalMs     float64 // total_exec_time
	SharedHit   int64   // shared_blks_hit
	SharedRead  int64   // shared_blks_read
}

// ErrNoStatements says pg_stat_statements cannot be read: the extension
// is not created in the connected database, or not in
// shared_preload_libraries.
var ErrNoStatements = errors.New("pgactivity: pg_stat_statements is not available")

const statementsSQL = `SELECT /* ` + marker + ` */ coalesce(s.queryid, 0), coalesce(d.datname, ''), s.query, s.calls, s.rows,
	s.total_exec_time, s.shared_blks_hit, s.shared_blks_read
FROM pg_stat_statements s LEFT JOIN pg_database d ON d.oid = s.dbid
WHERE s.query NOT LIKE '%` + marker + `%'
ORDER BY s.total_exec_time DESC LIMIT $1`

const statementTotalsSQL = `SELECT /* ` + marker + ` */ coalesce(s.queryid, 0), current_database(), s.query, s.calls, s.rows,
	s.total_exec_time, s.shared_blks_hit, s.shared_blks_read
FROM pg_stat_statements s
WHERE s.dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND s.toplevel
	AND s.query NOT LIKE '%` + marker + `%'`

// ReadStatementTotals reads every top-level statement of
// pg_stat_statements run in the connected database (PostgreSQL 14 or
// later), or ErrNoStatements.
func ReadStatementTotals(ctx context.Context, pool *pgxpool.Pool) ([]StatementStats, error) {
	return readStatements(ctx, pool, statementTotalsSQL)
}

// ReadStatements reads the limit statements of pg_stat_statements with
// the most execution time (PostgreSQL 13 or later), or ErrNoStatements.
func ReadStatements(ctx context.Context, pool *pgxpool.Pool, limit int) ([]StatementStats, error) {
	return readStatements(ctx, pool, statementsSQL, limit)
}

func readStatements(ctx context.Context, pool *pgxpool.Pool, sql string, args ...any) ([]StatementStats, error) {
	rows, err := pool.Query(ctx, sql, args...)
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && (pe.Code == "42P01" || pe.Code == "55000" || pe.Code == "42703") {
			return nil, fmt.Errorf("%w (%s): CREATE EXTENSION pg_stat_statements, with it in shared_preload_libraries", ErrNoStatements, pe.Message)
		}
		return nil, fmt.Errorf("%w: pg_stat_statements: %w", ErrSample, err)
	}
	defer rows.Close()
	var out []StatementStats
	for rows.Next() {
		var s StatementStats
		if err := rows.Scan(&s.QueryID, &s.Database, &s.Query, &s.Calls, &s.Rows, &s.TotalMs, &s.SharedHit, &s.SharedRead); err != nil {
			return nil, fmt.Errorf("%w: pg_stat_statements: %w", ErrSample, err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && (pe.Code == "42P01" || pe.Code == "55000") {
			return nil, fmt.Errorf("%w (%s)", ErrNoStatements, pe.Message)
		}
		return nil, fmt.Errorf("%w: pg_stat_statements: %w", ErrSample, err)
	}
	return out, nil
}
