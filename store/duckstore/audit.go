package duckstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/qtop-dev/qtop/store"
)

var _ store.AuditReader = (*Store)(nil)

// ReadAudit implements store.AuditReader.
func (s *Store) ReadAudit(ctx context.Context, from, to time.Time) ([]store.Audit, error) {
	done, err := s.begin()
	if err != nil {
		return nil, err
	}
	defer done()
	rows, err := s.db.QueryContext(ctx, `SELECT time, who, action, policy_version, rule FROM audit
WHERE time >= ? AND time < ? ORDER BY time DESC, policy_version DESC LIMIT ?`, from.UTC(), to.UTC(), store.MaxAuditRows)
	if err != nil {
		return nil, fmt.Errorf("duckstore: audit: %w", err)
	}
	defer rows.Close()
	var out []store.Audit
	for rows.Next() {
		var a store.Audit
		if err := rows.Scan(&a.Time, &a.Who, &a.Action, &a.PolicyVersion, &a.Rule); err != nil {
			return nil, fmt.Errorf("duckstore: audit: %w", err)
		}
		a.Time = a.Time.UTC()
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("duckstore: audit: %w", err)
	}
	slices.Reverse(out)
	return out, nil
}
