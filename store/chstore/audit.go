package chstore

import (
	"context"
	"fmt"
	"time"

	"github.com/qtop-dev/qtop/store"
)

// MaxAuditRows bounds what AuditLog reads.
const MaxAuditRows = 100_000

// AuditLog returns every policy change in the store, oldest first, each
// once (a retried write is not repeated), at most MaxAuditRows (the newest).
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
ORDER BY time, time_ns`, s.schema.target(TableAudit), MaxAuditRows)
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
