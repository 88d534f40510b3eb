package tui

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/qtop-dev/qtop/api"
)

// countView is a view written for the test: it counts the snapshots it
// is given and the keys x it is sent.
type countView struct{ snaps, xs int }

type countMsg struct{}

func (v *countView) name() string { return "Count" }
func (v *countView) key(*KeyMap) key.Binding {
	return key.NewBinding(key.WithKeys("0"), key.WithHelp("0", "count"))
}
func (v *countView) title(*common) string { return " · counted" }
func (v *countView) set(_ *common, _ *api.Snapshot, _ bool) tea.Cmd {
	v.snaps++
	return nil
}
func (v *countView) update(_ *common, msg tea.Msg) (tea.Cmd, bool) {
	switch msg := msg.(type) {
	case countMsg:
		v.xs += 100
		return nil, true
	case tea.KeyMsg:
		if msg.String() == "x" {
			v.xs++
			return nil, true
		}
	}
	return nil, false
}
func (v *countView) view(c *common, h int) string {
	return "snapshots " + strconv.Itoa(v.snaps) + " xs " + strconv.Itoa(v.xs)
}

// TestRegisterView: a view registered as a tab gets its tab, its key in
// the help, the snapshots, the keys the root leaves and its own messages;
// the root needs nothing else.
func TestRegisterView(t *testing.T) {
	m, _ := newTestModel(t, Features{Throttle: true})
	v := &countView{}
	m.nav.register(true, v)
	m.Update(snapshotMsg{incident()})
	press(m, "x") // in Tenants: not the count view's
	if v.xs != 0 {
		t.Fatalf("a key reached a view not shown: %d", v.xs)
	}
	press(m, "0", "x", "x")
	m.Update(countMsg{})
	if m.nav.cur != v || v.xs != 102 || v.snaps != 1 {
		t.Fatalf("shown %s, xs %d, snapshots %d", m.nav.cur.name(), v.xs, v.snaps)
	}
	screen := m.View()
	mustContain(t, screen, "10 Count", "counted", "snapshots 1 xs 102")
	press(m, "tab")
	if m.nav.cur.name() != "Tenants" {
		t.Fatalf("tab after the last tab: %s", m.nav.cur.name())
	}
	press(m, "?")
	if !regexp.MustCompile(`(\n|  )0 +count\b`).MatchString(m.View()) {
		t.Fatalf("the help lacks the view's key:\n%s", m.View())
	}
}
