package tui

import (
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
)

// KeyMap is every key binding of the UI, in one place. Its zero value is
// empty: use DefaultKeyMap.
type KeyMap struct {
	Tenants, HotKeys, Statements, Latency, Enforcement key.Binding
	Locks                                              key.Binding
	Freshness                                          key.Binding
	NextView, PrevView                                 key.Binding
	Up, Down, PageUp, PageDown, Home, End              key.Binding
	Sort, Reverse, Filter, GroupBy                     key.Binding
	Select, History                                    key.Binding
	Enter, Back                                        key.Binding
	Pause, Throttle, Cancel, Terminate                 key.Binding
	Help, Quit                                         key.Binding
}

// DefaultKeyMap returns the bindings: 1–6 and tab switch views, s sorts,
// / filters, b changes the grouping, enter drills in, p pauses, t
// throttles, space marks statements, c and k cancel or terminate the
// marked (or selected) backends, ? shows help, q quits.
func DefaultKeyMap() KeyMap {
	b := func(keys []string, k, help string) key.Binding {
		return key.NewBinding(key.WithKeys(keys...), key.WithHelp(k, help))
	}
	return KeyMap{
		Tenants:     b([]string{"1"}, "1", "tenants"),
		HotKeys:     b([]string{"2"}, "2", "hot keys"),
		Statements:  b([]string{"3"}, "3", "statements"),
		Latency:     b([]string{"4"}, "4", "latency"),
		Enforcement: b([]string{"5"}, "5", "enforcement"),
		Locks:       b([]string{"6"}, "6", "locks"),
		Freshness:   b([]string{"7"}, "7", "freshness"),
		NextView:    b([]string{"tab"}, "tab", "views"),
		PrevView:    b([]string{"shift+tab"}, "shift+tab", "previous view"),
		Up:          b([]string{"up", "ctrl+p"}, "↑", "up"),
		Down:        b([]string{"down", "ctrl+n"}, "↓", "down"),
		PageUp:      b([]string{"pgup"}, "pgup", "page up"),
		PageDown:    b([]string{"pgdown"}, "pgdn", "page down"),
		Home:        b([]string{"home", "g"}, "home", "first row"),
		End:         b([]string{"end", "G"}, "end", "last row"),
		Sort:        b([]string{"s"}, "s", "sort"),
		Reverse:     b([]string{"S"}, "S", "reverse order"),
		Filter:      b([]string{"/"}, "/", "filter"),
		GroupBy:     b([]string{"b"}, "b", "group by (--postgres)"),
		Select:      b([]string{" "}, "space", "mark statement"),
		History:     b([]string{"h"}, "h", "history (drill-in, [ ])"),
		Enter:       b([]string{"enter"}, "enter", "drill in"),
		Back:        b([]string{"esc", "backspace"}, "esc", "back"),
		Pause:       b([]string{"p"}, "p", "pause"),
		Throttle:    b([]string{"t"}, "t", "throttle"),
		Cancel:      b([]string{"c"}, "c", "cancel statement (--postgres)"),
		Terminate:   b([]string{"k"}, "k", "terminate backend (--postgres)"),
		Help:        b([]string{"?"}, "?", "help"),
		Quit:        b([]string{"q", "ctrl+c"}, "q", "quit"),
	}
}

// ShortHelp is the footer line (help.KeyMap).
func (k KeyMap) ShortHelp() []key.Binding {
	return []key.Binding{k.Enter, k.Throttle, k.Sort, k.Filter, k.GroupBy, k.NextView, k.Help, k.Quit}
}

// FullHelp is the ? overlay (help.KeyMap).
func (k KeyMap) FullHelp() [][]key.Binding {
	return [][]key.Binding{
		{k.Tenants, k.HotKeys, k.Statements, k.Latency, k.Enforcement, k.Locks, k.Freshness, k.NextView, k.PrevView},
		{k.Up, k.Down, k.PageUp, k.PageDown, k.Home, k.End},
		{k.Sort, k.Reverse, k.Filter, k.GroupBy, k.Enter, k.History, k.Back},
		{k.Throttle, k.Select, k.Cancel, k.Terminate, k.Pause, k.Help, k.Quit},
	}
}

type keyMsg = tea.KeyMsg

func matches(m keyMsg, b ...key.Binding) bool { return key.Matches(m, b...) }
