package duckstore

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/store/storetest"
)

func openFile(t *testing.T) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "qtop.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// minutes reads the distinct minutes of a table's rows in the file.
func (s *Store) minutes(t *testing.T) storetest.Minutes {
	return func(table, tenantName string) []time.Time {
		t.Helper()
		col := "minute"
		if table == "statements" {
			col = "date_trunc('minute', time)"
		}
		from := table
		if table == "rollups" { // both rollups tables
			from = "(SELECT minute, tenant FROM rollups UNION ALL SELECT minute, tenant FROM rollups_cold)"
		}
		rows, err := s.db.Query("SELECT DISTINCT "+col+" AS m FROM "+from+" WHERE tenant = ? OR ? = '' ORDER BY m", tenantName, tenantName)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []time.Time
		for rows.Next() {
			var m time.Time
			if err := rows.Scan(&m); err != nil {
				t.Fatal(err)
			}
			out = append(out, m.UTC())
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
}

// TestRetain: the rows older than the point asked are deleted, exactly
// (DuckDB deletes rows, not days), in every table but the audit.
func TestRetain(t *testing.T) {
	s := openFile(t)
	storetest.WriteAged(t, s)
	// 3 minutes before RetainBefore × 2 tenants × 3 tables.
	if got := storetest.CheckRetain(t, s, s.minutes(t), false, 18); got.Partitions != 0 {
		t.Errorf("DuckDB dropped %d partitions", got.Partitions)
	}
}

func TestEraseTenant(t *testing.T) {
	s := openFile(t)
	storetest.WriteAged(t, s)
	storetest.CheckErase(t, s, s.minutes(t))
}

// TestRetainBesideWrites: Retain takes no write lock, and batches written
// meanwhile (recent minutes, as the collector's) neither fail nor make it
// fail.
func TestRetainBesideWrites(t *testing.T) {
	s := openFile(t)
	storetest.WriteAged(t, s)
	errs := make(chan error, 2)
	go func() {
		for i := range 50 {
			r := storetest.Row(i, "w2", "gamma", "/w", 1)
			if err := s.WriteRollups(context.Background(), []store.Rollup{r}); err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	}()
	go func() {
		for range 20 {
			if _, err := s.Retain(context.Background(), storetest.RetainBefore); err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	}()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if m := s.minutes(t)("rollups", "gamma"); len(m) != 50 {
		t.Errorf("%d minutes of gamma written beside Retain, want 50", len(m))
	}
	if m := s.minutes(t)("rollups", "acme"); len(m) != 2 {
		t.Errorf("acme at %v after Retain, want the 2 minutes from RetainBefore on", m)
	}
}
