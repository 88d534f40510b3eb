package duckstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	"github.com/duckdb/duckdb-go/v2"

	"github.com/qtop-dev/qtop/store"
)

// ErrNotEmpty reports a Load into a store that already holds rollups.
var ErrNotEmpty = errors.New("duckstore: load needs a store without rollups")

// Load fills a store that holds no rollups yet with a history of them,
// in the layout the collector's writes would have left (cold.go): the
// rows before the last ten minutes in the cold table, each whole day one
// run sorted by tenant, the last day's whole four hours one run each and
// the rest of it one more; their hourly and daily sums folded; the last
// ten minutes in the hot table. WriteRollups takes about an hour for a
// week of 10,000 tenants (six million rows a day); Load takes minutes,
// which is what it is for: filling files for benchmarks and imports. The
// answers of every read are the ones the same rows written through
// WriteRollups give; only the last day's moves after its last four hours
// are one run here where writes would leave several.
//
// fill calls add with the rows in batches of whole minutes, oldest first
// (each batch's minutes after the previous batch's); within a batch the
// newest version of a key wins, as in WriteRollups. On error the store
// holds part of the history: start again from a new file.
func (s *Store) Load(ctx context.Context, fill func(add func([]store.Rollup) error) error) error {
	done, err := s.begin()
	if err != nil {
		return err
	}
	defer done()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("duckstore: load: %w", err)
	}
	defer conn.Close()
	var n int64
	if err := conn.QueryRowContext(ctx, "SELECT (SELECT count(*) FROM rollups) + (SELECT count(*) FROM rollups_cold)").Scan(&n); err != nil {
		return fmt.Errorf("duckstore: load: %w", err)
	}
	if n > 0 {
		return ErrNotEmpty
	}
	// A temporary table stages the rows: it is the connection's and is
	// kept in memory (spilled if it must), not written to the file.
	if _, err := conn.ExecContext(ctx, "CREATE OR REPLACE TEMP TABLE load_rollups AS FROM staging_rollups LIMIT 0"); err != nil {
		return fmt.Errorf("duckstore: load: %w", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS temp.load_rollups")
	l := &loader{conn: conn}
	if err := fill(func(rows []store.Rollup) error { return l.add(ctx, rows) }); err != nil {
		return fmt.Errorf("duckstore: load: %w", err)
	}
	if l.first.IsZero() {
		return nil
	}
	horizon, err := l.finish(ctx)
	if err != nil {
		return fmt.Errorf("duckstore: load: %w", err)
	}
	s.horizon = horizon
	return nil
}

// loader stages a day of rows at a time and writes it to the cold table
// once the rows pass the day's end.
type loader struct {
	conn          *sql.Conn
	first, newest time.Time // the first and newest minute added
	day           time.Time // the day staged
}

func (l *loader) add(ctx context.Context, rows []store.Rollup) error {
	if err := store.ValidateRollups(rows); err != nil || len(rows) == 0 {
		return err
	}
	rows = latestRollups(rows)
	lo, hi := rows[0].Minute.UTC(), rows[0].Minute.UTC()
	for i := range rows {
		lo, hi = minTime(lo, rows[i].Minute.UTC()), maxTime(hi, rows[i].Minute.UTC())
	}
	lo, hi = lo.Truncate(time.Minute), hi.Truncate(time.Minute)
	if !l.first.IsZero() && !lo.After(l.newest) {
		return fmt.Errorf("rows of %v after rows of %v: batches must be whole minutes, oldest first", lo, l.newest)
	}
	if l.first.IsZero() {
		l.first, l.day = lo, lo.Truncate(24*time.Hour)
	}
	l.newest = hi
	err := l.conn.Raw(func(dc any) error {
		a, err := duckdb.NewAppender(dc.(driver.Conn), "temp", "main", "load_rollups")
		if err != nil {
			return err
		}
		for i := range rows {
			r := &rows[i]
			if err := a.AppendRow(r.Minute.UTC(), r.Writer, r.Version, r.Service, r.Tenant, r.Route, uint8(r.Tier), r.Kind,
				r.Count, r.Errors, r.DurationSeconds, r.RU, r.Bytes, r.Rows, r.ActiveSessionSeconds, encodeLatency(&r.Latency)); err != nil {
				a.Close()
				return err
			}
		}
		return a.Close()
	})
	if err != nil {
		return err
	}
	// The days before the newest rows' are all staged (rows come in
	// minute order): each goes to the cold table as one run.
	for d := hi.Truncate(24 * time.Hour); l.day.Before(d); l.day = l.day.Add(24 * time.Hour) {
		if err := l.runs(ctx, l.day, l.day.Add(24*time.Hour), 24*time.Hour); err != nil {
			return err
		}
	}
	return nil
}

// runs moves the staged rows of [from, to) to the cold table, one run per
// span of the given length, their sums with them, in one transaction.
func (l *loader) runs(ctx context.Context, from, to time.Time, span time.Duration) error {
	tx, err := l.conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for a := from; a.Before(to); a = a.Add(span) {
		b := minTime(a.Add(span), to)
		if _, err := tx.ExecContext(ctx, `INSERT INTO rollups_cold BY NAME
SELECT md5_number_upper(tenant) AS tkey, `+rollupColumns+`
FROM load_rollups WHERE minute >= ? AND minute < ? ORDER BY tkey, minute`, a, b); err != nil {
			return err
		}
	}
	if err := addSums(ctx, tx, 1, "SELECT * FROM load_rollups WHERE minute >= ? AND minute < ?", from, to); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM load_rollups WHERE minute < ?", to); err != nil {
		return err
	}
	return tx.Commit()
}

// finish writes the last day: its whole four hours before the horizon
// (ten minutes before the newest minute) a run each, the rest before it
// one more, the minutes from it to the hot table; then folds the sums and
// records the horizon.
func (l *loader) finish(ctx context.Context) (time.Time, error) {
	horizon := l.newest.Add(-coldLag)
	if horizon.Before(l.day) {
		horizon = l.day // the day's rows are all in the last ten minutes
	}
	spans := horizon.Truncate(runSpans[len(runSpans)-1])
	if err := l.runs(ctx, l.day, spans, runSpans[len(runSpans)-1]); err != nil {
		return time.Time{}, err
	}
	if err := l.runs(ctx, spans, horizon, horizon.Sub(spans)+1); err != nil {
		return time.Time{}, err
	}
	tx, err := l.conn.BeginTx(ctx, nil)
	if err != nil {
		return time.Time{}, err
	}
	defer tx.Rollback()
	for _, q := range []string{"INSERT INTO staging_rollups FROM load_rollups", upsertRollup, "DELETE FROM staging_rollups"} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return time.Time{}, err
		}
	}
	if err := foldSums(ctx, tx, l.first, horizon); err != nil {
		return time.Time{}, err
	}
	if _, err := tx.ExecContext(ctx, "UPDATE rollups_horizon SET horizon = ?", horizon); err != nil {
		return time.Time{}, err
	}
	return horizon, tx.Commit()
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
