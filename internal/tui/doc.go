// Package tui is the qtop terminal UI: during an incident it shows which
// tenant is hurting everyone, what it is running, and throttles it.
//
// # Views
//
// The screen is one view at a time, under a title line and the tabs and
// above a status line and the footer. The tabs, keys 1–6 (tab and
// shift+tab cycle them): Tenants (tenants.go), Hot keys (hotkeys.go),
// Statements (statements.go), Latency (latency.go), Enforcement
// (enforcement.go, budgets.go) and Locks (locks.go). The pages, which
// remember the tab they were opened from (esc goes back): the drill-in of
// one tenant or group, opened by enter on a row (detail.go, history.go),
// and Freshness, key 7 (freshness.go).
//
// Every view implements one interface, view (view.go): its name and key,
// set (a new snapshot), update (a key the root left to it, or a message
// of its own such as a fetched history), view (the body in h lines) and
// title (what it adds to the title line). What only some views do is an
// optional interface the root finds by type assertion: filterable (/),
// selector (the tenant t throttles and enter drills into), drillIn,
// signaler (the backends c and k cancel or terminate), grouper (b) and
// opener.
//
// The root Model (model.go) holds what the views share, in common: the
// size, the styles, the KeyMap, the clock, the source, the query asked of
// it and the status line; and who has the keyboard (the views, the /
// filter, a throttle or cancel prompt, the ? help). It handles the keys
// that work everywhere (views, pause, b, /, enter, esc, t, c, k, ?, q),
// gives the others to the view shown, and gives each snapshot to every
// view. Actions and their prompts are in actions.go, the chrome around
// the body in chrome.go.
//
// To add a view, write a file with a type that implements view (and the
// optional interfaces it needs), give it a binding in KeyMap.ViewKeys,
// and register it in New: m.nav.register(true, …) for a tab, false for a
// page.
//
// # Sources
//
// Every snapshot comes from a Source — the collector's live stream
// (Collector, or Fleet for several), a pg_stat_activity sampler of its
// own (Postgres, which aggregates with pgactivity.Aggregator), a
// recording (Replay) or an in-process demo collector — and every call
// into it runs inside a tea.Cmd, never in Update or View.
package tui
