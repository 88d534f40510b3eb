package tui

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/internal/collector"
	"github.com/qtop-dev/qtop/store"
)

// TestDrillInHistoryFromTheStore: h in the drill-in fetches the tenant's
// per-minute history from a real collector's (DuckDB) store, and [ ]
// move the window back and forth.
func TestDrillInHistoryFromTheStore(t *testing.T) {
	dir := t.TempDir()
	now := time.Now().UTC()
	srv, err := collector.New(collector.Config{Store: "duckdb://" + filepath.Join(dir, "h.duckdb"), DataDir: filepath.Join(dir, "data"),
		Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	var rows []store.Rollup
	for i := range 600 { // ten hours, rising
		rows = append(rows, store.Rollup{Minute: now.Truncate(time.Minute).Add(-time.Duration(i) * time.Minute), Writer: "w", Version: 1,
			Service: "api", Tenant: "bigcorp", Route: "POST /catalog/import", Kind: "request", Count: 60, RU: float64(60 * (600 - i))})
	}
	if err := srv.Store().WriteRollups(context.Background(), rows); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	src, err := NewCollector(hs.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	m := New(src, WithRenderer(asciiRenderer()), WithLocation(time.UTC))
	m.Update(tea.WindowSizeMsg{Width: 100, Height: 40})
	m.Update(snapshotMsg{incident()})
	press(m, "enter")
	mustContain(t, m.View(), "h: history from the store")
	runCmd(t, m, press(m, "h"))
	mustContain(t, m.View(), "History · from the store", "(peak 600)")
	press(m, "[", "[")
	mustContain(t, m.View(), "(peak 502)") // 98 minutes back
	press(m, "]", "]")
	mustContain(t, m.View(), "(peak 600)")
	press(m, "h")
	mustContain(t, m.View(), "h: history from the store")

	// Sources without a store say so.
	fm, _ := newTestModel(t, Features{Throttle: true})
	press(fm, "enter", "h")
	mustContain(t, fm.c.status.text, "needs a collector")
}
