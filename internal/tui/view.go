package tui

import (
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/qtop-dev/qtop/api"
)

// A view is one screen of qtop: a tab (Tenants, Hot keys, …, Top SQL)
// or a page reached from one (the drill-in). The root Model holds what
// the views share (common: size, styles, keys, source, query, status
// line) and routes to the view shown through this interface only.
type view interface {
	// name is the view's name, shown in its tab.
	name() string
	// key is the binding that shows the view (zero: none, as for the
	// drill-in, which enter opens on a row).
	key(k *KeyMap) key.Binding
	// set takes a new snapshot; shown says whether the view is on screen.
	set(c *common, s *api.Snapshot, shown bool) tea.Cmd
	// update handles a key the root left to the view shown (c.page rows
	// a page), or a message of the view's own (a fetch's answer); it
	// reports whether msg was the view's.
	update(c *common, msg tea.Msg) (tea.Cmd, bool)
	// view renders the body: at most h lines, none wider than c.width.
	view(c *common, h int) string
	// title is what the view adds to the title line, or "".
	title(c *common) string
}

// What a view may do besides, found by the root with a type assertion.
type (
	// opener is a view with data of its own, asked for when its key
	// shows it and after each snapshot while it is shown, paused or not
	// (the Freshness view asks the source for it).
	opener interface{ open(c *common) tea.Cmd }
	// filterable is a view that / filters.
	filterable interface {
		filter() string
		setFilter(f string)
	}
	// selector is a view whose selected row is a tenant (or group value):
	// t throttles it; enter drills into it from a tab.
	selector interface{ selection() (target, bool) }
	// drillIn is the view enter opens on the selected row of a tab.
	drillIn interface {
		view
		drill(c *common, t target)
	}
	// signaler is a view whose selected (or marked) rows are PostgreSQL
	// backends: c and k cancel or terminate them; sent tells it they were.
	signaler interface {
		targets() []api.StatementRow
		sent()
	}
	// grouper is a view that shows the grouping, told of a change by b
	// before the next snapshot comes.
	grouper interface{ setGroup(g string) }
)

// router holds the views and which one is shown.
type router struct {
	views     []view // the tabs, in order, then the pages
	tabs      int    // len of the tabs
	cur, back view   // the view shown; the tab a page was opened from
}

// register adds views: tabs (numbered in order) or pages. Adding a view is
// a file that implements view and one line in New.
func (r *router) register(tab bool, vs ...view) {
	if tab {
		r.views = append(r.views[:r.tabs], append(vs, r.views[r.tabs:]...)...)
		r.tabs += len(vs)
	} else {
		r.views = append(r.views, vs...)
	}
	if r.cur == nil {
		r.cur, r.back = vs[0], vs[0]
	}
}

// isTab reports whether v is one of the tabs.
func (r *router) isTab(v view) bool {
	for _, t := range r.views[:r.tabs] {
		if t == v {
			return true
		}
	}
	return false
}

// tab is the tab of the view shown (a page's is the tab it came from).
func (r *router) tab() view {
	if !r.isTab(r.cur) {
		return r.back
	}
	return r.cur
}

// tabIndex is the index of the tab shown.
func (r *router) tabIndex() int {
	t := r.tab()
	for i, v := range r.views[:r.tabs] {
		if v == t {
			return i
		}
	}
	return 0
}

// show makes v the view shown: a page remembers the tab it came from.
func (r *router) show(c *common, v view) tea.Cmd {
	if r.cur != v {
		if !r.isTab(v) {
			r.back = r.tab()
		}
		r.cur = v
	}
	if o, ok := v.(opener); ok {
		return o.open(c)
	}
	return nil
}

// step shows the tab d tabs after (before, d < 0) the tab shown.
func (r *router) step(c *common, d int) tea.Cmd {
	return r.show(c, r.views[(r.tabIndex()+d+r.tabs)%r.tabs])
}

// drillIn is the view enter opens, or nil.
func (r *router) drillIn() drillIn {
	for _, v := range r.views {
		if d, ok := v.(drillIn); ok {
			return d
		}
	}
	return nil
}

// The views, and what each does besides.
var (
	_ view = (*tenantsView)(nil)
	_ view = (*hotKeysView)(nil)
	_ view = (*statementsView)(nil)
	_ view = (*latencyView)(nil)
	_ view = (*enforcementView)(nil)
	_ view = (*locksView)(nil)
	_ view = (*freshnessView)(nil)
	_ view = (*victimsView)(nil)
	_ view = (*topSQLView)(nil)

	_ filterable = (*tenantsView)(nil)
	_ filterable = (*hotKeysView)(nil)
	_ filterable = (*statementsView)(nil)
	_ selector   = (*tenantsView)(nil)
	_ selector   = (*hotKeysView)(nil)
	_ selector   = (*statementsView)(nil)
	_ selector   = (*detailView)(nil)
	_ selector   = (*victimsView)(nil)
	_ drillIn    = (*detailView)(nil)
	_ signaler   = (*statementsView)(nil)
	_ signaler   = (*locksView)(nil)
	_ grouper    = (*tenantsView)(nil)
	_ opener     = (*freshnessView)(nil)
	_ shortNamer = (*hotKeysView)(nil)
	_ shortNamer = (*statementsView)(nil)
	_ shortNamer = (*enforcementView)(nil)
	_ shortNamer = (*freshnessView)(nil)
)
