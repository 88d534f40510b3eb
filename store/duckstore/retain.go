package duckstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/qtop-dev/qtop/store"
)

var (
	_ store.Retainer     = (*Store)(nil)
	_ store.TenantEraser = (*Store)(nil)
)

// aged are the tables Retain and EraseTenant clear, with their time
// column. The audit is kept.
var aged = []struct{ table, column string }{
	{"rollups", "minute"},
	{"rollups_cold", "minute"},
	{"hot_keys", "minute"},
	{"statements", "time"},
}

// Retain implements store.Retainer: it deletes the rows older than
// before, one table at a time, each in its own transaction. It takes the
// write lock only for the two rollups tables (a write may move the oldest
// hot rollups to the cold table, the very rows Retain deletes), so other
// batches keep being written meanwhile (they touch recent minutes, never
// the rows being deleted).
func (s *Store) Retain(ctx context.Context, before time.Time) (store.RetainResult, error) {
	done, err := s.begin()
	if err != nil {
		return store.RetainResult{}, err
	}
	defer done()
	var res store.RetainResult
	for _, t := range aged {
		n, err := s.retainTable(ctx, t.table, t.column, before.UTC())
		if err != nil {
			return res, fmt.Errorf("duckstore: retain %s: %w", t.table, err)
		}
		res.Rows += n
	}
	return res, nil
}

// retainTable deletes one table's rows before before; the rollups tables
// under the write lock, the cold one with its sums in one transaction.
func (s *Store) retainTable(ctx context.Context, table, column string, before time.Time) (uint64, error) {
	if strings.HasPrefix(table, "rollups") {
		s.wmu.Lock()
		defer s.wmu.Unlock()
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	if table == "rollups_cold" {
		if err := retainSums(ctx, tx, before); err != nil {
			return 0, err
		}
	}
	r, err := tx.ExecContext(ctx, fmt.Sprintf("DELETE FROM %s WHERE %s < ?", table, column), before)
	if err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	if n, err := r.RowsAffected(); err == nil && n > 0 {
		return uint64(n), nil
	}
	return 0, nil
}

// EraseTenant implements store.TenantEraser: one transaction deletes the
// tenant's rollups, hot keys and statements, then a checkpoint.
func (s *Store) EraseTenant(ctx context.Context, tenantName string) (store.Erased, error) {
	done, err := s.begin()
	if err != nil {
		return store.Erased{}, err
	}
	defer done()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return store.Erased{}, fmt.Errorf("duckstore: erase tenant: %w", err)
	}
	defer tx.Rollback()
	var e store.Erased
	for i, n := range []*uint64{&e.Rollups, &e.Rollups, &e.HotKeys, &e.Statements} {
		where := "tenant = ?"
		args := []any{tenantName}
		if aged[i].table == "rollups_cold" { // its row groups of other tenants skipped
			where, args = "tkey = md5_number_upper(?) AND tenant = ?", []any{tenantName, tenantName}
		}
		r, err := tx.ExecContext(ctx, "DELETE FROM "+aged[i].table+" WHERE "+where, args...)
		if err != nil {
			return store.Erased{}, fmt.Errorf("duckstore: erase tenant from %s: %w", aged[i].table, err)
		}
		if c, err := r.RowsAffected(); err == nil && c > 0 {
			*n += uint64(c)
		}
	}
	for _, g := range grains {
		if _, err := tx.ExecContext(ctx, "DELETE FROM "+g.table+" WHERE tenant = ?", tenantName); err != nil {
			return store.Erased{}, fmt.Errorf("duckstore: erase tenant from %s: %w", g.table, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return store.Erased{}, fmt.Errorf("duckstore: erase tenant: %w", err)
	}
	// A checkpoint writes the deletes into the file and reclaims what it
	// can of the rows' space (the WAL no longer holds them); DuckDB does
	// not rewrite every block, so bytes of the rows may stay in the file
	// until their space is reused (README, "Retention and erasure").
	if _, err := s.db.ExecContext(ctx, "CHECKPOINT"); err != nil {
		return e, fmt.Errorf("duckstore: erase tenant: the rows are deleted; checkpoint: %w", err)
	}
	return e, nil
}
