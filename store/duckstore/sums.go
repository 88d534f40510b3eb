package duckstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// rollups_sums_hour and rollups_sums_day hold, per hour and per day, the
// sums Usage needs of the cold table's rows (cold.go) per tenant × route ×
// kind, and n, how many rows each sum covers. They are kept on every
// change to the cold table, in the same transaction, by appending deltas:
// rows moved there are added, cold rows a late row replaces or Retain
// deletes are subtracted. When the horizon passes the end of an hour, the
// deltas of the hours that ended, and of the days that began before it
// (the current day's too, so that it never holds more than an hour's
// deltas beside its folded rows), are folded into one row per tenant ×
// route × kind; Retain deletes the buckets wholly before its point and an
// erasure the tenant's rows. A cost report over a week then reads the
// days' sums, the edge hours' and at most two partial hours of minutes
// instead of every minute. The grains are two tables (migration 5; one
// table with a grain column before) so that reading a week's days does
// not scan the week's hours too: the column's zone maps did not separate
// them, as folds append both. (Updating sums in place, by INSERT … ON
// CONFLICT or MERGE, took half a minute per move of 10,000 tenants' rows:
// DuckDB updates slowly.)
var sumsMigration = []string{
	`CREATE TABLE IF NOT EXISTS rollups_sums (
    grain VARCHAR NOT NULL,
    ` + strings.ReplaceAll(sumsColumnTypes, "\n", "\n    ") + `)`,
}

// sumsSplitMigration moves the sums to a table per grain.
var sumsSplitMigration = []string{
	`CREATE TABLE IF NOT EXISTS rollups_sums_hour (
    ` + strings.ReplaceAll(sumsColumnTypes, "\n", "\n    ") + `)`,
	`CREATE TABLE IF NOT EXISTS rollups_sums_day (
    ` + strings.ReplaceAll(sumsColumnTypes, "\n", "\n    ") + `)`,
	`INSERT INTO rollups_sums_hour SELECT * EXCLUDE (grain) FROM rollups_sums WHERE grain = 'hour' ORDER BY start`,
	`INSERT INTO rollups_sums_day SELECT * EXCLUDE (grain) FROM rollups_sums WHERE grain = 'day' ORDER BY start`,
	`DROP TABLE rollups_sums`,
}

const sumsColumnTypes = `start TIMESTAMP NOT NULL,
tenant VARCHAR NOT NULL,
route VARCHAR NOT NULL,
kind VARCHAR NOT NULL,
n BIGINT NOT NULL,
count HUGEINT NOT NULL,
errors HUGEINT NOT NULL,
duration_seconds DOUBLE NOT NULL,
active_session_seconds DOUBLE NOT NULL,
ru DOUBLE NOT NULL,
bytes HUGEINT NOT NULL`

// grains are the buckets of the sums, with their tables.
var grains = []struct {
	name, table string
	d           time.Duration
}{{"hour", "rollups_sums_hour", time.Hour}, {"day", "rollups_sums_day", 24 * time.Hour}}

// addSums appends the sums of the rollups source selects (a SELECT of
// rollups columns, taking args), negated when sign is −1, to the hourly
// and daily sums.
func addSums(ctx context.Context, tx *sql.Tx, sign int, source string, args ...any) error {
	for _, g := range grains {
		q := fmt.Sprintf(`INSERT INTO %[3]s
SELECT date_trunc('%[4]s', src.minute) AS start, src.tenant, src.route, src.kind,
    %[1]d * count(*), %[1]d * sum(src.count), %[1]d * sum(src.errors), %[1]d * sum(src.duration_seconds),
    %[1]d * sum(coalesce(src.active_session_seconds, 0)), %[1]d * sum(src.ru), %[1]d * sum(src.bytes)
FROM (%[2]s) src
GROUP BY ALL`, sign, source, g.table, g.name)
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("rollup sums: %w", err)
		}
	}
	return nil
}

// foldSums, when the horizon passed the end of an hour going from from to
// to, folds the deltas of each bucket that began in [from, the hour's end)
// (truncated to the bucket) into one row per tenant × route × kind (none
// where they cancel out).
func foldSums(ctx context.Context, tx *sql.Tx, from, to time.Time) error {
	end := to.Truncate(time.Hour)
	if !from.Truncate(time.Hour).Before(end) {
		return nil
	}
	for _, g := range grains {
		a := from.Truncate(g.d)
		for _, q := range []string{
			`CREATE OR REPLACE TEMP TABLE sums_folded AS
SELECT start, tenant, route, kind, sum(n)::BIGINT AS n, sum(count) AS count, sum(errors) AS errors,
    sum(duration_seconds) AS duration_seconds, sum(active_session_seconds) AS active_session_seconds,
    sum(ru) AS ru, sum(bytes) AS bytes
FROM ` + g.table + ` WHERE start >= ? AND start < ?
GROUP BY ALL HAVING sum(n) > 0`,
			`DELETE FROM ` + g.table + ` WHERE start >= ? AND start < ?`,
		} {
			if _, err := tx.ExecContext(ctx, q, a, end); err != nil {
				return fmt.Errorf("fold rollup sums: %w", err)
			}
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO "+g.table+" SELECT * FROM sums_folded ORDER BY start"); err != nil {
			return fmt.Errorf("fold rollup sums: %w", err)
		}
		if _, err := tx.ExecContext(ctx, "DROP TABLE sums_folded"); err != nil {
			return fmt.Errorf("fold rollup sums: %w", err)
		}
	}
	return nil
}

// retainSums removes the sums of the cold rows before before: the buckets
// wholly before it are deleted, the rows of the one that straddles it
// subtracted.
func retainSums(ctx context.Context, tx *sql.Tx, before time.Time) error {
	for _, g := range grains {
		b := before.Truncate(g.d)
		if _, err := tx.ExecContext(ctx, "DELETE FROM "+g.table+" WHERE start < ?", b); err != nil {
			return fmt.Errorf("retain rollup sums: %w", err)
		}
		if !b.Before(before) {
			continue
		}
		q := `INSERT INTO ` + g.table + `
SELECT ?, tenant, route, kind, -count(*), -sum(count), -sum(errors), -sum(duration_seconds),
    -sum(coalesce(active_session_seconds, 0)), -sum(ru), -sum(bytes)
FROM rollups_cold WHERE minute >= ? AND minute < ?
GROUP BY ALL`
		if _, err := tx.ExecContext(ctx, q, b, b, before); err != nil {
			return fmt.Errorf("retain rollup sums: %w", err)
		}
	}
	return nil
}

// usageParts splits [from, to) into the days and hours whose sums Usage
// reads and the minutes it reads from the cold table: the whole days
// inside the range, the whole hours inside it outside those days, and the
// rest. An edge day the range covers more than half of is read as the
// day's sums less the hours and minutes outside the range (fewer rows:
// an edge day's hours are most of a week's rows at 10,000 tenants). It
// returns the SELECT of the usage columns and n, the rows each covers,
// over all of it (hot rows for the whole range) and its arguments.
func usageParts(from, to time.Time) (string, []any) {
	from, to = from.UTC(), to.UTC()
	const day = 24 * time.Hour
	h0, h1 := ceilTo(from, time.Hour), to.Truncate(time.Hour)
	d0, d1 := ceilTo(from, day), to.Truncate(day)
	q := "SELECT " + usageColumns + ", 1 AS n FROM rollups WHERE minute >= ? AND minute < ?"
	args := []any{from, to}
	part := func(neg bool, table, column string, a, b time.Time) {
		if !a.Before(b) {
			return
		}
		cols, n := usageColumns, "1"
		if neg {
			cols, n = negatedUsageColumns, "-1"
		}
		if table != "rollups_cold" {
			n = "n"
			if neg {
				n = "-n"
			}
		}
		q += fmt.Sprintf("\nUNION ALL SELECT %s, %s AS n FROM %s WHERE %s >= ? AND %s < ?", cols, n, table, column, column)
		args = append(args, a, b)
	}
	cold := func(neg bool, a, b time.Time) { part(neg, "rollups_cold", "minute", a, b) }
	hours := func(neg bool, a, b time.Time) { part(neg, "rollups_sums_hour", "start", a, b) }
	days := func(a, b time.Time) { part(false, "rollups_sums_day", "start", a, b) }
	if !h0.Before(h1) { // no whole hour: minutes only
		cold(false, from, to)
		return q, args
	}
	if d0.After(d1) { // inside one day
		if d := d1; to.Sub(from) > day/2 { // the day less its hours and minutes outside
			days(d, d.Add(day))
			hours(true, d, from.Truncate(time.Hour))
			cold(true, from.Truncate(time.Hour), from)
			cold(true, to, ceilTo(to, time.Hour))
			hours(true, ceilTo(to, time.Hour), d.Add(day))
		} else {
			cold(false, from, h0)
			hours(false, h0, h1)
			cold(false, h1, to)
		}
		return q, args
	}
	days(d0, d1)
	if d0.Sub(from) > day/2 { // the first day less its hours and minutes before from
		days(d0.Add(-day), d0)
		hours(true, d0.Add(-day), from.Truncate(time.Hour))
		cold(true, from.Truncate(time.Hour), from)
	} else {
		cold(false, from, h0)
		hours(false, h0, d0)
	}
	if to.Sub(d1) > day/2 { // the last day less its minutes and hours from to
		days(d1, d1.Add(day))
		cold(true, to, ceilTo(to, time.Hour))
		hours(true, ceilTo(to, time.Hour), d1.Add(day))
	} else {
		hours(false, d1, h1)
		cold(false, h1, to)
	}
	return q, args
}

// usageColumns are what Usage sums; negatedUsageColumns subtracts them.
const (
	usageColumns        = "tenant, route, kind, count, errors, duration_seconds, active_session_seconds, ru, bytes"
	negatedUsageColumns = `tenant, route, kind, -CAST(count AS HUGEINT) AS count, -CAST(errors AS HUGEINT) AS errors,
    -duration_seconds AS duration_seconds, -coalesce(active_session_seconds, 0) AS active_session_seconds, -ru AS ru,
    -CAST(bytes AS HUGEINT) AS bytes`
)

// ceilTo rounds t up to a multiple of d (since the zero time, as
// Truncate does).
func ceilTo(t time.Time, d time.Duration) time.Time {
	if f := t.Truncate(d); f.Before(t) {
		return f.Add(d)
	}
	return t
}
