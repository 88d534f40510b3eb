package duckstore

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/store/storetest"
)

// TestWriteMetrics: the embedded store exports the write metrics the
// collector's dashboard reads (the same as chstore's), every table's series
// from the start; a write canceled by the collector stopping is not an
// error; Close takes the metrics back so a store opened again on the same
// registry can register them.
func TestWriteMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	path := filepath.Join(t.TempDir(), "q.duckdb")
	s, err := Open(path, WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	const rows, errs = "qtop_collector_store_rows_written_total", "qtop_collector_store_write_errors_total"
	if n := testutil.CollectAndCount(reg, rows); n != len(tables) {
		t.Fatalf("%d series of %s before a write, want one per table (%d)", n, rows, len(tables))
	}
	ctx := context.Background()
	if err := s.WriteRollups(ctx, []store.Rollup{storetest.Row(0, "w", "a", "/", 1), storetest.Row(1, "w", "a", "/", 1)}); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteAudit(ctx, []store.Audit{{Time: storetest.T0, Who: "t", Action: "set", PolicyVersion: 1, Rule: "{}"}}); err != nil {
		t.Fatal(err)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.WriteRollups(canceled, []store.Rollup{storetest.Row(2, "w", "a", "/", 1)}); err == nil {
		t.Fatal("a write with a canceled context succeeded: the test shows nothing")
	}
	for table, want := range map[string]float64{"rollups": 2, "audit": 1, "hot_keys": 0} {
		if got := storetest.Counter(t, reg, rows, table); got != want {
			t.Errorf("%s{table=%q} = %v, want %v", rows, table, got, want)
		}
	}
	if got := storetest.Counter(t, reg, errs, "rollups"); got != 0 {
		t.Errorf("a canceled write counted as %v errors", got)
	}
	if n := testutil.CollectAndCount(reg, "qtop_collector_store_write_seconds"); n != 1 {
		t.Errorf("write_seconds: %d series", n)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatal(problems, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path, WithRegisterer(reg))
	if err != nil {
		t.Fatalf("opened again on the same registry: %v", err)
	}
	s.Close()
}
