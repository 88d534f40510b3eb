// Package collector is the qtop collector server: it merges the reports of
// many processes per window (POST /v1/reports), samples pg_stat_activity,
// writes per-minute rollups to a store through an on-disk spool, serves
// the live API read by the qtop terminal UI (GET /v1/live and
// /v1/live/stream), owns the enforcement policy (GET/POST /v1/policy),
// produces cost-attribution reports (GET /v1/report) and exposes its own
// metrics (/metrics). With Config.Demo it runs a synthetic fleet in
// process through the same ingest path. With Config.RLSListen it answers
// gateways' rate-limit calls (Envoy's API, made by cmd/collector through
// Config.RLS) from the policy and the fleet quotas in memory (rls.go).
//
// # Windows
//
// A report counts in the minute of the middle of its window. The live view
// keeps one-second slots (rates over the last 10 complete seconds,
// histories of 120; a tenant under a rule made less than 10 s ago has its
// rates from the second after the processes applied it, so a throttle's
// effect shows at once); a report counts in the second it arrives, unless
// it waited lateAfter (3 s) or more at its reporter (report.AgeHeader: a
// backlog sent after an outage), which counts in its minute only. A
// minute's rollups are written once the minute has ended and Config.Grace
// has passed; a report for it that arrives within Config.LateKeep after
// that re-emits the minute's cumulative rows at a higher version, which
// the stores treat as a replacement. A report whose
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
// With Config.ListenFirst (`collector serve`) the restarted collector
// listens before it replays (replay.go): a minute of 5,000 reports a second
// takes tens of seconds to replay, and a liveness probe must not kill it
// meanwhile. Until the replay ends /healthz answers, /readyz and every
// other door answer 503 with Retry-After (the processes keep their reports
// and send them again), and OTLP/gRPC and the rate-limit service answer
// each call Unavailable, saying why, after its credential.
//
// The data directory keeps Config.DiskReserve bytes free (disk.go): below
// that, reports are refused with 503 and Retry-After before they are
// read, the closed minutes still have room for the spool, and reports are
// taken again as soon as space comes back, without a restart. /readyz
// answers 503 with the reason while the collector refuses for disk, its
// log's folder is not writable, its spool is full of a store it cannot
// reach, its shared policy was never read, or it is replaying its log;
// /healthz is liveness only.
//
// # Bounds
//
// Memory is set by capacities, not by the number of tenants: at most
// Config.MaxTenants tenants in the live view (~6.5 KB each when busy;
// beyond them a tenant counts under "other" until, heavier than the
// lightest live tenant twice over, it takes its place: promote.go)
// and Config.MaxMinuteRows tenant×route×kind rows per open minute
// (~0.55 KB each; the rest is folded into "other", with exact totals;
// BenchmarkTenantsHeap measures both), key sketches of fixed capacity, 256
// services and Config.MaxSources established sources (newcomers wait on
// probation beside them and cannot evict them). A report's decode memory
// is bounded by ingest.DecodeBudget of its body, and all decodes at once
// by a fixed budget; a body whose header cannot be decoded is refused
// before it takes a decode slot.
//
// "other" names only these overflow rows. A report's row whose tenant or
// route is not a valid tag value counts under that name's stand-in
// (tenant.Substitute, tenant.SubstituteRoute), alone: the rest of the
// report is merged as sent, and the row is counted once in
// qtop_collector_invalid_tags_total. The counters of database budgets and
// runaway rules the policy does not have are summed under "other" in the
// metrics (and beyond 1,024 ids a second in the live view); a budget or
// rule really named "other" counts under its stand-in (api.BudgetName).
//
// # Baselines
//
// Each tenant's usual p95, share of RU and RU/s (baseline.go) are learnt
// per minute over the trailing hour, served in the live view, saved in
// DataDir and read back at start; so are the DB load of a tenant no
// process reports and the seconds learnt in each minute, so that after a
// restart the book's detector knows what load each tenant had before it
// (none, for one absent from them) and keeps flagging a job it flagged.
// Incidents do not teach them, nor does a temporary limit: a tenant held
// by a throttle rule in force (the autopilot's, or one written by hand
// such as qtop's t), a quota rule the autopilot wrote, or an enforced
// budget in force that the autopilot wrote or that expires, is not learnt
// while it holds, and its load is left out of the total the other
// tenants' shares are taken of. A quota written by hand (a plan, posted
// again before it expires) and a budget with no expiry are part of the
// tenant's normal and do not stop the learning; nor does a shadow or
// price rule or a warn budget.
//
// # Hostile input
//
// Every string of a report is made printable UTF-8 at ingest
// (tenant.Clean, counted); values above ingest's bounds are refused with
// 400 out_of_range; merged sums saturate. A batch the store refuses goes to
// a dead-letter file of the spool and the queue moves on; a spool that does
// not drain makes the store unhealthy.
//
// # Credentials
//
// Three roles, each with its token — report (Config.Token), read
// (Config.ReadToken), admin (Config.AdminToken, generated and kept in
// DataDir when not given) — are checked by Server.Authorize, which every
// intake calls. The peer credential (Config.PeerToken) is a read
// credential too: collectors send it to their peers. Tokens kept in files
// (Config.TokenFiles, and the generated admin-token) are read again every
// second and a changed one replaces the old at once (tokenfiles.go). With Config.TLS (a
// certificate, a key and an optional client CA for mTLS; package
// tlsfiles, reloaded when the files change) the HTTP listener and the
// OTLP/gRPC one serve TLS; Config.PeerTLS is how the collector reaches
// https:// peers. New refuses a listener off loopback without TLS or
// without the report and read tokens (OTLP/gRPC: TLS and the report
// token) unless Config.Insecure.
//
// # Parts
//
// The Server composes parts with one job each, each under its own lock,
// like the components of the OpenTelemetry Collector (a config checked
// in one place, a constructor, a start where it has goroutines); the
// Server holds no feature logic:
//
//   - intake (sources.go, screen.go, door.go): the front door for
//     reports — POST /v1/reports, decode slots and memory, refusals held
//     back, admission, the duplicate filter — under the server's lock,
//     held twice, briefly, per report;
//   - the open minutes (minutes.go) with their write-ahead log (wal.go)
//     and its replay, under the server's lock;
//   - the aggregator (aggregate.go): each minute's rows and every
//     tenant's live windows in 16 shards by tenant hash, each under its
//     own lock; the rows merge shard by shard without the server's lock;
//   - the emitter (emit.go): closed minutes to the store through the
//     spool (storeopen.go, lazystore.go), versions, the store's health;
//   - the live view (merge.go, window.go, snapshot.go): services, hot
//     keys, reports per second, and the snapshots made of every part;
//     streams (stream.go) serve them;
//   - the policy (policy.go, rulecheck.go, audit.go): one commit path,
//     the audit, the reply that carries the policy;
//   - one feature per report section (feature.go), each doing its merge,
//     its reply contribution, its snapshot contribution and its tick
//     behind one interface the Server calls in a loop: fleet quotas
//     (quota.go), budgets and runaway rules (budgets.go, runaway.go),
//     freshness (freshness.go), enforcement detail and pool waits
//     (enforcepart.go, poolwait.go);
//   - the PostgreSQL sampler (pg.go), the peers and the shared policy
//     (fleet.go, fleet_policy.go; a peer's answer is checked like a
//     report in peeranswer.go), the disk guard (disk.go), the policy
//     view of each process's reply (policyview.go, a feature), the OTLP
//     receiver (otlp.go), the demo fleet (demo.go), credentials
//     (auth.go), the engines' logins — ClickHouse's and Redis's user,
//     password and TLS from the environment, and the one Redis client
//     constructor (engines.go) — and the HTTP API (httpAPI: each
//     handler in its part's file).
//
// Locks are taken in one order: the server's first; then a feature's,
// the sampler's or the emitter's; the policy's after a feature's; a
// shard's last (nothing is locked while it is held). Decoding, string
// checks and the rows' shard order run before any lock.
//
// A report refused for what it is (400, 401, 413, 415) is answered after
// Config.RefusalDelay, so a client sending junk in a loop is slowed down.
package collector
