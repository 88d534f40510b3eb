// Package store holds the collector's history: per-minute rollups, hot keys,
// sampled statements and the policy audit, behind one interface with an
// embedded (DuckDB) and a clustered (ClickHouse) implementation.
//
// This package is pure Go. The implementations live in subpackages:
// duckstore links DuckDB through cgo, chstore talks ClickHouse's native
// protocol; the application picks one from a --store URL (ParseURL), so
// library packages never link DuckDB.
//
// # Writes are idempotent
//
// Every write path is at-least-once: ClickHouse commits a batch whose reply
// was lost and the client retries it, the spool replays a batch whose write
// may have landed, a collector re-emits a minute when a late report arrives.
// So a rollup is identified by (Minute, Writer, Service, Tenant, Route,
// Kind) and carries a Version that grows each time its writer re-emits it.
// Stores keep the newest version of each identity and sum across writers:
//
//	write  (09:00, c1, api, acme, GET /, request) v1 count 10
//	write  (09:00, c1, api, acme, GET /, request) v1 count 10   retry: no change
//	write  (09:00, c1, api, acme, GET /, request) v2 count 12   late report: replaces
//	write  (09:00, c2, api, acme, GET /, request) v1 count 5    another collector: adds
//	Usage(acme) = 12 + 5 = 17 requests
//
// The package storetest checks every implementation against this fold.
//
// # Nothing lost
//
// Spool wraps a Store: a write the store cannot take goes to a bounded
// on-disk spool and is replayed, oldest first, when it answers again. What
// must be dropped (the spool is full, a spool file is corrupt) is counted on
// qtop_collector_dropped_rows_total and logged.
//
// # Kept as long as asked, erased on request
//
// Both stores are Retainers (Retain removes the history older than a point
// in time, beside writes: DuckDB deletes rows, ClickHouse drops whole daily
// partitions) and TenantErasers (EraseTenant removes one tenant's rows and
// says how many); the Spool passes Retain on. EraseSpooled removes a
// tenant from the batches waiting in a spool folder. Policy audit rows are
// kept by both.
package store
