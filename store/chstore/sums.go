package chstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/qtop-dev/qtop/store"
)

// The sums of closed hours. rollups is a ReplacingMergeTree sorted by
// tenant: reading it needs FINAL (single-threaded on 18.16: 78–107 s for
// 7 days × 10,000 tenants) and any range of minutes reads every column of
// each day it touches, as an hour's rows lie in every granule of its day.
// So once an hour is closed the store sums it into TableSums, a plain
// MergeTree sorted by (kind, hour, gen, minute): rows per hour, tenant and
// route, rows per minute, tenant and route (for ranges that start or end
// inside an hour), and marks; once a day has ended and its hours are
// summed, rows per day, tenant and route added up from them. Usage reads
// the sums of the days and hours whose latest generation is complete and
// newer than every write into them, and the rollups (the latest version of
// each key, by argMax) only for the other minutes: the hour in progress
// and hours written since they were summed.
//
// The sums are exact for the rows the store itself wrote: a collector of
// an older version writing into the same database (a rolling upgrade)
// marks no hours, so its late rows into an hour already summed are not
// counted until that hour is written again by this version.
//
// Every successful WriteRollups adds a "written" mark per hour it wrote,
// at the store's clock after the insert. A computation takes generation
// gen = the clock, reads the hour's rollups and writes its rows and a
// "summed" mark in one insert (one part: an hour is on one shard). An
// hour's sums count when its newest summed generation is more than
// sumMargin after its newest written mark: a write the computation may
// not have seen (the margin covers clock skew between collectors and
// replicas behind) makes the sums stale, and reads fall back to the
// rollups until the hour is summed again. Older generations stay (they
// are never read) until Retain or the TTL removes the day.
const (
	sumHour    uint8 = 0 // per hour, tenant, route
	sumMinute  uint8 = 1 // per minute, tenant, route
	sumSummed  uint8 = 2 // the generation's rows are complete
	sumWritten uint8 = 3 // rollups were written into the hour at gen
	sumDay     uint8 = 4 // per day, tenant, route (hour: the day's start)
	sumDayDone uint8 = 5 // the day's generation is complete (hour: the day's start)

	// sumMargin is how much newer than the hour's last write a generation
	// must be to count, and how long an hour must have gone unwritten
	// before it is summed.
	sumMargin = 30 * time.Second
	// sumGrace is how long after its end an hour is closed: the
	// collector's write of the hour's last minute comes after it.
	sumGrace = 2 * time.Minute
	// sumEvery is how often WriteRollups looks for hours to sum.
	sumEvery = time.Minute
	// sumHoursPerRound bounds one computation: hours of one day (their
	// rows are read together), about 250,000 rollups each at 10,000
	// tenants.
	sumHoursPerRound = 6
)

// usageMeasures are the six figures of a store.Usage, summed from the
// latest version of each rollup (columns c, e, d, a, u, b of latestRows).
const usageMeasures = `sumIf(c, kind IN ('request', 'job')),
    sumIf(e, kind IN ('request', 'job')),
    sumIf(d, kind IN ('request', 'job')),
    sumIf(d, kind = 'db') + sumIf(a - d, kind = 'pg'),
    sum(u),
    sum(b)`

// latestRows is the latest version of each rollup key in the given
// minutes, by argMax over the key: multi-threaded, unlike FINAL on 18.16.
// Two rows of one key and version are the same write retried.
func latestRows(s *Store, where string) string {
	return fmt.Sprintf(`SELECT minute, tenant, route, kind,
        argMax(count, version) AS c, argMax(errors, version) AS e, argMax(duration_seconds, version) AS d,
        argMax(active_session_seconds, version) AS a, argMax(ru, version) AS u, argMax(bytes, version) AS b
    FROM %s
    WHERE %s
    GROUP BY tenant, minute, route, kind, service, writer`, s.schema.target(TableRollups), where)
}

// span is a half-open range of time.
type span struct{ from, to time.Time }

// minutesIn is the WHERE clause of the rollups in the spans.
func minutesIn(spans []span) string {
	var or []string
	for _, sp := range spans {
		or = append(or, "("+timeRange(sp.from, sp.to)+")")
	}
	return strings.Join(or, " OR ")
}

// markWritten notes that rows were written into the hours of rows, at the
// store's clock now that the insert has returned.
func markWritten(ctx context.Context, s *Store, rows []store.Rollup) error {
	var hours []time.Time
	for i := range rows {
		h := rows[i].Minute.UTC().Truncate(time.Hour)
		if !slices.ContainsFunc(hours, h.Equal) {
			hours = append(hours, h)
		}
	}
	return markHours(ctx, s, hours)
}

// MarkWritten notes that rows were written into every hour of [from, to)
// of s by something other than the store (an INSERT … SELECT of a bulk
// load or a benchmark), so that s.SumHours sums them once they went
// unwritten for 30 s: the store marks the hours of what it writes itself.
func MarkWritten(ctx context.Context, s *Store, from, to time.Time) error {
	if err := s.check(); err != nil {
		return err
	}
	var hours []time.Time
	for h := from.UTC().Truncate(time.Hour); h.Before(to); h = h.Add(time.Hour) {
		hours = append(hours, h)
	}
	return markHours(ctx, s, hours)
}

// markHours adds a written mark to each hour, at the store's clock.
func markHours(ctx context.Context, s *Store, hours []time.Time) error {
	if len(hours) == 0 {
		return nil
	}
	gen := uint64(s.cfg.now().UnixNano())
	var sums []sumRow
	for _, h := range hours {
		sums = append(sums, sumRow{kind: sumWritten, hour: h, minute: h})
	}
	return writeSums(ctx, s, sums, gen)
}

// sumRow is one row of TableSums.
type sumRow struct {
	kind          uint8
	hour, minute  time.Time
	tenant, route string
	req, errs, by uint64
	dur, db, ru   float64
}

var sumColumns = []string{"kind", "hour", "gen", "minute", "tenant", "route", "requests", "errors", "duration_seconds", "db_seconds", "ru", "bytes"}

// writeSums inserts rows in one batch, every one at generation gen.
func writeSums(ctx context.Context, s *Store, rows []sumRow, gen uint64) error {
	n := len(rows)
	kind, hour, minute, gens := make([]uint8, n), make([]time.Time, n), make([]time.Time, n), make([]uint64, n)
	tenant, route := make([]string, n), make([]string, n)
	req, errs, by := make([]uint64, n), make([]uint64, n), make([]uint64, n)
	dur, db, ru := make([]float64, n), make([]float64, n), make([]float64, n)
	for i, r := range rows {
		kind[i], hour[i], minute[i], gens[i], tenant[i], route[i] = r.kind, r.hour, r.minute, gen, r.tenant, r.route
		req[i], errs[i], by[i], dur[i], db[i], ru[i] = r.req, r.errs, r.by, r.dur, r.db, r.ru
	}
	return s.send(ctx, TableSums, n, sumColumns, []any{kind, hour, gens, minute, tenant, route, req, errs, dur, db, ru, by})
}

// maybeSum sums due hours, one round, at most every sumEvery; WriteRollups
// calls it after a write. A failure is logged: the rows are stored, and
// reads fall back to them until a later round sums the hour.
func maybeSum(ctx context.Context, s *Store) {
	now := s.cfg.now()
	s.sumMu.Lock()
	due := s.lastSum.IsZero() || now.Sub(s.lastSum) >= s.cfg.sumEvery
	if due {
		s.lastSum = now
	}
	s.sumMu.Unlock()
	if !due {
		return
	}
	n, err := sumRound(ctx, s)
	if err == nil && n == 0 {
		_, err = sumDayRound(ctx, s)
	}
	if err != nil {
		s.cfg.log.Warn("chstore: summing closed hours failed; reads use the rollups meanwhile", "err", err)
	}
}

// SumHours sums every closed hour whose sums are missing or stale (rows
// written into it since), a round of at most six hours of one day at a
// time, then every ended day whose hours are all summed, from their hourly
// sums, and returns how many hours it summed. WriteRollups does one round
// at most once a minute; an hour is due once it ended more than two
// minutes ago and went unwritten for 30 s. Tools that write history in
// bulk (bench/storegen) call it at the end; reads are right without it.
func (s *Store) SumHours(ctx context.Context) (int, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	total := 0
	for {
		n, err := sumRound(ctx, s)
		total += n
		if err != nil {
			return total, err
		}
		if n == 0 {
			break
		}
	}
	for {
		done, err := sumDayRound(ctx, s)
		if err != nil || !done {
			return total, err
		}
	}
}

// sumRound sums the newest due hour and the other due hours of its day,
// at most sumHoursPerRound, and returns how many.
func sumRound(ctx context.Context, s *Store) (int, error) {
	now := s.cfg.now()
	hours, err := dueHours(ctx, s, now)
	if err != nil || len(hours) == 0 {
		return 0, err
	}
	gen := uint64(now.UnixNano())
	var spans []span
	for _, h := range hours {
		spans = append(spans, span{h, h.Add(time.Hour)})
	}
	rows, err := computeSums(ctx, s, spans)
	if err != nil {
		return 0, err
	}
	for _, h := range hours {
		rows = append(rows, sumRow{kind: sumSummed, hour: h, minute: h})
	}
	if err := writeSums(ctx, s, rows, gen); err != nil {
		return 0, fmt.Errorf("chstore: sum hours: %w", err)
	}
	return len(hours), nil
}

// dueHours returns the hours to sum now: closed, unwritten for
// sumMargin, and without a generation newer than their last write by
// sumMargin; the newest and the others of its day.
func dueHours(ctx context.Context, s *Store, now time.Time) ([]time.Time, error) {
	closed := now.Add(-sumGrace - time.Hour)
	settled := uint64(now.Add(-s.cfg.sumMargin).UnixNano())
	q := fmt.Sprintf(`SELECT hour FROM %s
WHERE kind IN (%d, %d) AND hour <= toDateTime(%d)
GROUP BY hour
HAVING maxIf(gen, kind = %d) < %d AND maxIf(gen, kind = %d) <= maxIf(gen, kind = %d) + %d
ORDER BY hour DESC
LIMIT %d`, s.schema.target(TableSums), sumSummed, sumWritten, clampUnix(closed),
		sumWritten, settled, sumSummed, sumWritten, s.cfg.sumMargin.Nanoseconds(), sumHoursPerRound)
	rows, err := s.conn.Query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("chstore: sum hours: due: %w", err)
	}
	defer rows.Close()
	var hours []time.Time
	for rows.Next() {
		var h time.Time
		if err := rows.Scan(&h); err != nil {
			return nil, fmt.Errorf("chstore: sum hours: due: %w", err)
		}
		h = h.UTC()
		if len(hours) > 0 && !sameUTCDay(h, hours[0]) {
			continue
		}
		hours = append(hours, h)
	}
	return hours, rows.Err()
}

func sameUTCDay(a, b time.Time) bool {
	return a.Truncate(24 * time.Hour).Equal(b.Truncate(24 * time.Hour))
}

// computeSums reads the latest rollups of the spans (whole hours) and
// returns their sums per minute and per hour, by tenant and route. On a
// replicated cluster it reads only replicas at most sumMargin behind.
func computeSums(ctx context.Context, s *Store, spans []span) ([]sumRow, error) {
	q := fmt.Sprintf(`SELECT minute, tenant, route,
    %s
FROM (%s)
GROUP BY minute, tenant, route`, usageMeasures, latestRows(s, minutesIn(spans)))
	if s.schema.replicated() {
		ctx = clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{
			"max_replica_delay_for_distributed_queries":          int(s.cfg.sumMargin / time.Second),
			"fallback_to_stale_replicas_for_distributed_queries": 0,
		}))
	}
	rows, err := s.conn.Query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("chstore: sum hours: %w", err)
	}
	defer rows.Close()
	type key struct {
		hour          time.Time
		tenant, route string
	}
	hourly := map[key]*sumRow{}
	var out []sumRow
	for rows.Next() {
		r := sumRow{kind: sumMinute}
		if err := rows.Scan(&r.minute, &r.tenant, &r.route, &r.req, &r.errs, &r.dur, &r.db, &r.ru, &r.by); err != nil {
			return nil, fmt.Errorf("chstore: sum hours: %w", err)
		}
		r.minute = r.minute.UTC()
		r.hour = r.minute.Truncate(time.Hour)
		out = append(out, r)
		k := key{r.hour, r.tenant, r.route}
		h := hourly[k]
		if h == nil {
			h = &sumRow{kind: sumHour, hour: r.hour, minute: r.hour, tenant: r.tenant, route: r.route}
			hourly[k] = h
		}
		h.req, h.errs, h.dur, h.db, h.ru, h.by = h.req+r.req, h.errs+r.errs, h.dur+r.dur, h.db+r.db, h.ru+r.ru, h.by+r.by
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("chstore: sum hours: %w", err)
	}
	for _, h := range hourly {
		out = append(out, *h)
	}
	return out, nil
}

// sumDayRound sums the newest day due: ended sumGrace ago, every hour
// written in it summed, and no generation of the day newer than its last
// write by sumMargin. The day's sums add up its hours' current sums; they
// count while no hour of the day is written again (a write stales the day
// as it does its hour). It reports whether it summed a day.
func sumDayRound(ctx context.Context, s *Store) (bool, error) {
	now := s.cfg.now()
	ended := now.Add(-sumGrace - 24*time.Hour)
	q := fmt.Sprintf(`SELECT day FROM (
    SELECT toStartOfDay(hour, 'UTC') AS day, maxIf(gen, kind = %d) AS g, maxIf(gen, kind = %d) AS w, maxIf(gen, kind = %d) AS d
    FROM %s
    WHERE kind IN (%d, %d, %d) AND hour < toDateTime(%d)
    GROUP BY hour)
GROUP BY day
HAVING max(d) <= max(w) + %d AND min(w = 0 OR g > w + %d) = 1
ORDER BY day DESC
LIMIT 1`, sumSummed, sumWritten, sumDayDone, s.schema.target(TableSums), sumSummed, sumWritten, sumDayDone,
		clampUnix(ended.Truncate(24*time.Hour).Add(24*time.Hour)), s.cfg.sumMargin.Nanoseconds(), s.cfg.sumMargin.Nanoseconds())
	var day time.Time
	if err := s.conn.QueryRow(ctx, q).Scan(&day); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return false, nil
		}
		return false, fmt.Errorf("chstore: sum days: due: %w", err)
	}
	day = day.UTC()
	gen := uint64(now.UnixNano())
	hours, err := summedHours(ctx, s, day, day.Add(24*time.Hour))
	if err != nil {
		return false, err
	}
	rows := []sumRow{{kind: sumDayDone, hour: day, minute: day}}
	if len(hours) > 0 {
		q := fmt.Sprintf(`SELECT tenant, route, sum(requests), sum(errors), sum(duration_seconds), sum(db_seconds), sum(ru), sum(bytes)
FROM %s
WHERE kind = %d AND hour >= toDateTime(%d) AND hour < toDateTime(%d) AND (toUInt32(hour), gen) IN (%s)
GROUP BY tenant, route`, s.schema.target(TableSums), sumHour, day.Unix(), day.Add(24*time.Hour).Unix(), genList(hours))
		r, err := s.conn.Query(ctx, q)
		if err != nil {
			return false, fmt.Errorf("chstore: sum days: %w", err)
		}
		defer r.Close()
		for r.Next() {
			d := sumRow{kind: sumDay, hour: day, minute: day}
			if err := r.Scan(&d.tenant, &d.route, &d.req, &d.errs, &d.dur, &d.db, &d.ru, &d.by); err != nil {
				return false, fmt.Errorf("chstore: sum days: %w", err)
			}
			rows = append(rows, d)
		}
		if err := r.Err(); err != nil {
			return false, fmt.Errorf("chstore: sum days: %w", err)
		}
	}
	if err := writeSums(ctx, s, rows, gen); err != nil {
		return false, fmt.Errorf("chstore: sum days: %w", err)
	}
	return true, nil
}

// genList renders hours and generations for (toUInt32(hour), gen) IN (…).
func genList(gens []hourGen) string {
	keys := make([]string, len(gens))
	for i, g := range gens {
		keys[i] = fmt.Sprintf("(%d, %d)", g.hour.Unix(), g.gen)
	}
	return strings.Join(keys, ", ")
}
