// Package collector is the qtop collector server: it merges the reports of
// many processes per window (POST /v1/reports), samples pg_stat_activity,
// writes per-minute rollups to a store through an on-disk spool, serves
// the live API read by the qtop terminal UI (GET /v1/live and
// /v1/live/stream), owns the enforcement policy (GET/POST /v1/policy),
// produces cost-attribution reports (GET /v1/report) and exposes its own
// metrics (/metrics). With Config.Demo it runs a synthetic fleet in
// process through the same ingest path.
//
// # Windows
//
// A report counts in the minute of the middle of its window. The live view
// keeps one-second slots (rates over the last 10 complete seconds,
// histories of 120). A minute's rollups are written once the minute has
// ended and Config.Grace has passed; a report for it that arrives within
// Config.LateKeep after that re-emits the minute's cumulative rows at a
// higher version, which the stores treat as a replacement. A report whose
// window lies outside that horizon or more than a minute in the future (a
// clock that jumped) counts in the minute it arrives. A report whose
// source and sequence number were merged already is acknowledged and not
// counted again.
//
// # Durability
//
// Every accepted report is appended to a write-ahead log (one file per
// minute under DataDir/wal) before it is acknowledged. A collector killed
// mid-minute replays the log on its next start and writes each minute it
// holds again, in full, at a higher version: nothing acknowledged is lost
// and nothing is counted twice. The log of a minute is deleted once its
// rows are in the store (or its spool) and no late report can change them.
//
// # Bounds
//
// Memory is set by capacities, not by the number of tenants: at most
// Config.MaxTenants tenants in the live view and Config.MaxMinuteRows
// tenant×route×kind rows per open minute (the rest is folded into
// "other", with exact totals), key sketches of fixed capacity, 256
// services and 100,000 sources.
package collector
