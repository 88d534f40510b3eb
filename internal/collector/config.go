package collector

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/store"
)

// Errors of the package; test with errors.Is.
var (
	// ErrConfig: a Config field is out of range or cannot be parsed.
	ErrConfig = errors.New("collector: invalid config")
	// ErrShutdown: the server has been shut down.
	ErrShutdown = errors.New("collector: shut down")
)

// Defaults of Config.
const (
	DefaultListen   = "127.0.0.1:7070"
	DefaultStore    = "duckdb://qtop.duckdb"
	DefaultDataDir  = "qtop-data"
	DefaultGrace    = 10 * time.Second
	DefaultLateKeep = 2 * time.Minute
	// DefaultMaxTenants bounds the tenants tracked by the live view.
	DefaultMaxTenants = 10_000
	// DefaultMaxMinuteRows bounds the tenant×route×kind rows of one open
	// minute; rows beyond it are folded into tenant "other".
	DefaultMaxMinuteRows = 100_000
	// DefaultSourceRate is how many reports per second one source may send
	// (with a burst of four times as many): a reporter sends one a second.
	DefaultSourceRate = 10.0
	// StoreNone runs without a store: no history, no cost reports.
	StoreNone = "none"
)

// Config configures a Server. The zero value is usable: it listens on
// DefaultListen and stores in DefaultStore.
type Config struct {
	// Listen is the HTTP address (default DefaultListen).
	Listen string
	// Store is duckdb://PATH, clickhouse://HOST:PORT/DB or StoreNone
	// (default DefaultStore).
	Store string
	// Cluster renders ClickHouse tables ON CLUSTER with Distributed tables.
	Cluster string
	// Postgres is the DSN of the PostgreSQL server whose pg_stat_activity
	// is sampled every second; empty: no sampler.
	Postgres string
	// Token, when set, is required as a bearer token on POST /v1/reports.
	// POST /v1/policy always requires a token: when Token is empty, the
	// server makes a random one (see Server.Token) and logs it.
	Token string
	// Demo runs a synthetic fleet in process.
	Demo bool
	// DataDir holds the write-ahead log, the spool, the policy and the
	// writer identity (default DefaultDataDir).
	DataDir string
	// Writer names this collector in the store; default: kept in DataDir,
	// made once from the host name.
	Writer string
	// Grace is how long after a minute ends its rollups are written (late
	// reports wait no longer); LateKeep is how long after that a late
	// report still re-emits the minute. Later reports count in the minute
	// they arrive.
	Grace, LateKeep time.Duration
	// MaxTenants, MaxMinuteRows and SourceRate: see the defaults.
	MaxTenants    int
	MaxMinuteRows int
	SourceRate    float64
	// QuotaRedis is host:port of the Redis through which several
	// collectors sum their quota usage (empty: this collector alone);
	// QuotaSync is how often (default DefaultQuotaSync). See quota.go.
	QuotaRedis string
	QuotaSync  time.Duration
	// SpoolMaxBytes caps the store spool (0: the store's default).
	SpoolMaxBytes int64
	// Registerer receives the collector's metrics; nil: a private
	// registry (served on /metrics either way).
	Registerer prometheus.Registerer
	// Gatherer serves /metrics; default: the private registry, or
	// Registerer when it is also a Gatherer.
	Gatherer prometheus.Gatherer
	Logger   *slog.Logger
	// Now is the clock (default time.Now); tests pass a fake one.
	Now func() time.Time
	// OpenStore overrides how Store is opened (tests).
	OpenStore func(url string) (store.Store, error)
}

func (c *Config) fill() error {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("%w: listen %q: %v", ErrConfig, c.Listen, err)
	}
	if c.Store == "" {
		c.Store = DefaultStore
	}
	if c.Store != StoreNone {
		if _, err := store.ParseURL(c.Store); err != nil {
			return fmt.Errorf("%w: %w", ErrConfig, err)
		}
	}
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir
	}
	if c.Grace <= 0 {
		c.Grace = DefaultGrace
	}
	if c.LateKeep <= 0 {
		c.LateKeep = DefaultLateKeep
	}
	if c.MaxTenants <= 0 {
		c.MaxTenants = DefaultMaxTenants
	}
	if c.MaxMinuteRows <= 0 {
		c.MaxMinuteRows = DefaultMaxMinuteRows
	}
	if c.SourceRate <= 0 {
		c.SourceRate = DefaultSourceRate
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Registerer == nil {
		reg := prometheus.NewRegistry()
		c.Registerer = reg
		if c.Gatherer == nil {
			c.Gatherer = reg
		}
	}
	if c.Gatherer == nil {
		if g, ok := c.Registerer.(prometheus.Gatherer); ok {
			c.Gatherer = g
		}
	}
	return nil
}
