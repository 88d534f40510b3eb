// Package api is the JSON contract of the collector's live API, read by
// the qtop terminal UI: GET /v1/live returns one Snapshot, and
// GET /v1/live/stream sends one Snapshot per second as a server-sent event
// ("event: snapshot", "data: <json>").
//
// Both endpoints take the query parameters
//
//	by=ru|db|req|err|p95   the measure that orders Tenants (default ru)
//	n=20                   how many tenants before the "other" row (1…1000)
//
// Client is an HTTP client for the API.
package api

import (
	"time"

	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/tenant"
)

// Paths of the collector's HTTP API.
const (
	PathLive    = "/v1/live"
	PathStream  = "/v1/live/stream"
	PathPolicy  = "/v1/policy"
	PathReports = "/v1/reports"
	PathReport  = "/v1/report"
	// PathAudit is GET /v1/audit?from=…&to=… (admin token): the policy
	// changes, expiries included.
	PathAudit = "/v1/audit"
	// PathHistory serves one tenant's per-minute history from the store:
	// GET /v1/history?tenant=NAME&minutes=1440 (1…MaxHistoryMinutes).
	// tenant=other is the tenant of that name, stored under its stand-in
	// (tenant.Escape), not the overflow row.
	PathHistory = "/v1/history"
)

// MaxHistoryMinutes bounds a history request: the last 24 hours.
const MaxHistoryMinutes = 24 * 60

// History is one tenant's load per minute from the collector's store,
// oldest first; minutes without load are left out.
type History struct {
	Tenant string         `json:"tenant"`
	From   time.Time      `json:"from"`
	To     time.Time      `json:"to"`
	Points []HistoryPoint `json:"points"`
}

// HistoryPoint is one minute of a tenant's load, averaged over the minute.
type HistoryPoint struct {
	Minute    time.Time `json:"minute"`
	DBLoad    float64   `json:"db_load"`
	RUPerSec  float64   `json:"ru_per_sec"`
	ReqPerSec float64   `json:"req_per_sec"`
	ErrPerSec float64   `json:"err_per_sec"`
	// P95Seconds is the p95 latency of the tenant's requests and jobs in
	// the minute, from the store's histograms (0: none).
	P95Seconds float64 `json:"p95_seconds,omitempty"`
}

// Measures that order Snapshot.Tenants.
const (
	MeasureRU  = "ru"  // request units per second
	MeasureDB  = "db"  // database load, average active sessions
	MeasureReq = "req" // requests per second
	MeasureErr = "err" // errors per second
	MeasureP95 = "p95" // p95 latency
)

// Sources of a snapshot.
const (
	SourceCollector = "collector"
	SourcePostgres  = "postgres" // only the pg_stat_activity sampler reports
	SourceDemo      = "demo"
)

// Groupings of Snapshot.Tenants (the query parameter group=, qtop's
// --group-by). Only the pg_stat_activity sampler of qtop --postgres knows
// the session fields to group by; a collector groups by tenant.
const (
	GroupTenant      = "tenant"
	GroupApplication = "application" // application_name
	GroupUser        = "user"
	GroupDatabase    = "database"
	GroupClient      = "client" // client_addr
	GroupFingerprint = "fingerprint"
)

// Groups lists the groupings in the order qtop's key cycles through them.
var Groups = []string{GroupTenant, GroupApplication, GroupUser, GroupDatabase, GroupClient, GroupFingerprint}

// OtherTenant names the final row of Snapshot.Tenants: the exact totals of
// every tenant beyond the top N. A tenant really named so has a row of its
// own under its stand-in (tenant.Escape), so this row is never a tenant.
const OtherTenant = tenant.Other

// HistoryLen is the number of per-second points of every History series.
const HistoryLen = 120

// Snapshot is the live state of the collector at Time. Rates are per
// second averaged over Window; histories hold one point per second, oldest
// first, the last point being the second that ended at Time.
type Snapshot struct {
	Time    time.Time     `json:"time"`
	Window  time.Duration `json:"window_ns"`
	Source  string        `json:"source"`
	Measure string        `json:"measure"`
	// Tenants are the top N tenants by Measure, then, when more tenants
	// were seen, a final row with Tenant "other" holding their exact totals.
	Tenants []TenantRow `json:"tenants"`
	// TenantsSeen counts the distinct tenants with load in Window (the
	// tenants summed in "other" included).
	TenantsSeen int `json:"tenants_seen"`
	// GroupBy is what Tenants are grouped by (GroupTenant … ); "" means
	// GroupTenant. Under another grouping TenantRow.Tenant holds the
	// group's value (an application_name, a role, …).
	GroupBy string `json:"group_by,omitempty"`
	// ParallelWorkers counts the parallel workers active in the last
	// sample: each is load of its leader's group, which is why DB load can
	// exceed the number of client sessions.
	ParallelWorkers int `json:"parallel_workers,omitempty"`
	// XminHolders are the sessions holding the oldest snapshots
	// (backend_xmin), oldest first: they keep VACUUM from removing dead
	// rows (from the sampler, at most 10).
	XminHolders []StatementRow `json:"xmin_holders,omitempty"`
	// Server is the PostgreSQL server's header (qtop --postgres): TPS,
	// sessions by state, cache hit ratio, database size and growth.
	Server *ServerRow `json:"server,omitempty"`
	// TopSQL are pg_stat_statements' statements by execution time per
	// second over the last interval (qtop --postgres), with the tenants
	// seen running each; TopSQLError says why there are none.
	TopSQL      []TopSQLRow `json:"top_sql,omitempty"`
	TopSQLError string      `json:"top_sql_error,omitempty"`
	// HotKeys are the hottest keys over Window, merged across processes,
	// with their Space-Saving error bounds.
	HotKeys []HotKeyRow `json:"hot_keys"`
	// Statements are the longest running statements seen by the
	// pg_stat_activity sampler (empty without --postgres).
	Statements []StatementRow `json:"statements"`
	// Blocked are blocked/blocking statement pairs from the sampler.
	Blocked     []BlockRow     `json:"blocked,omitempty"`
	Services    []ServiceRow   `json:"services"`
	Enforcement EnforcementRow `json:"enforcement"`
	// PoolWait is connection-pool wait per tenant over Window, most
	// waited first (at most MaxPoolWaitRows).
	PoolWait []PoolWaitRow `json:"pool_wait,omitempty"`
	// Budgets are the database budgets and runaway rules with their
	// counters over Window (budgets.go).
	Budgets []BudgetRow `json:"budgets,omitempty"`
	// Policy is the collector's policy; only rules active at Time.
	Policy policy.Policy `json:"policy"`
	// AppliedBy counts the processes that can apply Policy (OTLP
	// services apply nothing); its Note is shown with the policy.
	AppliedBy *AppliedBy `json:"applied_by,omitempty"`
	// Unapplied are the tenant rules of Policy in force that no process
	// applies to their tenant's load as it is now.
	Unapplied []Unapplied `json:"unapplied,omitempty"`
	// Autopilot is the autopilot's status: its actions and newest
	// decisions (nil when the policy has no autopilot rules).
	Autopilot *AutopilotStatus `json:"autopilot,omitempty"`
	Collector CollectorStatus  `json:"collector"`
	// Peers, in a fleet snapshot (a collector with peers, see Merge), says
	// which collectors' snapshots it holds: first the collector itself,
	// once ("self", or "URL (self)" when its own address is among its
	// peers), then each other peer.
	Peers []PeerStatus `json:"peers,omitempty"`
}

// TenantRow is one tenant's load over the snapshot's window.
type TenantRow struct {
	Tenant string `json:"tenant"`
	// Untagged marks the row of the load without a value for the grouping
	// (statements without a tenant tag, sessions without an
	// application_name, …); its Tenant is "" (qtop --postgres) or
	// tenant.Untagged (a collector's rows). It is never merged with a
	// tenant of any name.
	Untagged bool `json:"untagged,omitempty"`
	// Tier is the tier of the tenant's most recent work ("" unknown).
	Tier string `json:"tier,omitempty"`
	// DBLoad is database load in average active sessions: statement time
	// per second reported by the processes, or sampled from
	// pg_stat_activity, whichever is larger.
	DBLoad     float64 `json:"db_load"`
	RUPerSec   float64 `json:"ru_per_sec"`
	ReqPerSec  float64 `json:"req_per_sec"`
	ErrPerSec  float64 `json:"err_per_sec"`
	P95Seconds float64 `json:"p95_seconds"`
	// Share is the tenant's share (0–1) of the total of Snapshot.Measure.
	Share float64 `json:"share"`
	// Throttled is true when an active, non-shadow policy rule throttles
	// or prices the tenant.
	Throttled bool `json:"throttled"`
	// Waits is DB load by wait-event type ("CPU" when active without a
	// wait), from the sampler.
	Waits map[string]float64 `json:"waits,omitempty"`
	// History is RU per second (DB load when Measure is db), HistoryLen
	// points, oldest first.
	History []float64 `json:"history"`
	// Routes are the tenant's busiest routes by Measure (at most 10).
	Routes []RouteRow `json:"routes,omitempty"`
	// BaselineP95Seconds and BaselineShare are the tenant's baseline p95
	// and share of RU, when the source keeps baselines (0: it does not,
	// and qtop uses what it saw itself). Optional: a collector that sends
	// them gives every qtop the same victims.
	BaselineP95Seconds float64 `json:"baseline_p95_seconds,omitempty"`
	BaselineShare      float64 `json:"baseline_share,omitempty"`
	// BaselineRUPerSec is the tenant's baseline RU per second from the
	// same source (0: none): the headline's offenders are judged against
	// it, so an offender stays flagged for as long as its load stays
	// above it, not only while its rise is recent.
	BaselineRUPerSec float64 `json:"baseline_ru_per_sec,omitempty"`
	// BaselineDBLoad is, for a row with DB load and no RU (judged on DB
	// load, whose rise no RU shows), its DB-load baseline from the same
	// source, or, for a row the source flagged (FlaggedSince) before that
	// baseline exists, the DB load it was flagged against (0 with
	// FlaggedSince: new load; 0 without: none).
	BaselineDBLoad float64 `json:"baseline_db_load,omitempty"`
	// FlaggedSince is when the source's own detector (package incident,
	// on its baselines) flagged the tenant, or the untagged row, as an
	// offender; zero: it does not. A row that carries it, BaselineRUPerSec
	// or BaselineDBLoad is judged by the source: every client names the
	// same offenders, however late it started or if it reads once.
	FlaggedSince time.Time `json:"flagged_since,omitzero"`
	// SlowSince is when the source's detector began to see the tenant's
	// p95 pass the victim test without a break (a dip under the line of a
	// second or two, under incident.VictimDip of the window, is none, and
	// SlowSince is served through it; zero: it has not passed the test
	// in that time, or the source has no detector). A tenant of a few
	// requests a window is named a victim alone only once that outlasts
	// the window (package incident), so every reader names it as the
	// source does.
	SlowSince time.Time `json:"slow_since,omitzero"`
}

// RouteRow is one route of a tenant.
type RouteRow struct {
	Route      string  `json:"route"`
	DBLoad     float64 `json:"db_load"`
	RUPerSec   float64 `json:"ru_per_sec"`
	ReqPerSec  float64 `json:"req_per_sec"`
	ErrPerSec  float64 `json:"err_per_sec"`
	P95Seconds float64 `json:"p95_seconds"`
	// BaselineP95Seconds is the route's usual p95 from a collector that
	// keeps baselines (the median of its complete minutes of the trailing
	// hour, as TenantRow.BaselineP95Seconds); 0: none yet. The headline's
	// victim test asks for a route slower than it (package incident).
	BaselineP95Seconds float64 `json:"baseline_p95_seconds,omitempty"`
}

// HotKeyRow is one hot key. Its true count lies in [Count−Err, Count].
type HotKeyRow struct {
	Key    string `json:"key"`
	Tenant string `json:"tenant,omitempty"`
	Count  uint64 `json:"count"`
	Err    uint64 `json:"err"`
	// Share is Count over all keyed work in the window (0–1).
	Share float64 `json:"share"`
}

// StatementRow is one running statement sampled from pg_stat_activity.
type StatementRow struct {
	PID           int32         `json:"pid"`
	Tenant        string        `json:"tenant"`
	Route         string        `json:"route,omitempty"`
	Application   string        `json:"application,omitempty"`
	State         string        `json:"state"`
	WaitEventType string        `json:"wait_event_type,omitempty"`
	WaitEvent     string        `json:"wait_event,omitempty"`
	Duration      time.Duration `json:"duration_ns"`
	Query         string        `json:"query"`
	BlockedBy     []int32       `json:"blocked_by,omitempty"`
	// Session fields, from the sampler.
	User     string `json:"user,omitempty"`
	Database string `json:"database,omitempty"`
	Client   string `json:"client,omitempty"`
	// QueryStart, XactStart and BackendStart identify what a cancel or a
	// terminate acts on: the statement, the transaction, the session.
	QueryStart   time.Time `json:"query_start,omitzero"`
	XactStart    time.Time `json:"xact_start,omitzero"`
	BackendStart time.Time `json:"backend_start,omitzero"`
	// XminAge is the age in transactions of the session's backend_xmin
	// or backend_xid, whichever is older; 0 when it holds neither.
	XminAge int64 `json:"xmin_age,omitempty"`
	// LockWait is the lock the session waits for: mode and relation
	// ("AccessExclusiveLock on accounts") or lock type; "" for none.
	LockWait string `json:"lock_wait,omitempty"`
	// Workers counts the statement's active parallel workers.
	Workers int `json:"workers,omitempty"`
	// Group is the key of the Snapshot.Tenants row the statement belongs
	// to under Snapshot.GroupBy ("" for the untagged row).
	Group string `json:"group,omitempty"`
}

// BlockRow is a statement waiting on a lock held by another.
type BlockRow struct {
	Blocked  StatementRow `json:"blocked"`
	Blocking StatementRow `json:"blocking"`
}

// ServiceRow is one reporting service's health.
type ServiceRow struct {
	Service string `json:"service"`
	// Ratio is the latency ratio now (p95 over the long window / p95 over
	// the short window, ≈1 healthy); 0 when not known (too little traffic).
	Ratio float64 `json:"ratio"`
	// History is the ratio each second, HistoryLen points, 0 where unknown.
	History []float64 `json:"history"`
	// Enter and Exit are the degraded thresholds (hysteresis band).
	Enter    float64 `json:"enter"`
	Exit     float64 `json:"exit"`
	Degraded bool    `json:"degraded"`
	// ShedLevel is how many tiers, from T3 down, the service's processes
	// shed or priced up in the window: 0 none, 1 T3, 2 T2–T3, 3 T1–T3.
	ShedLevel  int     `json:"shed_level"`
	ReqPerSec  float64 `json:"req_per_sec"`
	P95Seconds float64 `json:"p95_seconds"`
	// BaselineP95Seconds is the service's usual p95: the median over the
	// trailing hour (less its last minutes, and no minute of an incident)
	// of each minute's p95; 0 until the collector has enough minutes. The
	// latency alerts compare P95Seconds with it.
	BaselineP95Seconds float64 `json:"baseline_p95_seconds,omitempty"`
	// Processes counts the service's reporting processes in the window.
	Processes int `json:"processes"`
}

// EnforcementRow sums the enforcement counters of every reporting process
// over the window, per tier (index 0 = T0 … 3 = T3).
type EnforcementRow struct {
	Tiers [4]TierRow `json:"tiers"`
}

// TierRow is one tier's enforcement.
type TierRow struct {
	Tier string `json:"tier"`
	// PriceMultiplier is the highest RU price multiplier any process
	// applied to the tier in the window (1 normal).
	PriceMultiplier float64 `json:"price_multiplier"`
	Admitted        uint64  `json:"admitted"`
	Throttled       uint64  `json:"throttled"`
	Shed            uint64  `json:"shed"`
	ShadowThrottled uint64  `json:"shadow_throttled"`
	ShadowShed      uint64  `json:"shadow_shed"`
	// Dropped and ShadowDropped count work CoDel failed early (or would
	// have, in shadow mode), apart from Shed.
	Dropped       uint64 `json:"dropped"`
	ShadowDropped uint64 `json:"shadow_dropped"`
}

// MaxPoolWaitRows bounds Snapshot.PoolWait.
const MaxPoolWaitRows = 20

// PoolWaitRow is one tenant's wait for database connections from the
// processes' pools over the window (see agent.OpenPgxPool).
type PoolWaitRow struct {
	Tenant string `json:"tenant"`
	// WaitPerSec is seconds waited per second: the average number of the
	// tenant's acquisitions waiting at any time.
	WaitPerSec    float64 `json:"wait_per_sec"`
	AcquirePerSec float64 `json:"acquire_per_sec"`
	MaxSeconds    float64 `json:"max_seconds"`
}

// CollectorStatus is the collector's own health.
type CollectorStatus struct {
	Uptime        time.Duration `json:"uptime_ns"`
	ReportsPerSec float64       `json:"reports_per_sec"`
	// Sources counts the processes that reported in the window.
	Sources int `json:"sources"`
	// Rejected counts reports refused since start (bad version, malformed,
	// too large, unauthorized, over admission); Duplicates counts reports
	// recognised as already merged.
	Rejected   uint64 `json:"rejected"`
	Duplicates uint64 `json:"duplicates"`
	// Store is the store URL without credentials; StoreHealthy is false
	// while writes fail (they wait in the spool meanwhile).
	Store        string `json:"store"`
	StoreHealthy bool   `json:"store_healthy"`
	StoreError   string `json:"store_error,omitempty"`
	SpoolBytes   int64  `json:"spool_bytes"`
	// DroppedRows counts rows that could not be kept (spool full).
	DroppedRows uint64 `json:"dropped_rows"`
	// DeadLetters counts batches the store refused, set aside in
	// dead-letter files so the spool moves on; SpoolOldestSeconds is the
	// age of the oldest batch waiting (growing: not draining).
	DeadLetters        uint64  `json:"dead_letters"`
	SpoolOldestSeconds float64 `json:"spool_oldest_seconds,omitempty"`
	// Sampler is true when the pg_stat_activity sampler runs;
	// SamplerError is its last error.
	Sampler      bool   `json:"sampler"`
	SamplerError string `json:"sampler_error,omitempty"`
	// MalformedComments counts the sampled statements, since start, whose
	// sqlcommenter comment could not be read whole; TruncatedStatements
	// those cut at track_activity_query_size with their tags lost. Each
	// statement counts once.
	MalformedComments   uint64 `json:"malformed_comments,omitempty"`
	TruncatedStatements uint64 `json:"truncated_statements,omitempty"`
}

// ServerRow is what pg_activity shows in its header, as rates over the
// last sampling interval (0 until two samples were taken).
type ServerRow struct {
	TPS float64 `json:"tps"` // commits and rollbacks per second, all databases
	// Sessions by state (client backends).
	Active   int `json:"active"`
	Idle     int `json:"idle"`
	IdleInTx int `json:"idle_in_transaction"`
	Waiting  int `json:"waiting"` // for a lock
	// CacheHitRatio is shared buffer hits over hits and reads in the
	// interval (0–1; -1 when nothing was read).
	CacheHitRatio float64 `json:"cache_hit_ratio"`
	Database      string  `json:"database"`
	SizeBytes     int64   `json:"size_bytes"`
	// GrowthBytesPerSec is the database's growth over the time qtop has
	// watched it.
	GrowthBytesPerSec float64 `json:"growth_bytes_per_sec"`
}

// TopSQLRow is one pg_stat_statements entry's deltas per second.
type TopSQLRow struct {
	QueryID          int64    `json:"query_id"`
	Database         string   `json:"database"`
	Query            string   `json:"query"`
	CallsPerSec      float64  `json:"calls_per_sec"`
	TimeMsPerSec     float64  `json:"time_ms_per_sec"`
	MeanMs           float64  `json:"mean_ms"`
	RowsPerSec       float64  `json:"rows_per_sec"`
	SharedHitPerSec  float64  `json:"shared_hit_per_sec"`
	SharedReadPerSec float64  `json:"shared_read_per_sec"`
	Tenants          []string `json:"tenants,omitempty"` // seen running it in pg_stat_activity
}
