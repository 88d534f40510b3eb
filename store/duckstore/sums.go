package duckstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// rollups_sums holds, per hour and per day, the sums Usage needs of the
// cold table's rows (cold.go) per tenant × route × kind, and n, how many
// rows each sum covers. It is kept on every change to the cold table, in
// the same transaction: rows moved there are added, cold rows a late row
// replaces or Retain deletes are subtracted (a sum left covering no row
// is deleted), an erased tenant's sums are deleted. A cost report over a
// week then reads the days' sums, the hours' at the edges and the minutes
// of at most two partial hours, instead of every minute row.
var sumsMigration = []string{
	`CREATE TABLE IF NOT EXISTS rollups_sums (
    grain VARCHAR NOT NULL,
    start TIMESTAMP NOT NULL,
    tenant VARCHAR NOT NULL,
    route VARCHAR NOT NULL,
    kind VARCHAR NOT NULL,
    n BIGINT NOT NULL,
    count HUGEINT NOT NULL,
    errors HUGEINT NOT NULL,
    duration_seconds DOUBLE NOT NULL,
    active_session_seconds DOUBLE NOT NULL,
    ru DOUBLE NOT NULL,
    bytes HUGEINT NOT NULL,
    PRIMARY KEY (grain, start, tenant, route, kind))`,
}

// addSums adds (sign 1) or subtracts (sign −1) the sums of the rollups
// source selects (a SELECT of rollups columns, taking args) to the
// hourly and daily sums, then deletes the sums left covering no row.
func addSums(ctx context.Context, tx *sql.Tx, sign int, source string, args ...any) error {
	q := fmt.Sprintf(`INSERT INTO rollups_sums
SELECT g.grain, date_trunc(g.grain, src.minute) AS start, src.tenant, src.route, src.kind,
    %[1]d * count(*), %[1]d * sum(src.count), %[1]d * sum(src.errors), %[1]d * sum(src.duration_seconds),
    %[1]d * sum(coalesce(src.active_session_seconds, 0)), %[1]d * sum(src.ru), %[1]d * sum(src.bytes)
FROM (%[2]s) src, (VALUES ('hour'), ('day')) g(grain)
GROUP BY ALL
ON CONFLICT (grain, start, tenant, route, kind) DO UPDATE SET
    n = rollups_sums.n + excluded.n, count = rollups_sums.count + excluded.count,
    errors = rollups_sums.errors + excluded.errors,
    duration_seconds = rollups_sums.duration_seconds + excluded.duration_seconds,
    active_session_seconds = rollups_sums.active_session_seconds + excluded.active_session_seconds,
    ru = rollups_sums.ru + excluded.ru, bytes = rollups_sums.bytes + excluded.bytes`, sign, source)
	if _, err := tx.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("rollup sums: %w", err)
	}
	if sign < 0 {
		if _, err := tx.ExecContext(ctx, "DELETE FROM rollups_sums WHERE n <= 0"); err != nil {
			return fmt.Errorf("rollup sums: %w", err)
		}
	}
	return nil
}

// usageParts splits [from, to) into the days and hours whose sums Usage
// reads and the minutes it reads from the cold table: the whole days
// inside the range, the whole hours inside it outside those days, and the
// rest. It returns the SELECT of the usage columns over all of it (hot
// rows for the whole range) and its arguments.
func usageParts(cols string, from, to time.Time) (string, []any) {
	from, to = from.UTC(), to.UTC()
	h0, h1 := ceilTo(from, time.Hour), to.Truncate(time.Hour)
	d0, d1 := ceilTo(from, 24*time.Hour), to.Truncate(24*time.Hour)
	q := "SELECT " + cols + " FROM rollups WHERE minute >= ? AND minute < ?"
	args := []any{from, to}
	cold := func(a, b time.Time) {
		if a.Before(b) {
			q += "\nUNION ALL SELECT " + cols + " FROM rollups_cold WHERE minute >= ? AND minute < ?"
			args = append(args, a, b)
		}
	}
	sums := func(grain string, a, b time.Time) {
		if a.Before(b) {
			q += "\nUNION ALL SELECT " + cols + " FROM rollups_sums WHERE grain = ? AND start >= ? AND start < ?"
			args = append(args, grain, a, b)
		}
	}
	if !h0.Before(h1) { // no whole hour: minutes only
		cold(from, to)
		return q, args
	}
	cold(from, h0)
	cold(h1, to)
	if !d0.Before(d1) {
		sums("hour", h0, h1)
		return q, args
	}
	sums("hour", h0, d0)
	sums("day", d0, d1)
	sums("hour", d1, h1)
	return q, args
}

// ceilTo rounds t up to a multiple of d (since the zero time, as
// Truncate does).
func ceilTo(t time.Time, d time.Duration) time.Time {
	if f := t.Truncate(d); f.Before(t) {
		return f.Add(d)
	}
	return t
}
