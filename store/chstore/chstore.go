// Package chstore is the ClickHouse implementation of store.Store, over the
// native protocol (clickhouse-go v2).
//
// Open creates and migrates the schema, rendered for the server's version:
// ClickHouse 18.16 gets plain types; newer servers get LowCardinality,
// codecs and, with WithRetention, a TTL. How the deployment is run is its
// mode (WithMode, or detected):
//
//   - ModeExplicit: one server, or with WithCluster qtop's own layout — ON
//     CLUSTER DDL, …_dist Distributed tables sharded by tenant and, with
//     WithReplicated, Replicated… engines whose ZooKeeper path is unique per
//     table incarnation ({uuid} in Atomic databases, an incarnation suffix in
//     18.16's Ordinary ones), so the database can be dropped and created
//     again. Works from 18.16.
//   - ModeReplicatedDatabase: the database is a Replicated one (23.x and
//     later): it replicates the DDL, tables take engines without arguments.
//   - ModeCloud: ClickHouse Cloud — engines without arguments, no ON
//     CLUSTER, no Distributed tables.
//
// Settings follow the version too (distributed_foreground_insert, named
// insert_distributed_sync before 23.10); WithAsyncInsert has the server
// batch the inserts of many small collectors; DeleteTenant erases one
// tenant's rows (DELETE FROM from 23.3, an ALTER … DELETE mutation before),
// and EraseTenant counts them first (store.TenantEraser); Retain drops the
// daily partitions older than a point in time on every version
// (store.Retainer), beside the TTL that WithRetention keeps in step on
// servers from 19.6.
// docs/cluster.md has the modes and what is tested on which server.
//
// Writes are idempotent. ClickHouse inserts are at-least-once: a batch
// whose reply was lost may have been committed, and its retry writes it
// again. Every table is a ReplacingMergeTree keyed by the writer's identity
// and the window, and reads take the latest version of each key (FINAL)
// before summing across writers, so a repeated write never doubles a figure.
//
// The cost report (Usage) reads no FINAL: once an hour is closed (two
// minutes after its end, unwritten for 30 s) the store sums it into
// rollups_sums — per hour and per minute (per day once a day has ended),
// by tenant and route, each computation a generation — in the first
// WriteRollups a minute after (before it returns), or when SumHours is
// called. Usage takes the whole days of its range from the daily sums, the
// other whole hours from the hourly sums, the hours it starts or ends
// inside from the minute sums, and only the rest (the hour in progress,
// hours written again since they were summed) from the rollups, the
// latest version of each key by argMax. Every write marks the hours it
// wrote, so a late row or a replayed spool makes its hour's (and day's)
// sums stale until they are summed again (reads meanwhile take its
// rollups); Retain drops the sums with their days and DeleteTenant erases
// the tenant's sums and has its hours summed again. On 7 days × 10,000
// tenants (42 M rollups) the report went from 97–155 s to 0.11–0.92 s over
// whole days and 0.61–2.34 s from inside an hour to inside another (first
// and last day read as hours); bench/README.md has the figures ("Reads
// that use the key").
//
// A batch is one INSERT, appended column by column; the latency arrays go
// in whole, decoded from their wire form, as clickhouse-go would otherwise
// box every element. On ClickHouse 18.16 the server's part write dominates
// and grows with the table's width: each insert writes every rollup column
// (17, 21 files with the array offsets); bench/README.md has the write
// throughput measured.
//
// The tests run on ClickHouse 18.16 (a server and a 2×2 cluster on
// ZooKeeper, from scripts/services) and, for the SQL of current releases,
// on ClickHouse's engine as a library (TestModernEngine, testdata/chdb).
package chstore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/store"
)

// Errors of this package, wrapped with %w.
var (
	// ErrConfig reports an option or name Open cannot use.
	ErrConfig = errors.New("chstore: invalid configuration")
	// ErrNoDistributedDDL reports a cluster whose servers cannot run ON
	// CLUSTER (no ZooKeeper or Keeper); WithNodeLocalDDL creates each
	// node's tables from the collector connected to it instead.
	ErrNoDistributedDDL = errors.New("chstore: server cannot run ON CLUSTER DDL")
)

// Store is a store.Store on ClickHouse. It is safe for concurrent use.
type Store struct {
	conn   driver.Conn
	schema Schema
	cfg    config

	mu     sync.Mutex
	closed bool

	sumMu   sync.Mutex
	lastSum time.Time // when WriteRollups last looked for hours to sum

	wm *store.WriteMetrics // nil until start makes them
}

var _ store.Store = (*Store)(nil)

type config struct {
	cluster      string
	replicated   bool
	nodeLocal    bool
	retention    time.Duration
	reg          prometheus.Registerer
	log          *slog.Logger
	user, pass   string
	dialTimeout  time.Duration
	maxConns     int
	maxMigration int // tests: stop after this migration
	mode         Mode
	asyncInsert  bool
	existing     bool // WithExisting
	tls          *tls.Config
	// now is the clock of the sums of closed hours (sums.go): it decides
	// when an hour is closed and tags writes and generations; tests set it.
	now       func() time.Time
	sumMargin time.Duration
	sumEvery  time.Duration
}

// Option configures Open.
type Option func(*config)

// WithCluster renders the schema for the named cluster (from
// system.clusters): ON CLUSTER DDL and …_dist Distributed tables.
func WithCluster(name string) Option { return func(c *config) { c.cluster = name } }

// WithReplicated uses Replicated… engines on the cluster, replica
// {replica}, at a ZooKeeper path unique per table incarnation
// (Schema.ZooKeeperPath: {uuid} in Atomic databases, an incarnation
// suffix in Ordinary ones; the fixed /clickhouse/tables/{shard}/DB/TABLE
// with WithNodeLocalDDL).
func WithReplicated() Option { return func(c *config) { c.replicated = true } }

// WithNodeLocalDDL leaves ON CLUSTER out of the cluster schema: the tables
// of each node are created by the collector connected to it. For clusters
// without distributed DDL.
func WithNodeLocalDDL() Option { return func(c *config) { c.nodeLocal = true } }

// WithMode says how the deployment is run (ModeExplicit,
// ModeReplicatedDatabase, ModeCloud); by default Open detects it.
func WithMode(m Mode) Option { return func(c *config) { c.mode = m } }

// WithAsyncInsert writes with async_insert (servers from 21.11; ignored
// with a warning before): the server gathers many small inserts, as from
// many small collectors, into one part. Each write still waits until its
// rows are stored (wait_for_async_insert), so a nil error means stored.
func WithAsyncInsert() Option { return func(c *config) { c.asyncInsert = true } }

// WithTLS connects over TLS (the native protocol's secure port, 9440; what
// ClickHouse Cloud takes). A nil config verifies the server with the
// system's roots, TLS 1.2 at least; give RootCAs for a private CA and
// Certificates for a server that requires a client certificate. Leave
// ServerName empty to verify each node of a multi-host address for its
// own name.
func WithTLS(cfg *tls.Config) Option {
	return func(c *config) {
		if cfg == nil {
			cfg = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		c.tls = cfg
	}
}

// WithRetention drops rows older than d with a TTL (servers from 19.6),
// set on new tables and changed on existing ones when it differs; older
// servers have none, and Retain drops their old daily partitions instead.
// d is 0 (keep all) or at least store.MinRetention. Audit rows are kept.
func WithRetention(d time.Duration) Option { return func(c *config) { c.retention = d } }

// WithRegisterer registers the store's metrics on reg.
func WithRegisterer(reg prometheus.Registerer) Option { return func(c *config) { c.reg = reg } }

// WithLogger logs schema changes and warnings to l.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// WithAuth sets the user and password (default: user default, no password).
func WithAuth(user, password string) Option {
	return func(c *config) { c.user, c.pass = user, password }
}

// WithDialTimeout bounds connecting (default 10 s).
func WithDialTimeout(d time.Duration) Option { return func(c *config) { c.dialTimeout = d } }

// WithExisting opens only a database that is there: a command that reads
// (a cost report, the audit) or erases never creates one, so a misspelt
// --store is an error (ErrNoDatabase), not an empty bill and a new
// database with qtop's schema on the server.
func WithExisting() Option { return func(c *config) { c.existing = true } }

// ErrNoDatabase: WithExisting, and the server has no such database.
var ErrNoDatabase = errors.New("chstore: no such database")

// WithMaxConns caps open connections (default 8).
func WithMaxConns(n int) Option { return func(c *config) { c.maxConns = n } }

// Open connects to the ClickHouse server at addr (host:port of the native
// protocol), creates database if missing and migrates the schema. addr may
// list several nodes of a cluster, comma-separated: they are tried in
// order, so the store moves to the next node when one is down.
func Open(ctx context.Context, addr, database string, opts ...Option) (*Store, error) {
	cfg := config{dialTimeout: 10 * time.Second, maxConns: 8, user: "default", now: time.Now, sumMargin: sumMargin, sumEvery: sumEvery}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.log == nil {
		cfg.log = slog.New(slog.DiscardHandler)
	}
	if cfg.dialTimeout <= 0 || cfg.maxConns <= 0 {
		return nil, fmt.Errorf("%w: dial timeout and connections must be positive", ErrConfig)
	}
	if _, err := ParseMode(string(cfg.mode)); err != nil {
		return nil, err
	}
	schema := Schema{Database: database, Cluster: cfg.cluster, Replicated: cfg.replicated, NodeLocal: cfg.nodeLocal, Retention: cfg.retention, Mode: cfg.mode}
	if err := schema.Validate(); err != nil {
		return nil, err
	}
	if cfg.nodeLocal && cfg.cluster == "" {
		return nil, fmt.Errorf("%w: node-local DDL needs a cluster", ErrConfig)
	}
	conn, err := clickhouse.Open(&clickhouse.Options{
		Addr:             strings.Split(addr, ","),
		ConnOpenStrategy: clickhouse.ConnOpenInOrder,
		Auth:             clickhouse.Auth{Database: "default", Username: cfg.user, Password: cfg.pass},
		Compression:      &clickhouse.Compression{Method: clickhouse.CompressionLZ4},
		DialTimeout:      cfg.dialTimeout,
		TLS:              cfg.tls,
		MaxOpenConns:     cfg.maxConns,
		MaxIdleConns:     cfg.maxConns,
	})
	if err != nil {
		return nil, fmt.Errorf("chstore: open %s: %w", addr, err)
	}
	s := &Store{conn: conn, cfg: cfg}
	if err := s.start(ctx, schema); err != nil {
		conn.Close()
		unregister(s)
		return nil, err
	}
	return s, nil
}

// notClustered refuses a database whose qtop tables were made for a
// cluster (a Distributed rollups…_dist) when no cluster is given: the
// node's own tables hold one shard, so reads would sum one shard, and an
// erase would leave the tenant on the others, without a word.
func notClustered(ctx context.Context, conn driver.Conn, database string) error {
	var n uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = ? AND name = ?",
		database, TableRollups+DistSuffix).Scan(&n); err != nil {
		return fmt.Errorf("chstore: look up tables: %w", err)
	}
	if n > 0 {
		return fmt.Errorf("%w: database %q holds qtop's tables of a cluster (%s%s): give its cluster (--cluster; system.clusters lists them), or this node's shard alone is read and changed",
			ErrConfig, database, TableRollups, DistSuffix)
	}
	return nil
}

// unregister takes back the metrics a failed Open registered, so that the
// next Open on the same registry (the collector opens a store that was
// unreachable at start again and again until it answers) can register
// them: left there, every later Open failed with "duplicate metrics
// collector registration attempted", and a collector started while
// ZooKeeper or a node was down spooled for good, until restarted.
func unregister(s *Store) { s.wm.Unregister() }

func (s *Store) start(ctx context.Context, schema Schema) error {
	if err := s.conn.Ping(ctx); err != nil {
		return fmt.Errorf("chstore: ping: %w", err)
	}
	sv, err := s.conn.ServerVersion()
	if err != nil {
		return fmt.Errorf("chstore: server version: %w", err)
	}
	schema.Version = Version{Major: int(sv.Version.Major), Minor: int(sv.Version.Minor)}
	if schema.Retention > 0 && !schema.features().TTL {
		s.cfg.log.Info("chstore: this server has no TTL; old rows go when Retain drops their daily partitions", "server", schema.Version.String(), "retention", schema.Retention)
	}
	if s.cfg.asyncInsert && !schema.features().AsyncInsert {
		s.cfg.log.Warn("chstore: this server has no async inserts; writes are plain inserts", "server", schema.Version.String())
	}
	if err := s.resolveMode(ctx, &schema); err != nil {
		return err
	}
	if schema.Cluster != "" {
		var n uint64
		if err := s.conn.QueryRow(ctx, "SELECT count() FROM system.clusters WHERE cluster = ?", schema.Cluster).Scan(&n); err != nil {
			return fmt.Errorf("chstore: look up cluster: %w", err)
		}
		if n == 0 {
			return fmt.Errorf("%w: cluster %q is not in system.clusters", ErrConfig, schema.Cluster)
		}
	} else if schema.Mode == ModeExplicit {
		if err := notClustered(ctx, s.conn, schema.Database); err != nil {
			return err
		}
	}
	s.schema = schema
	if s.cfg.existing {
		var n uint64
		if err := s.conn.QueryRow(ctx, "SELECT count() FROM system.databases WHERE name = ?", schema.Database).Scan(&n); err != nil {
			return fmt.Errorf("chstore: look up database: %w", err)
		}
		if n == 0 {
			return fmt.Errorf("%w: the server has no database %q (check --store; a collector that writes there creates it)", ErrNoDatabase, schema.Database)
		}
	}
	if err := s.metrics(); err != nil {
		return err
	}
	if err := s.migrate(ctx); err != nil {
		return err
	}
	return syncTTL(ctx, s)
}

func (s *Store) metrics() error {
	wm, err := store.NewWriteMetrics(s.cfg.reg, TableRollups, TableHotKeys, TableStatements, TableAudit, TableSums)
	if err != nil {
		return fmt.Errorf("chstore: metrics: %w", err)
	}
	s.wm = wm
	return nil
}

// migrate brings the schema to the newest version. It is safe to run from
// several collectors at once and again after a crash halfway: tables are
// created IF NOT EXISTS and a column is only added where it is missing.
func (s *Store) migrate(ctx context.Context) error {
	if migrated(ctx, s) {
		// Nothing to create: no ON CLUSTER statement, which would wait
		// for every node (distributed_ddl_task_timeout, 180 s) and then
		// fail while one replica is down — a collector restarted, or a
		// `collector erase` or `report` run, during a node's maintenance.
		return nil
	}
	if err := s.exec(s.schema.ddlContext(ctx), s.schema.CreateDatabase()); err != nil {
		return err
	}
	if err := s.choosePaths(ctx); err != nil {
		return err
	}
	sc := s.schema
	if err := s.exec(ctx, sc.CreateMigrations()); err != nil {
		return err
	}
	applied := map[int]bool{}
	rows, err := s.conn.Query(ctx, fmt.Sprintf("SELECT version FROM %s.%s", sc.Database, TableMigrations))
	if err != nil {
		return fmt.Errorf("chstore: read migrations: %w", err)
	}
	for rows.Next() {
		var v uint32
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return fmt.Errorf("chstore: read migrations: %w", err)
		}
		applied[int(v)] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("chstore: read migrations: %w", err)
	}
	for _, m := range sc.Migrations() {
		if applied[m.Version] || s.cfg.maxMigration > 0 && m.Version > s.cfg.maxMigration {
			continue
		}
		for _, st := range m.Steps {
			if err := s.step(ctx, st); err != nil {
				return fmt.Errorf("chstore: migration %d (%s): %w", m.Version, m.Name, err)
			}
		}
		if err := recordMigration(ctx, s.conn, sc.Database, m); err != nil {
			return fmt.Errorf("chstore: record migration %d: %w", m.Version, err)
		}
		s.cfg.log.Info("chstore: migrated", "database", sc.Database, "version", m.Version, "name", m.Name, "server", sc.Version.String())
	}
	return nil
}

// migrated reports whether the node connected to records every migration
// this schema has (any error, such as a database or table not there yet,
// is a no: migrate then runs in full).
func migrated(ctx context.Context, s *Store) bool {
	rows, err := s.conn.Query(ctx, fmt.Sprintf("SELECT version FROM %s.%s", s.schema.Database, TableMigrations))
	if err != nil {
		return false
	}
	defer rows.Close()
	applied := map[int]bool{}
	for rows.Next() {
		var v uint32
		if rows.Scan(&v) != nil {
			return false
		}
		applied[int(v)] = true
	}
	if rows.Err() != nil {
		return false
	}
	for _, m := range s.schema.Migrations() {
		if !applied[m.Version] && (s.cfg.maxMigration == 0 || m.Version <= s.cfg.maxMigration) {
			return false
		}
	}
	return true
}

// step runs one migration step where it is not in place yet. Another
// collector migrating at the same time may add the same column first: its
// ALTER then fails here ("already exists") and the step is done all the same.
func (s *Store) step(ctx context.Context, st Step) error {
	if st.EveryNode {
		return s.nodes(ctx, false, func(conn driver.Conn) error { return s.stepOn(ctx, conn, st) })
	}
	if st.EveryShard {
		if err := s.nodes(ctx, true, func(conn driver.Conn) error { return s.stepOn(ctx, conn, st) }); err != nil {
			return err
		}
		if st.AddColumn != nil {
			return s.waitColumn(ctx, *st.AddColumn)
		}
		return nil
	}
	return s.stepOn(ctx, s.conn, st)
}

// waitColumn waits until every node of the cluster has the column (its
// replicas get a replicated ALTER from ZooKeeper), at most a minute.
func (s *Store) waitColumn(ctx context.Context, c Column) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		missing := 0
		err := s.nodes(ctx, false, func(conn driver.Conn) error {
			has, err := hasColumn(ctx, conn, s.schema.Database, c.Table, c.Name)
			if err == nil && !has {
				missing++
			}
			return err
		})
		if err == nil && missing == 0 {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("chstore: column %s.%s not on every replica within a minute (%d missing, %v)", c.Table, c.Name, missing, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *Store) stepOn(ctx context.Context, conn driver.Conn, st Step) error {
	if st.AddColumn != nil {
		if has, err := hasColumn(ctx, conn, s.schema.Database, st.AddColumn.Table, st.AddColumn.Name); err != nil || has {
			return err
		}
	}
	err := s.execOn(ctx, conn, st.SQL)
	if err != nil && st.AddColumn != nil {
		if has, herr := hasColumn(ctx, conn, s.schema.Database, st.AddColumn.Table, st.AddColumn.Name); herr == nil && has {
			return nil // added by a collector migrating at the same time
		}
	}
	return err
}

// nodes calls fn with a connection to each node of the cluster, or with
// firstReplicas to the first replica of each shard only.
func (s *Store) nodes(ctx context.Context, firstReplicas bool, fn func(driver.Conn) error) error {
	shards, err := clusterNodes(ctx, s)
	if err != nil {
		return err
	}
	dial := func(addr string) (driver.Conn, error) { return dialNode(s, addr) }
	for _, replicas := range shards {
		if firstReplicas {
			if err := onFirstAnswering(ctx, replicas, dial, fn); err != nil {
				return err
			}
			continue
		}
		for _, addr := range replicas {
			if err := onFirstAnswering(ctx, []string{addr}, dial, fn); err != nil {
				return err
			}
		}
	}
	return nil
}

// clusterNodes lists the cluster's nodes (host:port), each shard's
// replicas in order, as the node connected to knows them.
func clusterNodes(ctx context.Context, s *Store) ([][]string, error) {
	rows, err := s.conn.Query(ctx, "SELECT DISTINCT shard_num, replica_num, host_address, port FROM system.clusters WHERE cluster = ? ORDER BY shard_num, replica_num", s.schema.distCluster())
	if err != nil {
		return nil, fmt.Errorf("chstore: list cluster nodes: %w", err)
	}
	defer rows.Close()
	var shards [][]string // each shard's replicas, in order
	last := uint32(0)
	for rows.Next() {
		var shard, replica uint32
		var host string
		var port uint16
		if err := rows.Scan(&shard, &replica, &host, &port); err != nil {
			return nil, fmt.Errorf("chstore: list cluster nodes: %w", err)
		}
		if len(shards) == 0 || shard != last {
			shards = append(shards, nil)
		}
		shards[len(shards)-1] = append(shards[len(shards)-1], net.JoinHostPort(host, strconv.Itoa(int(port))))
		last = shard
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("chstore: list cluster nodes: %w", err)
	}
	return shards, nil
}

// NodesWithoutSchema returns the nodes of the cluster that answer but have
// no qtop schema (no schema_migrations table in the database): a node
// rebuilt empty. No collector creates the tables there by itself: its
// replicas are still registered in ZooKeeper, so CREATE fails there
// ("Replica … already exists", code 253) and the tables have to be
// restored from a replica of the same shard (docs/cluster.md, "Rebuilding
// a node"). Meanwhile Distributed reads skip the node, and a write that
// reaches it fails as unavailable (UNKNOWN_TABLE: the spool keeps it). Nodes
// that do not answer are not counted. Nil without a cluster, and in
// ModeReplicatedDatabase (the database engine itself replicates its
// tables to a new node).
func (s *Store) NodesWithoutSchema(ctx context.Context) ([]string, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if !s.schema.sharded() || s.schema.mode() == ModeReplicatedDatabase {
		return nil, nil
	}
	shards, err := clusterNodes(ctx, s)
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, replicas := range shards {
		for _, addr := range replicas {
			var n uint64
			err := onFirstAnswering(ctx, []string{addr}, func(addr string) (driver.Conn, error) { return dialNode(s, addr) }, func(conn driver.Conn) error {
				return conn.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = ? AND name = ?", s.schema.Database, TableMigrations).Scan(&n)
			})
			if err == nil && n == 0 {
				missing = append(missing, addr)
			}
		}
	}
	return missing, ctx.Err()
}

// dialNode connects to one node of the cluster with the store's
// credentials.
func dialNode(s *Store, addr string) (driver.Conn, error) {
	return clickhouse.Open(&clickhouse.Options{
		Addr:        []string{addr},
		Auth:        clickhouse.Auth{Database: "default", Username: s.cfg.user, Password: s.cfg.pass},
		DialTimeout: s.cfg.dialTimeout,
		TLS:         s.cfg.tls,
	})
}

// onFirstAnswering runs fn on the first of replicas (of one shard) that
// answers a ping: with one replica of a shard down, retention, erasure and
// per-shard migrations run on the other (replication carries them to the
// one down when it is back) instead of failing.
func onFirstAnswering(ctx context.Context, replicas []string, dial func(string) (driver.Conn, error), fn func(driver.Conn) error) error {
	var errs []error
	for _, addr := range replicas {
		conn, err := dialPinged(ctx, dial, addr)
		if err != nil {
			errs = append(errs, fmt.Errorf("chstore: node %s: %w", addr, err))
			continue
		}
		err = fn(conn)
		conn.Close()
		if err != nil {
			return fmt.Errorf("chstore: node %s: %w", addr, err)
		}
		return nil
	}
	return errors.Join(errs...)
}

// dialPinged dials addr and pings it: a connection that answers, or an
// error.
func dialPinged(ctx context.Context, dial func(string) (driver.Conn, error), addr string) (driver.Conn, error) {
	conn, err := dial(addr)
	if err != nil {
		return nil, err
	}
	if err := conn.Ping(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// recordMigration notes in the node's schema_migrations that m is applied.
func recordMigration(ctx context.Context, conn driver.Conn, database string, m Migration) error {
	b, err := conn.PrepareBatch(ctx, fmt.Sprintf("INSERT INTO %s.%s (version, name, applied_at)", database, TableMigrations))
	if err != nil {
		return err
	}
	defer b.Abort()
	if err := b.Append(uint32(m.Version), m.Name, time.Now().UTC().Truncate(time.Second)); err != nil {
		return err
	}
	return b.Send()
}

func (s *Store) exec(ctx context.Context, q string) error { return s.execOn(ctx, s.conn, q) }

func (s *Store) execOn(ctx context.Context, conn driver.Conn, q string) error {
	if err := conn.Exec(ctx, q); err != nil {
		if strings.Contains(err.Error(), "DDL background thread is not initialized") ||
			strings.Contains(err.Error(), "no Zookeeper") || strings.Contains(err.Error(), "There is no ZooKeeper") {
			return fmt.Errorf("%w (use WithNodeLocalDDL to create each node's tables from its own collector): %w", ErrNoDistributedDDL, err)
		}
		return fmt.Errorf("chstore: %s: %w", firstLine(q), err)
	}
	return nil
}

func firstLine(q string) string {
	if i := strings.IndexByte(q, '\n'); i >= 0 {
		return q[:i]
	}
	return q
}

func hasColumn(ctx context.Context, conn driver.Conn, database, table, column string) (bool, error) {
	var n uint64
	err := conn.QueryRow(ctx, "SELECT count() FROM system.columns WHERE database = ? AND table = ? AND name = ?",
		database, table, column).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("chstore: look up column %s.%s: %w", table, column, err)
	}
	return n > 0, nil
}

// Schema returns the schema as rendered for the connected server.
func (s *Store) Schema() Schema { return s.schema }

func (s *Store) check() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	return nil
}

// Ping implements store.Store.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.check(); err != nil {
		return err
	}
	if err := s.conn.Ping(ctx); err != nil {
		return fmt.Errorf("chstore: ping: %w", err)
	}
	return nil
}

// Close implements store.Store. Calls after Close return store.ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return store.ErrClosed
	}
	s.closed = true
	s.mu.Unlock()
	return s.conn.Close()
}
