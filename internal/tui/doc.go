// Package tui is the qtop terminal UI: during an incident it shows which
// tenant is hurting everyone, what it is running, and throttles it.
//
// # Views
//
// The screen is one view at a time, under a title line and the tabs and
// above a status line and the footer. The tabs, keys 1–9 (tab and
// shift+tab cycle them; a narrow tab bar shortens the names of the tabs
// not shown, tabs.go): Tenants (tenants.go), Hot keys (hotkeys.go),
// Statements (statements.go), Latency (latency.go), Enforcement
// (enforcement.go, budgets.go), Locks (locks.go), Freshness
// (freshness.go), Victims (victims.go: the headline's offenders and
// victims by name) and Top SQL (topsql.go: pg_stat_statements per second
// with the tenants seen running each, qtop --postgres). The page, which
// remembers the tab it was opened from (esc goes back): the drill-in of
// one tenant or group, opened by enter on a row (detail.go, history.go).
// The ? screen (help.go) lists every key, in columns that fit the width,
// scrolling (j/k) what the height cannot show.
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
// that work everywhere (views, pause, b, /, enter, esc, t, c, k, A, ?, q),
// gives the others to the view shown, and gives each snapshot to every
// view. Actions and their prompts are in actions.go, the chrome around
// the body in chrome.go.
//
// # The autopilot
//
// A collector's autopilot (autopilot.go) is shown from the snapshot only
// (api.Snapshot.Autopilot): a line under the headline says what it does
// or would do in shadow, or that it is paused; the Enforcement view shows
// its rules, actions (selectable, before the policy's rules) and newest
// decisions. A pauses or resumes it, x ends the action selected (a view's
// own x comes first), each after a y/n prompt, with the admin token, in
// the action log; a replay refuses both.
//
// To add a view, write a file with a type that implements view (and the
// optional interfaces it needs), give it a binding in KeyMap.ViewKeys,
// and register it in New: m.nav.register(true, …) for a tab, false for a
// page.
//
// # The headline
//
// The line under the tabs (incident.go; wrapped between its parts on a
// narrow screen, chrome.go) is computed from the data, never
// from the sort: the share of load is of RU (DB load under --postgres)
// whatever column orders the table. Drivers are weighed against the
// source's history, or against what this qtop saw itself when that is
// longer (a collector that restarted knows nothing before its start);
// victims against a baseline the snapshot carries
// (api.TenantRow.BaselineP95Seconds) or else one kept by this qtop.
// Headline is also what qtop --once --format json prints as "headline".
//
// # PostgreSQL
//
// Under --postgres (postgres.go) each sample also reads the server's
// header figures and pg_stat_statements (pgserver.go turns them into
// rates); the Statements view has a DATABASE column, v shows a
// statement's whole text and e its EXPLAIN (explain.go, on demand only,
// never executed; a statement with parameters cannot be planned on
// PostgreSQL 15 and the view says so). A tenant that session tagging
// wrote as its short id is named once the sampler has read its name in a
// statement's comment (pgactivity); until then, with no collector to map
// the id back, qtop shows the id ("~" and 12 letters and digits) as the
// tenant, its load apart.
//
// # Sources
//
// Every snapshot comes from a Source — the collector's live stream
// (Collector, or Fleet for several), a pg_stat_activity sampler of its
// own (Postgres, which aggregates with pgactivity.Aggregator), a
// recording (Replay) or an in-process demo collector — and every call
// into it runs inside a tea.Cmd, never in Update or View. A lost source
// is retried every second at most (the backoff is capped), so a
// restarted collector is followed again within a second or two. A
// Collector reads with the read token and changes policy with the admin
// token; a refusal names the credential and where it lives. A Recorder
// (--record) refuses an existing file unless told to overwrite, and
// passes the store's history (h) through.
package tui
