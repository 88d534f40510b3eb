// Package pilotpg holds the autopilot's scenario on a real PostgreSQL: an
// in-process collector with the default autopilot rule, two agent
// processes of one service running every tenant's work as agent jobs
// through database/sql (pgx, statements commented per tenant), small
// tenants' point reads and writes at a steady rate (the victims), and one
// tenant's pgbench-like branch scans (the noise, testdata/pgbench's
// noisy-tagged.sql) rising from one a second to eight workers back to back.
// The fleet quota the autopilot writes reaches both agents in their
// report replies and slows the noisy tenant at the source.
//
// The package has no code of its own, only the test; it runs on real time
// against a real server, for about two and a half minutes, so it is
// opt-in:
//
//	eval "$(./scripts/services env)"
//	QTOP_AUTOPILOT_PG=1 go test -count=1 -v -run AutopilotOnPostgres ./internal/pilotpg/
//
// It asserts order and effect — the apply comes after the noise starts,
// names the noisy tenant, the victims recover after it, the offender
// still admits work, slower; the same scenario in shadow applies to the
// same tenant within one interval of it and refuses nothing — and logs the
// timings, which bench/README.md keeps.
package pilotpg
