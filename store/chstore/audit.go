package chstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/qtop-dev/qtop/store"
)

var _ store.AuditReader = (*Store)(nil)

// ReadAudit implements store.AuditReader. An identical row written twice
// (a retried insert) is returned once. The range is exact to the
// nanosecond: the query takes whole seconds (time is a DateTime, its
// nanoseconds apart) and the rows of the last second past to are left out
// here, so a change made a moment before to is read.
func (s *Store) ReadAudit(ctx context.Context, from, to time.Time) ([]store.Audit, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	q := fmt.Sprintf(`SELECT time, time_ns, who, action, policy_version, any(rule)
FROM %s
WHERE time >= toDateTime(%d) AND time <= toDateTime(%d)
GROUP BY time, time_ns, who, action, policy_version
ORDER BY time DESC, time_ns DESC, policy_version DESC
LIMIT %d`, s.schema.target(TableAudit), clampUnix(from), clampUnix(to), store.MaxAuditRows)
	rows, err := s.conn.Query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("chstore: audit: %w", err)
	}
	defer rows.Close()
	var out []store.Audit
	for rows.Next() {
		var a store.Audit
		var ns uint32
		if err := rows.Scan(&a.Time, &ns, &a.Who, &a.Action, &a.PolicyVersion, &a.Rule); err != nil {
			return nil, fmt.Errorf("chstore: audit: %w", err)
		}
		a.Time = a.Time.UTC().Add(time.Duration(ns))
		if a.Time.Before(from) || !a.Time.Before(to) {
			continue
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("chstore: audit: %w", err)
	}
	slices.Reverse(out)
	return out, nil
}

// MaxAuditLogRows bounds what AuditLog reads.
const MaxAuditLogRows = 100_000

// AuditLog returns every policy change in the store, oldest first, each
// once (a retried write is not repeated), at most MaxAuditLogRows (the newest).
// Collectors sharing a store fold it into their common policy. With a
// cluster it reads through the Distributed table.
func (s *Store) AuditLog(ctx context.Context) ([]store.Audit, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	q := fmt.Sprintf(`SELECT time, time_ns, who, action, policy_version, rule FROM (
    SELECT time, time_ns, who, action, policy_version, rule
    FROM %s
    GROUP BY time, time_ns, who, action, policy_version, rule
    ORDER BY time DESC, time_ns DESC
    LIMIT %d)
ORDER BY time, time_ns`, s.schema.target(TableAudit), MaxAuditLogRows)
	rows, err := s.conn.Query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("chstore: audit log: %w", err)
	}
	defer rows.Close()
	var out []store.Audit
	for rows.Next() {
		var a store.Audit
		var tm time.Time
		var ns uint32
		if err := rows.Scan(&tm, &ns, &a.Who, &a.Action, &a.PolicyVersion, &a.Rule); err != nil {
			return nil, fmt.Errorf("chstore: audit log: %w", err)
		}
		a.Time = tm.UTC().Add(time.Duration(ns))
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("chstore: audit log: %w", err)
	}
	return out, nil
}
