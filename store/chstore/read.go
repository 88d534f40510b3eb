package chstore

import (
	"context"
	"fmt"
	"time"

	"github.com/qtop-dev/qtop/ratio"
	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/tenant"
)

// latest is the rollups matching where with one row per key: the latest
// version (argMax over version), so rows a retry or replay wrote twice
// count once. It works on plain, sharded (through the Distributed table,
// rows of one tenant live on one shard) and unmerged tables alike. The
// tuple v holds tier, count, errors, duration_seconds, ru, bytes, rows,
// active_session_seconds and, with latency, latency_idx and latency_cnt.
func (s *Store) latest(where string, latency bool) string {
	lat := ""
	if latency {
		lat = ", latency_idx, latency_cnt"
	}
	return fmt.Sprintf(`SELECT tenant, route, kind, minute,
        argMax((tier, count, errors, duration_seconds, ru, bytes, rows, active_session_seconds%s), version) AS v
    FROM %s
    WHERE %s
    GROUP BY tenant, minute, route, kind, service, writer`, lat, s.schema.target(TableRollups), where)
}

func timeRange(from, to time.Time) string {
	return fmt.Sprintf("minute >= toDateTime(%d) AND minute < toDateTime(%d)", clampUnix(from), clampUnix(to))
}

func clampUnix(t time.Time) int64 {
	u := t.Unix()
	if u < 0 {
		return 0
	}
	if u > 1<<32-1 {
		return 1<<32 - 1
	}
	return u
}

// Usage implements store.Store.
func (s *Store) Usage(ctx context.Context, from, to time.Time, byRoute bool) ([]store.Usage, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	route := "''"
	if byRoute {
		route = "route"
	}
	q := fmt.Sprintf(`SELECT tenant, %s AS r,
    sumIf(tupleElement(v, 2), kind IN ('request', 'job')),
    sumIf(tupleElement(v, 3), kind IN ('request', 'job')),
    sumIf(tupleElement(v, 4), kind IN ('request', 'job')),
    sumIf(tupleElement(v, 4), kind = 'db') + sumIf(tupleElement(v, 8), kind = 'pg'),
    sum(tupleElement(v, 5)),
    sum(tupleElement(v, 6))
FROM (%s)
GROUP BY tenant, r
ORDER BY tenant, r`, route, s.latest(timeRange(from, to), false))
	rows, err := s.conn.Query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("chstore: usage: %w", err)
	}
	defer rows.Close()
	var out []store.Usage
	for rows.Next() {
		var u store.Usage
		if err := rows.Scan(&u.Tenant, &u.Route, &u.Requests, &u.Errors, &u.DurationSeconds, &u.DBSeconds, &u.RU, &u.Bytes); err != nil {
			return nil, fmt.Errorf("chstore: usage: %w", err)
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("chstore: usage: %w", err)
	}
	return out, nil
}

// History implements store.Store.
func (s *Store) History(ctx context.Context, tenantName string, from, to time.Time) ([]store.Rollup, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	q := fmt.Sprintf(`SELECT minute,
    max(tupleElement(v, 1)),
    sum(tupleElement(v, 2)), sum(tupleElement(v, 3)), sum(tupleElement(v, 4)), sum(tupleElement(v, 5)),
    sum(tupleElement(v, 6)), sum(tupleElement(v, 7)), sum(tupleElement(v, 8)),
    tupleElement(sumMap(tupleElement(v, 9), tupleElement(v, 10)), 1),
    tupleElement(sumMap(tupleElement(v, 9), tupleElement(v, 10)), 2)
FROM (%s)
GROUP BY minute
ORDER BY minute`, s.latest("tenant = ? AND "+timeRange(from, to), true))
	rows, err := s.conn.Query(ctx, q, tenantName)
	if err != nil {
		return nil, fmt.Errorf("chstore: history: %w", err)
	}
	defer rows.Close()
	var out []store.Rollup
	for rows.Next() {
		r := store.Rollup{Tenant: tenantName}
		var tier uint8
		var idx []uint16
		var cnt []uint64
		if err := rows.Scan(&r.Minute, &tier, &r.Count, &r.Errors, &r.DurationSeconds, &r.RU, &r.Bytes, &r.Rows, &r.ActiveSessionSeconds, &idx, &cnt); err != nil {
			return nil, fmt.Errorf("chstore: history: %w", err)
		}
		r.Tier = tenant.Tier(tier)
		r.Minute = r.Minute.UTC()
		r.Latency = denseLatency(idx, cnt)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("chstore: history: %w", err)
	}
	return out, nil
}

// denseLatency turns summed (bucket, count) pairs back into a histogram,
// nil when every bucket is empty.
func denseLatency(idx []uint16, cnt []uint64) []uint64 {
	var lat []uint64
	for i, b := range idx {
		if i >= len(cnt) || int(b) >= ratio.NumBuckets || cnt[i] == 0 {
			continue
		}
		if lat == nil {
			lat = make([]uint64, ratio.NumBuckets)
		}
		lat[b] += cnt[i]
	}
	return lat
}
