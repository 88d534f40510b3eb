package store

import (
	"context"
	"errors"
	"time"

	"github.com/qtop-dev/qtop/histogram"
	"github.com/qtop-dev/qtop/tenant"
)

// Errors returned by this package and its implementations, wrapped with %w.
var (
	// ErrClosed is returned by calls after Close.
	ErrClosed = errors.New("store: closed")
	// ErrInvalid is returned for rows that cannot be stored (an out-of-range
	// tier, an unknown kind, a zero minute); the whole batch is rejected
	// and nothing is written.
	ErrInvalid = errors.New("store: invalid row")
	// ErrURL is returned by ParseURL for a store URL it cannot read.
	ErrURL = errors.New("store: invalid store URL")
	// ErrSpoolCorrupt reports a spool file that could not be decoded; the
	// spool skips it and goes on.
	ErrSpoolCorrupt = errors.New("store: corrupt spool file")
	// ErrUnavailable marks a write that failed because the store, or a
	// part of it, cannot take writes now (a shard whose replicas are all
	// down, a coordination service that is gone, a node that does not
	// answer) — a fault of the store, not of the batch, even when another
	// part of the store answers Ping. The spool keeps such a batch and
	// retries it however often it fails; it never dead-letters it.
	ErrUnavailable = errors.New("store: unavailable")
	// ErrSpooled is returned by the spool's reads (Usage, History) when
	// rows of the range wait in the spool for a store that cannot take
	// them yet: the store's answer would under-count. Try again once the
	// spool has drained (qtop_collector_spool_bytes at 0).
	ErrSpooled = errors.New("store: rows of the range are still spooled")
)

// Kinds of rollup.
const (
	KindRequest = "request"
	KindDB      = "db"
	KindJob     = "job"
	KindPG      = "pg" // the pg_stat_activity sampler
)

// Rollup is one minute of one tenant×route×kind from one writer.
type Rollup struct {
	Minute  time.Time // UTC, truncated to the minute
	Writer  string    // identity of the collector instance that wrote it
	Version uint64    // increases each time the writer re-emits the same row (late reports): the latest version wins
	Service string    // reporting service ("" for the pg sampler)
	Tenant  string
	Route   string
	// Tier is the tier of most of the row's records in the minute (a tie
	// goes to the more critical tier), not the last report's.
	Tier tenant.Tier
	Kind string // "request", "db", "job", or "pg" for the pg_stat_activity sampler

	Count, Errors   uint64
	DurationSeconds float64 // sum
	RU              float64
	Bytes, Rows     uint64
	// ActiveSessionSeconds is, for the pg sampler, the sum over samples of
	// active sessions × sample interval; DB load (AAS) = this / 60. A "pg"
	// row's DurationSeconds is the part of it that the minute's "db" rows
	// (the statements services report) count already, at most
	// ActiveSessionSeconds: Usage counts it once.
	ActiveSessionSeconds float64
	// Latency is the histogram of the row's durations, as the collector
	// merged it, in the buckets of ratio.Histogram. Empty means no latency:
	// no store keeps a histogram without observations apart from none
	// (none needs to), so an empty one reads back as none. A copy of a
	// Rollup shares its Latency's memory (see ratio.Sparse): Clone it to
	// change one apart.
	Latency histogram.Sparse
}

// HotKey is one key's count in one minute from one writer, with the
// Space-Saving error bound: the true count lies in [Count−Err, Count].
type HotKey struct {
	Minute  time.Time
	Writer  string
	Version uint64
	Key     string
	Tenant  string
	Count   uint64
	Err     uint64
}

// Statement is one sampled slow or long-running statement with its tags.
type Statement struct {
	Time                     time.Time
	Writer                   string
	PID                      int32
	Tenant, Route            string
	Application, Query       string
	State                    string
	WaitEventType, WaitEvent string
	Duration                 time.Duration
}

// Audit is one policy change: who made it, when, and the rule as JSON.
type Audit struct {
	Time          time.Time
	Who, Action   string
	PolicyVersion uint64
	Rule          string // JSON of policy.Rule
}

// Usage is one tenant's (or tenant×route's) consumption over a range.
//
// Requests, Errors and DurationSeconds sum the Count, Errors and
// DurationSeconds of kinds "request" and "job" (units of work a caller
// waited for); DBSeconds is kind "db" DurationSeconds plus kind "pg"
// ActiveSessionSeconds less its DurationSeconds (the part the "db" rows
// count already: see Rollup); RU and Bytes sum every kind. Tenant "" is load no
// tenant tag covered (the unattributed line of a cost report).
type Usage struct {
	Tenant, Route   string
	Requests        uint64
	Errors          uint64
	DurationSeconds float64
	DBSeconds       float64
	RU              float64
	Bytes           uint64
}

// Store keeps the collector's history. Implementations are safe for
// concurrent use. Writes are idempotent so an at-least-once writer (a retry
// after a lost reply, a spool replay) never doubles a figure.
type Store interface {
	// WriteRollups is idempotent: the same (Minute, Writer, Service, Tenant,
	// Route, Kind) at the same or older Version never doubles a figure.
	WriteRollups(ctx context.Context, rows []Rollup) error
	// WriteHotKeys is idempotent likewise on (Minute, Writer, Key).
	WriteHotKeys(ctx context.Context, rows []HotKey) error
	WriteStatements(ctx context.Context, rows []Statement) error
	WriteAudit(ctx context.Context, rows []Audit) error
	// Usage sums [from, to) across writers, latest version of each row,
	// per tenant (Route "") or per tenant×route when byRoute.
	Usage(ctx context.Context, from, to time.Time, byRoute bool) ([]Usage, error)
	// History returns one row per minute in [from, to) for one tenant: all
	// routes, kinds and writers summed, Writer "", Kind "", ordered by minute.
	// Its Count, Errors and Latency are of the requests and jobs only, as
	// Usage's are (a statement is not a request, and its duration is not
	// the tenant's latency); its DurationSeconds is the minute's database
	// time, as Usage's DBSeconds (kind "db" durations, plus what kind "pg"
	// sessions held beyond them).
	History(ctx context.Context, tenant string, from, to time.Time) ([]Rollup, error)
	Ping(ctx context.Context) error
	Close() error
}
