// Package live is the JSON contract of the collector's live API, read by
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
package live

import (
	"time"

	"github.com/qtop-dev/qtop/policy"
)

// Paths of the collector's HTTP API.
const (
	PathLive    = "/v1/live"
	PathStream  = "/v1/live/stream"
	PathPolicy  = "/v1/policy"
	PathReports = "/v1/reports"
	PathReport  = "/v1/report"
)

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

// OtherTenant names the final row of Snapshot.Tenants: the exact totals of
// every tenant beyond the top N.
const OtherTenant = "other"

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
	// Policy is the collector's policy; only rules active at Time.
	Policy    policy.Policy   `json:"policy"`
	Collector CollectorStatus `json:"collector"`
	// Peers, in a fleet snapshot (a collector with peers, see Merge), says
	// which collectors' snapshots it holds.
	Peers []PeerStatus `json:"peers,omitempty"`
}

// TenantRow is one tenant's load over the snapshot's window.
type TenantRow struct {
	Tenant string `json:"tenant"`
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
}

// RouteRow is one route of a tenant.
type RouteRow struct {
	Route      string  `json:"route"`
	DBLoad     float64 `json:"db_load"`
	RUPerSec   float64 `json:"ru_per_sec"`
	ReqPerSec  float64 `json:"req_per_sec"`
	ErrPerSec  float64 `json:"err_per_sec"`
	P95Seconds float64 `json:"p95_seconds"`
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
	// Sampler is true when the pg_stat_activity sampler runs;
	// SamplerError is its last error.
	Sampler      bool   `json:"sampler"`
	SamplerError string `json:"sampler_error,omitempty"`
}
