package demo

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/internal/collector"
	"github.com/qtop-dev/qtop/internal/tui"
	"github.com/qtop-dev/qtop/policy"
)

// TestDemoSource runs the in-process demo on its DuckDB store: data comes
// within seconds, and a throttle lands in its policy.
func TestDemoSource(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	d, err := New(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dir := d.Dir()
	s, err := d.Once(ctx, tui.Query{Measure: api.MeasureRU, Top: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Tenants) == 0 || len(s.Services) != 3 || s.Source != api.SourceDemo || !strings.HasPrefix(s.Collector.Store, "duckdb://") {
		t.Fatalf("demo snapshot: %d tenants, %d services, source %q, store %q", len(s.Tenants), len(s.Services), s.Source, s.Collector.Store)
	}
	if err := d.Throttle(ctx, policy.Rule{Tenant: collector.DemoImportTenant, Action: policy.Throttle, RUPerSecond: 10, Expires: time.Now().Add(time.Minute), Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	// The drill-in's h reads the demo's own store (before, "it needs a
	// collector" while the demo ran one).
	if h, err := d.History(ctx, collector.DemoImportTenant, 60); err != nil || h.Tenant != collector.DemoImportTenant {
		t.Fatalf("history: %+v, %v", h, err)
	}
	s, err = d.Next(ctx, tui.Query{Measure: api.MeasureRU, Top: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Policy.Rules) != 1 || s.Policy.Rules[0].Tenant != collector.DemoImportTenant {
		t.Fatalf("policy after the throttle: %+v", s.Policy)
	}
	if err := d.Throttle(ctx, policy.Rule{}); err == nil {
		t.Fatal("an invalid rule was accepted")
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Next(ctx, tui.Query{}); !errors.Is(err, tui.ErrClosed) {
		t.Fatalf("Next after Close: %v", err)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Fatalf("the demo's temporary folder %s is still there", dir)
	}
}

// TestDemoViewsWithoutTheirData: the demo is a collector, so view 7 is
// its freshness view; its fleet samples no GET, and the view says so and
// what to run to fill it, whole at 60 and 80 columns. Views 8 and 9 say
// what they show or why they are empty.
func TestDemoViewsWithoutTheirData(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	d, err := New(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()

	r := lipgloss.NewRenderer(nil)
	r.SetColorProfile(termenv.Ascii)
	key := func(m *tui.Model, k string) {
		_, cmd := m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)})
		if cmd != nil {
			if msg := cmd(); msg != nil {
				m.Update(msg)
			}
		}
	}
	for _, size := range [][2]int{{60, 20}, {80, 24}} {
		m := tui.New(d, tui.WithRenderer(r), tui.WithContext(ctx))
		m.Update(tea.WindowSizeMsg{Width: size[0], Height: size[1]})
		m.Update(m.Init()()) // the first snapshot
		key(m, "7")
		screen := m.View()
		flat := strings.Join(strings.Fields(screen), " ")
		for _, want := range []string{"The demo's fleet samples no GET", "qtop demo --listen 127.0.0.1:7070",
			"go run ./examples/balance --collector http://127.0.0.1:7070 --sampling 1", "curl http://127.0.0.1:8081/accounts/42/balance"} {
			if !strings.Contains(flat, want) {
				t.Errorf("%dx%d: view 7 does not say %q:\n%s", size[0], size[1], want, screen)
			}
		}
		if strings.Contains(flat, "no freshness view") {
			t.Errorf("%dx%d: view 7 says the demo has no freshness view:\n%s", size[0], size[1], screen)
		}
		key(m, "8")
		if screen := m.View(); !strings.Contains(screen, "Offenders:") || !strings.Contains(screen, "Victims:") {
			t.Errorf("%dx%d: view 8:\n%s", size[0], size[1], screen)
		}
		key(m, "9")
		if screen := m.View(); !strings.Contains(strings.Join(strings.Fields(screen), " "), "Top SQL reads pg_stat_statements: run qtop --postgres DSN") {
			t.Errorf("%dx%d: view 9:\n%s", size[0], size[1], screen)
		}
	}
	// A demo that serves its API names its own address.
	l, err := New(ctx, WithListen("127.0.0.1:0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if h := l.FreshnessHint(); !strings.Contains(h, "--collector http://"+l.Addr()+" ") || strings.Contains(h, "qtop demo --listen") {
		t.Errorf("hint of a demo on %s: %q", l.Addr(), h)
	}
}
