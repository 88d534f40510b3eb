// Package pgactivity samples PostgreSQL's pg_stat_activity and turns the
// samples into per-tenant database load.
//
// A Sampler reads every client backend once per call (Sample) or once per
// interval (Run), and reads each statement's sqlcommenter tags
// (/*route='GET%20%2Fr',tenant='acme'*/) back with sqlcomment.Parse, so every
// running statement carries the tenant it works for. Sessions tagged in
// application_name instead (sqlcomment.ModeSession: "billing|t=acme|T2")
// are read with sqlcomment.ParseApplicationName: Application stays the
// service, and a tenant written as its short id (a long or non-ASCII name)
// is named through WithTenantNames or, without it or when it does not
// know the id, by the Sampler itself once it has read the name in a
// statement's comment (the id is the name's hash, so the name is
// checked): the tenant then counts under one name whichever way its
// sessions are tagged. An id that neither has named is kept as the
// tenant, "~" and 12 letters and digits: its load is told apart from
// every other tenant's, under the id. A tenant that is not a valid name (tenant.ValidateTenant)
// cannot be refused here: it counts under its stand-in (tenant.Substitute),
// never with another tenant, and is counted (Backend.InvalidTenant,
// Metrics). An Aggregator adds the
// snapshots of a window and cuts them into a Window: per tenant the average
// active sessions (AAS, the measure of Amazon RDS Performance Insights: the
// mean over samples of the number of active sessions) split by wait-event
// type ("CPU" for active sessions waiting on nothing), the longest-running
// statements, and the blocked/blocking pairs found with pg_blocking_pids.
// With GroupBy it groups by any session field instead of the tenant;
// MergeTenants joins consecutive windows (windows cut after each sample
// and merged n at a time give a sliding window of n samples, as qtop
// --postgres shows). Cancel and Terminate stop a backend.
//
// The sampler needs only a role with pg_monitor (or pg_read_all_stats):
//
//	CREATE ROLE qtop_monitor LOGIN PASSWORD '…';
//	GRANT pg_monitor TO qtop_monitor;
//
// Without it PostgreSQL hides the statements of other roles; Sample then
// still returns what it could see, together with an error wrapping
// ErrInsufficientPrivilege that names the missing grant. Cancel and
// Terminate need pg_signal_backend (or the same role as the target).
//
// The package is pure Go (pgx); it starts no goroutine of its own.
package pgactivity

import "errors"

// Errors returned by the package; test with errors.Is.
var (
	// ErrInsufficientPrivilege: the role cannot see or signal other roles'
	// sessions. Sample returns it together with a usable snapshot.
	ErrInsufficientPrivilege = errors.New("pgactivity: insufficient privilege")
	// ErrNoBackend: Cancel or Terminate was given a pid that is not a
	// PostgreSQL backend (it may have ended already).
	ErrNoBackend = errors.New("pgactivity: no such backend")
	// ErrBadPID: Cancel or Terminate was given a pid that cannot be one.
	ErrBadPID = errors.New("pgactivity: invalid pid")
	// ErrSample: reading pg_stat_activity failed.
	ErrSample = errors.New("pgactivity: sample failed")
)
