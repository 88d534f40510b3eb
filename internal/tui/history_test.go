package tui

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/histogram"
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
	// A tenant that left two hours ago: no live row, its requests' p95
	// in the store (and a statement's, which is not the tenant's latency).
	for i := 120; i < 180; i++ {
		r := store.Rollup{Minute: now.Truncate(time.Minute).Add(-time.Duration(i) * time.Minute), Writer: "w", Version: 1,
			Service: "api", Tenant: "gone", Route: "GET /", Kind: "request", Count: 60, RU: 120}
		for range 60 {
			r.Latency.Observe(0.8)
		}
		db := r
		db.Kind, db.Route, db.Latency, db.RU = "db", "SELECT 1", histogram.Sparse{}, 0
		for range 6000 { // many fast statements: the tenant's p95 is its requests'
			db.Latency.Observe(0.001)
		}
		rows = append(rows, r, db)
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

	// Any tenant the store has, by name, from a tab: h asks for it
	// (the selected tenant to start with).
	press(m, "esc", "1", "h")
	mustContain(t, m.View(), "History of tenant [bigcorp▏]")
	press(m, "ctrl+u")
	typeText(m, "gone")
	runCmd(t, m, press(m, "enter"))
	mustContain(t, m.View(), "History · from the store", "RU/s", "(peak 2.00)", "p95 (peak 801ms)")
	press(m, "esc", "h", "ctrl+u", "enter")
	mustContain(t, m.View(), "want a tenant's name")

	// Sources without a store say so.
	fm, _ := newTestModel(t, Features{Throttle: true})
	press(fm, "enter", "h")
	mustContain(t, fm.c.status.text, "needs a collector")
}
