package tui

import (
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
)

// KeyMap is every key binding of the UI, in one place, in four groups
// (their fields are promoted: k.Up is k.NavKeys.Up). Its zero value is
// empty: use DefaultKeyMap.
type KeyMap struct {
	ViewKeys
	NavKeys
	RowKeys
	ActionKeys
}

// ViewKeys show the views: one per view, and the next or previous tab.
type ViewKeys struct {
	Tenants, HotKeys, Statements, Latency, Enforcement key.Binding
	Locks                                              key.Binding
	Freshness, Victims, TopSQL                         key.Binding
	NextView, PrevView                                 key.Binding
}

// NavKeys move in a view's rows, into the drill-in and back.
type NavKeys struct {
	Up, Down, PageUp, PageDown, Home, End key.Binding
	Enter, Back                           key.Binding
}

// RowKeys order, filter, group and mark the rows of a view.
type RowKeys struct {
	Sort, Reverse, Filter, GroupBy key.Binding
	Select, History, Full, Explain key.Binding
}

// ActionKeys act on what is selected, or on the UI.
type ActionKeys struct {
	Pause, Throttle, Cancel, Terminate key.Binding
	// AutopilotPause pauses or resumes the collector's autopilot;
	// AutopilotCancel ends the autopilot action selected, or lifts the
	// policy rule selected (Enforcement).
	AutopilotPause, AutopilotCancel key.Binding
	Help, Quit                      key.Binding
}

// DefaultKeyMap returns the bindings: 1–9 and tab switch views, s sorts,
// / filters, b changes the grouping, enter drills in, p pauses, t
// throttles, space marks statements, c and k cancel or terminate the
// marked (or selected) backends, A pauses or resumes the autopilot, x
// ends its action selected, ? shows help, q quits.
func DefaultKeyMap() KeyMap {
	b := func(keys []string, k, help string) key.Binding {
		return key.NewBinding(key.WithKeys(keys...), key.WithHelp(k, help))
	}
	return KeyMap{
		ViewKeys: ViewKeys{
			Tenants:     b([]string{"1"}, "1", "tenants"),
			HotKeys:     b([]string{"2"}, "2", "hot keys"),
			Statements:  b([]string{"3"}, "3", "statements"),
			Latency:     b([]string{"4"}, "4", "latency"),
			Enforcement: b([]string{"5"}, "5", "enforcement"),
			Locks:       b([]string{"6"}, "6", "locks"),
			Freshness:   b([]string{"7"}, "7", "freshness"),
			Victims:     b([]string{"8"}, "8", "victims"),
			TopSQL:      b([]string{"9"}, "9", "top SQL"),
			NextView:    b([]string{"tab"}, "tab", "views"),
			PrevView:    b([]string{"shift+tab"}, "shift+tab", "previous view"),
		},
		NavKeys: NavKeys{
			Up:       b([]string{"up", "ctrl+p"}, "↑", "up"),
			Down:     b([]string{"down", "ctrl+n"}, "↓", "down"),
			PageUp:   b([]string{"pgup"}, "pgup", "page up"),
			PageDown: b([]string{"pgdown"}, "pgdn", "page down"),
			Home:     b([]string{"home", "g"}, "home", "first row"),
			End:      b([]string{"end", "G"}, "end", "last row"),
			Enter:    b([]string{"enter"}, "enter", "drill in"),
			Back:     b([]string{"esc", "backspace"}, "esc", "back"),
		},
		RowKeys: RowKeys{
			Sort:    b([]string{"s"}, "s", "sort"),
			Reverse: b([]string{"S"}, "S", "reverse order"),
			Filter:  b([]string{"/"}, "/", "filter"),
			GroupBy: b([]string{"b"}, "b", "group by (--postgres)"),
			Select:  b([]string{" "}, "space", "mark statement"),
			History: b([]string{"h"}, "h", "history ([ ], any tenant)"),
			Full:    b([]string{"v"}, "v", "full query text"),
			Explain: b([]string{"e"}, "e", "EXPLAIN (--postgres)"),
		},
		ActionKeys: ActionKeys{
			Pause:           b([]string{"p"}, "p", "pause"),
			Throttle:        b([]string{"t"}, "t", "throttle"),
			Cancel:          b([]string{"c"}, "c", "cancel statement (PostgreSQL)"),
			Terminate:       b([]string{"k"}, "k", "terminate backend (PostgreSQL)"),
			AutopilotPause:  b([]string{"A"}, "A", "pause/resume autopilot"),
			AutopilotCancel: b([]string{"x"}, "x", "end autopilot action, lift rule (5)"),
			Help:            b([]string{"?"}, "?", "help"),
			Quit:            b([]string{"q", "ctrl+c"}, "q", "quit"),
		},
	}
}

// ShortHelp is the footer line (help.KeyMap).
func (k KeyMap) ShortHelp() []key.Binding {
	return []key.Binding{k.Enter, k.Throttle, k.Sort, k.Filter, k.GroupBy, k.NextView, k.Help, k.Quit}
}

// FullHelp is the ? overlay (help.KeyMap).
func (k KeyMap) FullHelp() [][]key.Binding {
	return [][]key.Binding{
		{k.Tenants, k.HotKeys, k.Statements, k.Latency, k.Enforcement, k.Locks, k.Freshness, k.Victims, k.TopSQL, k.NextView, k.PrevView},
		{k.Up, k.Down, k.PageUp, k.PageDown, k.Home, k.End},
		{k.Sort, k.Reverse, k.Filter, k.GroupBy, k.Enter, k.History, k.Full, k.Back},
		{k.Throttle, k.Select, k.Cancel, k.Terminate, k.Explain, k.AutopilotPause, k.AutopilotCancel, k.Pause, k.Help, k.Quit},
	}
}

type keyMsg = tea.KeyMsg

func matches(m keyMsg, b ...key.Binding) bool { return key.Matches(m, b...) }
