package duckstore

import (
	"context"
	"crypto/md5"
	"database/sql"
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"github.com/qtop-dev/qtop/store"
)

// Rollups live in two tables. New minutes go to rollups (the "hot" table:
// its primary key makes every write an idempotent upsert, and it stays
// small, so the upsert stays cheap). Once it holds at least compactRows
// (a row group) rows older than the last ten minutes written, the oldest
// whole row groups' worth of them move, in one transaction, to
// rollups_cold, sorted by
// tenant (tkey, the upper half of the tenant's MD5, then the minute).
// DuckDB keeps the minimum and maximum of each column per row group (and
// per column segment), so a read of one tenant skips the parts of a
// sorted run that hold other tenants: one tenant's day reads a few
// thousand rows instead of every tenant's millions (a DuckDB ART index
// on the tenant was measured too: it finds the rows but fetches each
// from a different row group, and was no faster than the scan). tkey is
// an integer because DuckDB keeps only a prefix of a string's minimum and
// maximum, which tenant names that share a prefix would make useless; the
// hot table carries it too (migration 4), so its scan compares integers.
//
// Each move is one sorted run, and a read of one tenant visits every run
// (at 10,000 tenants a day is about fifty moves). So when the horizon
// passes the end of a run span (four hours, a day), the cold rows of the
// span that ended are rewritten as one sorted run, in the moving
// transaction: a day's history then reads yesterday's one run, at most
// five four-hour runs of today and the moves since.
//
// Each row's key is in one table only. The horizon is the minute before
// which rows have been moved; a late row (before the horizon) replaces its
// cold copy when its version is the same or newer (the cold copy is
// deleted and the row goes to the hot table, to move again later), and is
// dropped when the cold copy is newer, as the upsert would.

// rowGroup is DuckDB's row group size: moves are multiples of it, so that
// each cold row group holds one tenant-sorted move and has a narrow zone
// map.
const rowGroup = 122_880

// coldLag is what the hot table keeps behind the newest minute written:
// the minutes late reports still change.
const coldLag = 10 * time.Minute

// rollupColumns are the rollups' columns, in both tables.
const rollupColumns = `minute, writer, version, service, tenant, route, tier, kind,
    count, errors, duration_seconds, ru, bytes, "rows", active_session_seconds, latency`

// rollupsFrom renders a SELECT of cols over both tables, where applied to
// each (its arguments are given once per table).
func rollupsFrom(cols, where string) string {
	return fmt.Sprintf("SELECT %s FROM rollups WHERE %s\nUNION ALL\nSELECT %s FROM rollups_cold WHERE %s", cols, where, cols, where)
}

// tenantKey is md5_number_upper(name), the tables' tkey. History puts it
// in the query's text: a constant the scan compares with each row group's
// minimum and maximum (a parameter was measured slower).
func tenantKey(name string) uint64 {
	sum := md5.Sum([]byte(name))
	return binary.LittleEndian.Uint64(sum[:8])
}

// loadHorizon reads the horizon a previous run left.
func (s *Store) loadHorizon(ctx context.Context) error {
	var h time.Time
	if err := s.db.QueryRowContext(ctx, "SELECT horizon FROM rollups_horizon").Scan(&h); err != nil {
		return fmt.Errorf("duckstore: rollups horizon: %w", err)
	}
	s.horizon = h.UTC()
	return nil
}

// sameKey matches a staged row (s) to a cold one (c).
const sameKey = `c.tkey = md5_number_upper(s.tenant) AND c.minute = s.minute AND c.tenant = s.tenant
    AND c.route = s.route AND c.kind = s.kind AND c.service = s.service AND c.writer = s.writer`

// mergeRollups is the merge of a staged batch of rollups: late rows
// against the cold table, the upsert into the hot one, then a move to the
// cold table when the hot one has enough. It runs under the write lock;
// the returned function, called once the transaction committed, records
// the new horizon.
func (s *Store) mergeRollups(rows []store.Rollup) func(ctx context.Context, tx *sql.Tx) (func(), error) {
	return func(ctx context.Context, tx *sql.Tx) (func(), error) {
		var newest time.Time
		late := false
		for i := range rows {
			late = late || rows[i].Minute.Before(s.horizon)
			if rows[i].Minute.After(newest) {
				newest = rows[i].Minute
			}
		}
		if late {
			if err := s.replaceCold(ctx, tx); err != nil {
				return nil, fmt.Errorf("late rows: %w", err)
			}
		}
		if _, err := tx.ExecContext(ctx, upsertRollup); err != nil {
			return nil, err
		}
		next, err := s.moveCold(ctx, tx, newest.UTC().Truncate(time.Minute).Add(-coldLag))
		if err != nil {
			return nil, fmt.Errorf("move to the cold table: %w", err)
		}
		return func() { s.horizon = next }, nil
	}
}

// replaceCold drops the staged rows older than the horizon whose cold
// copy is newer, and deletes (from the cold table and its sums) the cold
// copies of the others.
func (s *Store) replaceCold(ctx context.Context, tx *sql.Tx) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM staging_rollups s WHERE s.minute < ? AND EXISTS (
    SELECT 1 FROM rollups_cold c WHERE `+sameKey+` AND c.version > s.version)`, s.horizon); err != nil {
		return err
	}
	replaced := `SELECT c.* FROM rollups_cold c WHERE c.minute < ? AND EXISTS (
    SELECT 1 FROM staging_rollups s WHERE ` + sameKey + `)`
	if err := addSums(ctx, tx, -1, replaced, s.horizon); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `DELETE FROM rollups_cold c WHERE c.minute < ? AND EXISTS (
    SELECT 1 FROM staging_rollups s WHERE `+sameKey+`)`, s.horizon)
	return err
}

// moveCold moves the oldest whole multiple of compactRows of the hot rows
// before cutoff to the cold table, sorted by tenant, and returns the
// horizon after the move.
func (s *Store) moveCold(ctx context.Context, tx *sql.Tx, cutoff time.Time) (time.Time, error) {
	if !cutoff.After(s.horizon) {
		return s.horizon, nil
	}
	var n int64
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM rollups WHERE minute < ?", cutoff).Scan(&n); err != nil {
		return s.horizon, err
	}
	if n < int64(s.compactRows) {
		return s.horizon, nil
	}
	n -= n % int64(s.compactRows)
	// Whole row groups' worth, oldest first; the same rows for each
	// statement: one snapshot, a total order.
	moving := "SELECT rowid FROM rollups WHERE minute < ? ORDER BY minute, rowid LIMIT ?"
	if _, err := tx.ExecContext(ctx, `INSERT INTO rollups_cold BY NAME
SELECT tkey, `+rollupColumns+`
FROM rollups WHERE rowid IN (`+moving+`)
ORDER BY tkey, minute`, cutoff, n); err != nil {
		return s.horizon, err
	}
	if err := addSums(ctx, tx, 1, "SELECT * FROM rollups WHERE rowid IN ("+moving+")", cutoff, n); err != nil {
		return s.horizon, err
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM rollups WHERE rowid IN ("+moving+")", cutoff, n); err != nil {
		return s.horizon, err
	}
	// Every row moved is before cutoff; rows left behind before it are
	// handled as late ones are.
	if err := foldSums(ctx, tx, s.horizon, cutoff); err != nil {
		return s.horizon, err
	}
	if err := resortCold(ctx, tx, s.horizon, cutoff); err != nil {
		return s.horizon, err
	}
	if _, err := tx.ExecContext(ctx, "UPDATE rollups_horizon SET horizon = ?", cutoff); err != nil {
		return s.horizon, err
	}
	return cutoff, nil
}

// runSpans are the spans whose cold rows are rewritten as one sorted run
// when the horizon passes their end, longest first.
var runSpans = []time.Duration{24 * time.Hour, 4 * time.Hour}

// resortCold rewrites the cold rows of the longest run span that ended in
// (from, to] as one run sorted by tenant and minute: the sorted copy is
// appended, then the rows it copied deleted (rowids up to the table's
// last before the copy). Only the last span that ended is rewritten: when
// a move passes several, the rows of the earlier ones came in that move,
// one sort already. The first move (from the epoch) is one sort too.
func resortCold(ctx context.Context, tx *sql.Tx, from, to time.Time) error {
	if !from.After(time.Unix(0, 0)) {
		return nil
	}
	for _, d := range runSpans {
		end := to.Truncate(d)
		if !end.After(from) {
			continue
		}
		start := end.Add(-d)
		var last sql.NullInt64
		if err := tx.QueryRowContext(ctx, "SELECT max(rowid) FROM rollups_cold").Scan(&last); err != nil {
			return fmt.Errorf("sort a run: %w", err)
		}
		if !last.Valid {
			return nil
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO rollups_cold
SELECT * FROM rollups_cold WHERE minute >= ? AND minute < ? ORDER BY tkey, minute`, start, end); err != nil {
			return fmt.Errorf("sort a run: %w", err)
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM rollups_cold WHERE minute >= ? AND minute < ? AND rowid <= ?",
			start, end, last.Int64); err != nil {
			return fmt.Errorf("sort a run: %w", err)
		}
		return nil
	}
	return nil
}

// coldMigration creates the cold table, sorted by tenant in row-group
// moves, and the horizon (the epoch: nothing moved yet; the first write
// moves the file's older rows).
var coldMigration = []string{
	`CREATE TABLE IF NOT EXISTS rollups_cold (
    tkey UBIGINT NOT NULL,
    ` + strings.ReplaceAll(coldColumnTypes, "\n", "\n    ") + `)`,
	`CREATE TABLE IF NOT EXISTS rollups_horizon (horizon TIMESTAMP NOT NULL)`,
	`INSERT INTO rollups_horizon SELECT TIMESTAMP '1970-01-01' WHERE NOT EXISTS (SELECT 1 FROM rollups_horizon)`,
}

// hotKeyMigration gives the hot table the tenant's key, filled for the
// rows it holds; the upsert sets it from then on.
var hotKeyMigration = []string{
	`ALTER TABLE rollups ADD COLUMN IF NOT EXISTS tkey UBIGINT`,
	`UPDATE rollups SET tkey = md5_number_upper(tenant)`,
}

const coldColumnTypes = `minute TIMESTAMP NOT NULL,
writer VARCHAR NOT NULL,
version UBIGINT NOT NULL,
service VARCHAR NOT NULL,
tenant VARCHAR NOT NULL,
route VARCHAR NOT NULL,
tier UTINYINT NOT NULL,
kind VARCHAR NOT NULL,
count UBIGINT NOT NULL,
errors UBIGINT NOT NULL,
duration_seconds DOUBLE NOT NULL,
ru DOUBLE NOT NULL,
bytes UBIGINT NOT NULL,
"rows" UBIGINT NOT NULL,
active_session_seconds DOUBLE,
latency BLOB`
