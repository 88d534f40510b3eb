package collector

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/qtop-dev/qtop/internal/buildinfo"
	"github.com/qtop-dev/qtop/internal/connlimit"
	costmodel "github.com/qtop-dev/qtop/ru"
	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/tlsfiles"
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
	DefaultListen  = "127.0.0.1:7070"
	DefaultDataDir = "qtop-data"
	// DefaultStoreFile is the DuckDB file kept in the data dir when no
	// store is given (DefaultStoreURL).
	DefaultStoreFile = "qtop.duckdb"
	DefaultGrace     = 10 * time.Second
	DefaultLateKeep  = 2 * time.Minute
	// DefaultDuckDBMemory is the memory DuckDB may take in a collector
	// (its memory_limit; ?memory_limit= on the duckdb:// URL sets
	// another): without one it takes up to 80% of the machine's memory
	// for a report's query, beside the collector's own heap.
	DefaultDuckDBMemory = "1GiB"
	// DefaultMaxTenants bounds the tenants tracked by the live view.
	DefaultMaxTenants = 10_000
	// DefaultMaxMinuteRows bounds the tenant×route×kind rows of one open
	// minute; rows beyond it are folded into tenant "other".
	DefaultMaxMinuteRows = 100_000
	// DefaultRefusalDelay is how long a refusal of a report for its
	// content or credentials is held back (Config.RefusalDelay).
	DefaultRefusalDelay = time.Second
	// DefaultSourceRate is how many reports per second one source may send
	// (with a burst of four times as many): a reporter sends one a second.
	DefaultSourceRate = 10.0
	// DefaultMaxRuleTTL bounds a policy rule's expiry.
	DefaultMaxRuleTTL = 24 * time.Hour
	// DefaultMaxSources bounds the established reporting processes.
	DefaultMaxSources = 100_000
	// StoreNone runs without a store: no history, no cost reports.
	StoreNone = "none"
)

// Config configures a Server. The zero value is usable: it listens on
// DefaultListen and stores in DuckDB in its data dir (DefaultStoreURL).
type Config struct {
	// Listen is the HTTP address (default DefaultListen).
	Listen string
	// Store is duckdb://PATH, clickhouse://HOST:PORT/DB or StoreNone
	// (default DefaultStoreURL(DataDir)).
	Store string
	// FleetConfig: the cluster, the peers and the shared policy.
	FleetConfig
	// Postgres is the DSN of the PostgreSQL server whose pg_stat_activity
	// is sampled every second; empty: no sampler.
	Postgres string
	// PostgresAllDatabases samples the sessions of every database of the
	// Postgres server, not only its DSN's (pgactivity.WithAllDatabases).
	PostgresAllDatabases bool
	// Token, when set, is the report credential: the bearer token
	// required on POST /v1/reports (RoleReport). It can neither read nor
	// change policy.
	Token string
	// ReadToken, when set, is the reader credential (RoleRead): required
	// on the live API, cost reports, the policy's GET and /metrics.
	ReadToken string
	// AdminToken is the policy credential (RoleAdmin): POST /v1/policy
	// and GET /v1/audit. When empty, the server makes one, keeps it in
	// DataDir/admin-token (mode 0600) and never logs it (see
	// Server.Token).
	AdminToken string
	// TLSConfig: TLS on every listener, the files the tokens come from,
	// and Insecure.
	TLSConfig
	// MaxRuleTTL bounds how far in the future a policy rule may expire
	// (default DefaultMaxRuleTTL).
	MaxRuleTTL time.Duration
	// Demo runs a synthetic fleet in process.
	Demo bool
	// DataDir holds the write-ahead log, the spool, the policy, the
	// writer identity and, with Postgres, pg_stat_statements' totals of
	// the last minutes (default DefaultDataDir).
	DataDir string
	// Writer names this collector in the store; default: kept in DataDir,
	// made once from the host name.
	Writer string
	// Grace is how long after a minute ends its rollups are written (late
	// reports wait no longer); LateKeep is how long after that a late
	// report still re-emits the minute. Later reports count in the minute
	// they arrive.
	Grace, LateKeep time.Duration
	// LimitsConfig: what the live view and an open minute hold.
	LimitsConfig
	// IntakeConfig: the bounds of the front door for reports.
	IntakeConfig
	// OTLPConfig: the OTLP trace receiver.
	OTLPConfig
	// QuotaConfig: fleet quotas summed through Redis.
	QuotaConfig
	// StoreConfig: the spool's cap and the retention.
	StoreConfig
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

// TLSConfig protects the listeners (server.go, otlp.go, tokenfiles.go).
// Its fields are promoted into Config.
type TLSConfig struct {
	// TLS names the certificate and key that the HTTP API (with
	// OTLP/HTTP) and OTLP/gRPC serve, and an optional client CA (mTLS:
	// every client then presents a certificate it signed). The files are
	// read again when they change (see package tlsfiles).
	TLS tlsfiles.ServerFiles
	// PeerTLS names the CA (default: the system's roots) and the client
	// certificate with which this collector reaches its https:// Peers.
	PeerTLS tlsfiles.ClientFiles
	// TokenFiles name files holding Config's tokens instead of the
	// strings (a token and its file are not both set); like TLS's files
	// they are read again when they change (tokenfiles.go).
	TokenFiles TokenFiles
	// Insecure lets the collector listen on an address that is not
	// loopback without TLS or without Token and ReadToken (anyone could
	// read the traffic, report and read); without it, New refuses.
	Insecure bool
}

// FleetConfig configures the collector's part in a fleet (fleet.go,
// fleet_policy.go). Its fields are promoted into Config.
type FleetConfig struct {
	// Cluster renders ClickHouse tables ON CLUSTER with Replicated engines
	// and Distributed tables.
	Cluster string
	// Peers are the other collectors of the fleet (host:port or
	// http(s)://host:port): /v1/live then merges their live views with
	// this one's (fleet.go). It may hold this collector's own address
	// (one list for every replica): its own answer is known and not
	// merged twice.
	Peers []string
	// PeerToken is the credential this collector sends to its peers and
	// accepts from them as a read credential (default: ReadToken).
	PeerToken string
	// SharedPolicy keeps the policy in the (ClickHouse) store, common to
	// every collector writing to it (fleet_policy.go).
	SharedPolicy bool
}

// Validate checks the peers (at most MaxPeers, each host:port or
// http(s)://host:port).
func (c FleetConfig) Validate() error {
	_, err := checkPeers(c.Peers)
	return err
}

// LimitsConfig bounds what the collector holds per tenant (README,
// "Memory and the number of tenants"). Its fields are promoted into
// Config.
type LimitsConfig struct {
	// MaxTenants bounds the tenants the live view follows
	// (DefaultMaxTenants); MaxMinuteRows the rows of an open minute
	// (DefaultMaxMinuteRows).
	MaxTenants    int
	MaxMinuteRows int
}

// IntakeConfig bounds the front door for reports (sources.go, screen.go).
// Its fields are promoted into Config.
type IntakeConfig struct {
	// ListenFirst defers the replay of the write-ahead log from New to
	// Start, which then listens first: /healthz answers at once (a probe
	// does not kill a collector through a long replay), /readyz and every
	// other door answer 503 with Retry-After until the log is replayed,
	// and OTLP/gRPC and the rate-limit service answer Unavailable. Run replays
	// first too; a Shutdown before the replay ends writes no minute and
	// keeps the log. `collector serve` sets it.
	ListenFirst bool
	// SourceRate: see DefaultSourceRate.
	SourceRate float64
	// RefusalDelay is how long the answer to a report refused for what
	// it is — malformed, too large, the wrong content type or credentials
	// (400, 401, 413, 415) — is held back (default DefaultRefusalDelay;
	// negative: answered at once). A client sending junk in a loop then
	// costs the collector a few requests a second, not thousands, and the
	// reporters beside it keep their latency. At most maxHeldRefusals
	// answers are held at once; beyond that a refusal is answered at once
	// and its connection closed.
	RefusalDelay time.Duration
	// MaxSources bounds the established reporting processes (default
	// DefaultMaxSources); newcomers are served on probation beside them
	// (see sources.go), so junk sources cannot evict real ones.
	MaxSources int
	// DiskReserve is the free space kept on DataDir's file system
	// (default DefaultDiskReserve; negative: none): below it reports are
	// refused with 503 and Retry-After before anything is logged, so the
	// minutes still have room to be spooled and the disk never fills
	// (disk.go).
	DiskReserve int64
	// MaxConns bounds the connections of the HTTP port at once (default
	// half the process's open-file limit, at most DefaultMaxConnsCeiling):
	// at the bound, the connection idle the longest is closed to make room
	// for a new one (httpconns.go).
	MaxConns int
}

// DefaultDiskReserve is IntakeConfig.DiskReserve's default.
const DefaultDiskReserve = 64 << 20

func (c *IntakeConfig) fill() {
	if c.DiskReserve == 0 {
		c.DiskReserve = DefaultDiskReserve
	}
	if c.RefusalDelay == 0 {
		c.RefusalDelay = DefaultRefusalDelay
	}
	if c.MaxSources <= 0 {
		c.MaxSources = DefaultMaxSources
	}
	if c.SourceRate <= 0 {
		c.SourceRate = DefaultSourceRate
	}
	if c.MaxConns <= 0 {
		c.MaxConns = connlimit.DefaultBound()
	}
}

// OTLPConfig configures the OTLP trace receiver (otlp.go). Its fields are
// promoted into Config.
type OTLPConfig struct {
	// OTLPGRPC is the address of the OTLP/gRPC trace receiver (4317 by
	// convention); empty: off. OTLP/HTTP (POST /v1/traces) is always on
	// Listen.
	OTLPGRPC string
	// OTLPTenantAttribute names the span attribute that holds the tenant
	// of OTLP spans (default "tenant.id").
	OTLPTenantAttribute string
	// OTLPRUModel prices OTLP requests and jobs without a qtop.ru
	// attribute (nil: costmodel.DefaultModel, the agent's default).
	OTLPRUModel *costmodel.Model
	// OTLPGRPCMaxBytes bounds an OTLP/gRPC message (0:
	// otlpin.DefaultGRPCMaxMessage).
	OTLPGRPCMaxBytes int64
	// OTLPGRPCMaxConns bounds the OTLP/gRPC connections served at once
	// (0: DefaultOTLPGRPCMaxConns); one beyond is closed at once and
	// counted (conncap.go).
	OTLPGRPCMaxConns int
	// OTLPMaxRows bounds the tenants and rows of one OTLP service's
	// second (0: otlpin.DefaultMaxRows; at most 8192).
	OTLPMaxRows int
	// OTLPClientDBTime keeps the DB time statement spans measured, the
	// clients' own scheduling included; by default, with Postgres set, each
	// statement shape's time in the store is pg_stat_statements' (dbtime.go).
	OTLPClientDBTime bool
}

// Validate checks the gRPC address.
func (c OTLPConfig) Validate() error {
	if c.OTLPGRPCMaxConns < 0 {
		return fmt.Errorf("%w: otlp grpc max conns %d (want ≥ 0; 0 is the default, %d)", ErrConfig, c.OTLPGRPCMaxConns, DefaultOTLPGRPCMaxConns)
	}
	if c.OTLPMaxRows < 0 || c.OTLPMaxRows > 8192 {
		return fmt.Errorf("%w: otlp max rows %d (want 1 to 8192; 0 is the default, 512)", ErrConfig, c.OTLPMaxRows)
	}
	if c.OTLPGRPC != "" {
		if err := checkAddr(c.OTLPGRPC); err != nil {
			return fmt.Errorf("%w: otlp grpc %q: %v", ErrConfig, c.OTLPGRPC, err)
		}
	}
	return nil
}

// QuotaConfig configures the fleet quotas (quota.go). Its fields are
// promoted into Config.
type QuotaConfig struct {
	// QuotaRedis is the Redis through which several collectors sum their
	// quota usage (empty: this collector alone): host:port,
	// redis://HOST:PORT[/DB] or rediss://HOST:PORT[/DB] (TLS), with the
	// user, password and CA from the environment (RedisAuthFromEnv,
	// NewRedisClient); QuotaSync is how often (default
	// DefaultQuotaSync). See quota.go.
	QuotaRedis string
	QuotaSync  time.Duration
	// QuotaPrefix is the prefix of the Redis keys (default
	// redisquota.DefaultPrefix); collectors that sum together share it.
	QuotaPrefix string
	// QuotaClock, when set, dates the sums exchanged through QuotaRedis
	// (every collector of the prefix must then share it: simulations on
	// fake time); by default Redis's clock does, so that the collectors'
	// clocks need not agree.
	QuotaClock func() time.Time
	// RLSConfig: the rate-limit service for gateways (rls.go), which
	// answers from the policy and these quotas.
	RLSConfig

	// legacyStore: no Store was given and DefaultStoreURL found the
	// history in the working directory (New says so).
	legacyStore bool
}

func (c *Config) fill() error {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if err := checkAddr(c.Listen); err != nil {
		return fmt.Errorf("%w: listen %q: %v", ErrConfig, c.Listen, err)
	}
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir
	}
	if c.Store == "" {
		c.Store, c.legacyStore = DefaultStoreURL(c.DataDir)
	}
	if err := c.OTLPConfig.Validate(); err != nil {
		return err
	}
	if err := c.RLSConfig.Validate(); err != nil {
		return err
	}
	if err := c.FleetConfig.Validate(); err != nil {
		return err
	}
	if err := c.StoreConfig.Validate(); err != nil {
		return err
	}
	if c.Store != StoreNone {
		if _, err := store.ParseURL(c.Store); err != nil {
			return fmt.Errorf("%w: %w", ErrConfig, err)
		}
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
	if c.MaxRuleTTL <= 0 {
		c.MaxRuleTTL = DefaultMaxRuleTTL
	}
	c.IntakeConfig.fill()
	if err := c.TokenFiles.read(c); err != nil {
		return err
	}
	if err := c.TLS.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if err := checkExposure(c); err != nil {
		return err
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Registerer == nil {
		// The collector's own registry: with the Go runtime's and the
		// process's series (go_*, process_*) and qtop_build_info, as a
		// server's /metrics is expected to have.
		reg := prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
			buildinfo.Collector())
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

// DefaultStoreURL is the store of a collector on dataDir that names none:
// DuckDB in dataDir (DefaultStoreFile). Collectors before this default
// kept that file in the working directory: when dataDir has none and the
// working directory has one, that file is the store, and legacy is true
// so that the caller can say where the history is and how to move it.
func DefaultStoreURL(dataDir string) (url string, legacy bool) {
	path := filepath.Join(dataDir, DefaultStoreFile)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		if st, err := os.Stat(DefaultStoreFile); err == nil && st.Mode().IsRegular() {
			return "duckdb://" + DefaultStoreFile, true
		}
	}
	return "duckdb://" + path, false
}

// checkAddr checks a host:port to listen on before anything is made (the
// data directory, the store): a port outside 0–65535 or a name is said
// at once, not when the listener opens.
func checkAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("port %q: want a number from 0 to 65535", port)
	}
	return nil
}
