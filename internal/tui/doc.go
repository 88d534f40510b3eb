// Package tui is the qtop terminal UI: during an incident it shows which
// tenant is hurting everyone, what it is running, and throttles it.
//
// The root Model holds a state enum (which view is shown, and whether a
// prompt, the filter or the help overlay has the keyboard), one sub-model
// per view (Tenants, Hot keys, Statements, Latency, Enforcement, and the
// drill-in of one tenant), one KeyMap and a shared common (size, styles).
// Every snapshot comes from a Source — the collector's live stream, a
// pg_stat_activity sampler of its own, or an in-process demo collector —
// and every call into it runs inside a tea.Cmd, never in Update or View.
package tui
