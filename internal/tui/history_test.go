package tui

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/histogram"
	"github.com/qtop-dev/qtop/internal/collector"
	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/tenant"
)

// TestDrillInHistoryFromTheStore: h in the drill-in fetches the tenant's
// per-minute history from a real collector's (DuckDB) store, and [ ]
// move the window back and forth.
func TestDrillInHistoryFromTheStore(t *testing.T) {
	now := time.Now().UTC()
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
	m := storeModel(t, rows)
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

// TestHistoryPromptTenantNamedOther: h, then "other", opens the drill-in
// of the tenant really named so, under the name its live row and the
// store have (tenant.Escape), with its own history — not the overflow
// row's, which sums the tenants beyond the top ones.
func TestHistoryPromptTenantNamedOther(t *testing.T) {
	own := tenant.Escape(tenant.Other)
	m0 := time.Now().UTC().Truncate(time.Minute).Add(-time.Minute)
	m := storeModel(t, []store.Rollup{
		{Minute: m0, Writer: "w", Version: 1, Service: "api", Tenant: api.OtherTenant, Route: "GET /", Kind: "request", Count: 60, RU: 6000},
		{Minute: m0, Writer: "w", Version: 1, Service: "api", Tenant: own, Route: "GET /", Kind: "request", Count: 60, RU: 120},
	})
	press(m, "h", "ctrl+u")
	typeText(m, "other")
	runCmd(t, m, press(m, "enter"))
	v := m.View()
	mustContain(t, v, own, "History · from the store", "(peak 2.00)")
	if strings.Contains(v, "(peak 100)") {
		t.Errorf("the overflow row's history:\n%s", v)
	}
}

// storeModel is a model on a real collector whose (DuckDB) store holds
// rows, showing the incident() snapshot; all is closed when t ends.
func storeModel(t *testing.T, rows []store.Rollup) *Model {
	t.Helper()
	dir := t.TempDir()
	srv, err := collector.New(collector.Config{Store: "duckdb://" + filepath.Join(dir, "h.duckdb"), DataDir: filepath.Join(dir, "data"),
		Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	if err := srv.Store().WriteRollups(context.Background(), rows); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	src, err := NewCollector(hs.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	m := New(src, WithRenderer(asciiRenderer()), WithLocation(time.UTC))
	m.Update(tea.WindowSizeMsg{Width: 100, Height: 40})
	m.Update(snapshotMsg{incident()})
	return m
}
