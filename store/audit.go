package store

import (
	"context"
	"fmt"
	"time"
)

// MaxAuditRows bounds what one ReadAudit returns (the newest rows of the
// range).
const MaxAuditRows = 10_000

// AuditReader is a Store that can read its policy audit back: who changed
// which rule, when, and the rule as it was (its expiry included). The
// DuckDB and ClickHouse stores and the Spool (when its next store can)
// implement it.
type AuditReader interface {
	// ReadAudit returns the audit rows of [from, to), oldest first, at
	// most MaxAuditRows (the newest ones).
	ReadAudit(ctx context.Context, from, to time.Time) ([]Audit, error)
}

// ReadAudit implements AuditReader by reading next; spooled rows are not
// yet there.
func (s *Spool) ReadAudit(ctx context.Context, from, to time.Time) ([]Audit, error) {
	ar, ok := s.next.(AuditReader)
	if !ok {
		return nil, fmt.Errorf("store: spool: %T cannot read the audit", s.next)
	}
	return ar.ReadAudit(ctx, from, to)
}

var _ AuditReader = (*Spool)(nil)
