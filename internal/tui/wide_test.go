package tui

import (
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/teatest"

	"github.com/qtop-dev/qtop/api"
)

// TestWideNamesAlign: CJK and emoji tenant names (two columns a rune) and
// combining marks keep every column in place, in the Tenants and the
// Statements views; the screen is also a golden file.
func TestWideNamesAlign(t *testing.T) {
	s := incident()
	names := []string{"株式会社テスト", "🚀rocket-🚀", "e\u0301cole", "데이터베이스-팀-서울-본사-운영-환경"}
	for i, n := range names {
		s.Tenants[i].Tenant = n
		s.Statements[i%len(s.Statements)].Tenant = n
	}
	s.ParallelWorkers = 2
	m := New(newFake(Features{Throttle: true, Signal: true}), WithRenderer(asciiRenderer()), WithLocation(time.UTC))
	m.Update(tea.WindowSizeMsg{Width: 110, Height: 14})
	m.Update(snapshotMsg{s})
	screen := m.View()
	col := func(line, cell string) int {
		i := strings.LastIndex(line, cell)
		if i < 0 {
			return -1
		}
		return ansi.StringWidth(line[:i])
	}
	want := -1
	for _, l := range strings.Split(screen, "\n") {
		if !strings.Contains(l, "%") || strings.Contains(l, "⚑") {
			continue
		}
		// The SHARE cell ends each row at the same column.
		i := strings.LastIndex(l, "%")
		c := ansi.StringWidth(l[:i])
		if want < 0 {
			want = c
		} else if c != want {
			t.Errorf("row %q: share ends at column %d, want %d", l, c, want)
		}
	}
	if want < 0 {
		t.Fatal("no rows")
	}
	mustContain(t, screen, "DB load counts 2 parallel workers")
	teatest.RequireEqualOutput(t, []byte(screen+"\n"))

	m.Update(keyOf("3"))
	want = -1
	for _, l := range strings.Split(m.View(), "\n") {
		if c := col(l, "active"); c >= 0 {
			if want < 0 {
				want = c
			} else if c != want {
				t.Errorf("statement %q: state at column %d, want %d", l, c, want)
			}
		}
	}
	_ = api.OtherTenant
}
