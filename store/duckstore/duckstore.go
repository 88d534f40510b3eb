// Package duckstore is the embedded implementation of store.Store: one
// DuckDB file, nothing to install. It links DuckDB through cgo, so only
// applications import it; library packages stay cgo-free.
//
// Writes are idempotent upserts on each table's key (the writer, the
// window and the row's identity): a row replaces the stored one when its
// version is the same or newer, so a retried or replayed batch never
// doubles a figure, and an older late version never overwrites a newer one.
//
// Rollups older than the last minutes written move to a table sorted by
// tenant (a closed day, or four hours, one sorted run), with hourly and
// daily sums beside it (cold.go, sums.go): one tenant's history reads
// that tenant's parts of a few runs only, and a cost report over days
// reads the sums instead of every minute.
//
// Load fills a new file with a history in the layout those writes leave,
// much faster than WriteRollups: for benchmarks (bench/storegen -load)
// and imports.
package duckstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/duckdb/duckdb-go/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/histogram"
	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/tenant"
)

// Store is a store.Store in a DuckDB file. It is safe for concurrent use:
// reads run in parallel, writes are serialised (DuckDB would otherwise
// abort one of two transactions that touch the same row).
type Store struct {
	db        *sql.DB
	connector *duckdb.Connector
	log       *slog.Logger

	wmu         sync.Mutex // serialises writes
	horizon     time.Time  // rollups before it may be in rollups_cold (under wmu)
	compactRows int        // rows moved to rollups_cold at a time
	wm          *store.WriteMetrics
	mu          sync.RWMutex
	closed      bool
}

var _ store.Store = (*Store)(nil)

type config struct {
	log          *slog.Logger
	reg          prometheus.Registerer
	maxMigration int // tests: stop after this migration
	compactRows  int // tests: move fewer rows at a time to rollups_cold
	memory       string
}

// Option configures Open.
type Option func(*config)

// WithMemoryLimit sets how much memory DuckDB may take for its buffers
// and queries (DuckDB's memory_limit: "512MB", "2GiB"; "" leaves DuckDB's
// default, 80% of the machine's memory). Beyond it DuckDB spills what it
// can to a temporary folder beside the file (PATH.tmp) and fails the
// rest with an out-of-memory error.
func WithMemoryLimit(size string) Option { return func(c *config) { c.memory = size } }

// WithLogger logs schema changes to l.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// WithRegisterer registers the store's write metrics on reg (the same as
// chstore's: rows written and errors by table, time per batch); Close
// takes them back.
func WithRegisterer(reg prometheus.Registerer) Option { return func(c *config) { c.reg = reg } }

// Open opens (creating if missing) the DuckDB file at path and migrates it.
// The path ":memory:" or "" gives a store that lives in memory only.
func Open(path string, opts ...Option) (*Store, error) {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.log == nil {
		cfg.log = slog.New(slog.DiscardHandler)
	}
	if path == ":memory:" {
		path = ""
	}
	if strings.ContainsRune(path, '?') {
		return nil, fmt.Errorf("duckstore: open %q: a path with a '?' (options are given with Option)", path)
	}
	dsn := path
	if cfg.memory != "" {
		dsn += "?memory_limit=" + url.QueryEscape(cfg.memory)
	}
	connector, err := duckdb.NewConnector(dsn, nil)
	if err != nil {
		return nil, fmt.Errorf("duckstore: open %q: %w", path, err)
	}
	if cfg.compactRows <= 0 {
		cfg.compactRows = rowGroup
	}
	s := &Store{db: sql.OpenDB(connector), connector: connector, log: cfg.log, compactRows: cfg.compactRows}
	if err := s.migrate(context.Background(), cfg.maxMigration); err != nil {
		s.db.Close()
		connector.Close()
		return nil, err
	}
	if s.wm, err = store.NewWriteMetrics(cfg.reg, tables...); err != nil {
		s.db.Close()
		connector.Close()
		return nil, fmt.Errorf("duckstore: metrics: %w", err)
	}
	if cfg.maxMigration == 0 || cfg.maxMigration >= 3 {
		if err := s.loadHorizon(context.Background()); err != nil {
			s.Close()
			return nil, err
		}
	}
	for _, q := range staging {
		if _, err := s.db.Exec(q); err != nil {
			s.Close()
			return nil, fmt.Errorf("duckstore: staging tables: %w", err)
		}
	}
	return s, nil
}

// tables are the tables written, as the write metrics name them.
var tables = []string{"rollups", "hot_keys", "statements", "audit"}

type migration struct {
	version int
	name    string
	steps   []string
}

// migrations mirror chstore's: the same tables and the same later ALTER.
var migrations = []migration{
	{1, "rollups, hot keys, statements, audit", []string{
		`CREATE TABLE IF NOT EXISTS rollups (
    minute TIMESTAMP NOT NULL,
    writer VARCHAR NOT NULL,
    version UBIGINT NOT NULL,
    service VARCHAR NOT NULL,
    tenant VARCHAR NOT NULL,
    route VARCHAR NOT NULL,
    tier UTINYINT NOT NULL,
    kind VARCHAR NOT NULL,
    count UBIGINT NOT NULL,
    errors UBIGINT NOT NULL,
    duration_seconds DOUBLE NOT NULL,
    ru DOUBLE NOT NULL,
    bytes UBIGINT NOT NULL,
    "rows" UBIGINT NOT NULL,
    latency BLOB,
    PRIMARY KEY (tenant, minute, route, kind, service, writer))`,
		`CREATE TABLE IF NOT EXISTS hot_keys (
    minute TIMESTAMP NOT NULL,
    writer VARCHAR NOT NULL,
    version UBIGINT NOT NULL,
    key VARCHAR NOT NULL,
    tenant VARCHAR NOT NULL,
    count UBIGINT NOT NULL,
    err UBIGINT NOT NULL,
    PRIMARY KEY (minute, key, writer))`,
		`CREATE TABLE IF NOT EXISTS statements (
    time TIMESTAMP_NS NOT NULL,
    writer VARCHAR NOT NULL,
    pid INTEGER NOT NULL,
    tenant VARCHAR NOT NULL,
    route VARCHAR NOT NULL,
    application VARCHAR NOT NULL,
    query VARCHAR NOT NULL,
    state VARCHAR NOT NULL,
    wait_event_type VARCHAR NOT NULL,
    wait_event VARCHAR NOT NULL,
    duration_seconds DOUBLE NOT NULL,
    PRIMARY KEY (time, writer, pid))`,
		`CREATE TABLE IF NOT EXISTS audit (
    time TIMESTAMP_NS NOT NULL,
    who VARCHAR NOT NULL,
    action VARCHAR NOT NULL,
    policy_version UBIGINT NOT NULL,
    rule VARCHAR NOT NULL,
    PRIMARY KEY (time, who, policy_version, action))`,
	}},
	{2, "pg sampler active-session seconds", []string{
		`ALTER TABLE rollups ADD COLUMN IF NOT EXISTS active_session_seconds DOUBLE DEFAULT 0`,
	}},
	{3, "rollups sorted by tenant once older than the last minutes, with hourly and daily sums (see cold.go, sums.go)",
		append(append([]string{}, coldMigration...), sumsMigration...)},
	{4, "the tenant's numeric key in the hot rollups too (see cold.go)", hotKeyMigration},
	{5, "a table of rollup sums per grain (see sums.go)", sumsSplitMigration},
}

func (s *Store) migrate(ctx context.Context, max int) error {
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY, name VARCHAR NOT NULL, applied_at TIMESTAMP NOT NULL)`); err != nil {
		return fmt.Errorf("duckstore: migrations table: %w", err)
	}
	for _, m := range migrations {
		if max > 0 && m.version > max {
			break
		}
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("duckstore: migration %d: %w", m.version, err)
		}
		var n int
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM schema_migrations WHERE version = ?", m.version).Scan(&n); err != nil {
			tx.Rollback()
			return fmt.Errorf("duckstore: migration %d: %w", m.version, err)
		}
		if n > 0 {
			tx.Rollback()
			continue
		}
		for _, q := range m.steps {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				tx.Rollback()
				return fmt.Errorf("duckstore: migration %d (%s): %w", m.version, m.name, err)
			}
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO schema_migrations VALUES (?, ?, ?)", m.version, m.name, time.Now().UTC()); err != nil {
			tx.Rollback()
			return fmt.Errorf("duckstore: record migration %d: %w", m.version, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("duckstore: migration %d: %w", m.version, err)
		}
		s.log.Info("duckstore: migrated", "version", m.version, "name", m.name)
	}
	return nil
}

// begin checks the store is open and holds it open until done is called.
func (s *Store) begin() (done func(), err error) {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return nil, store.ErrClosed
	}
	return s.mu.RUnlock, nil
}

// staging tables take a batch through DuckDB's appender (row-at-a-time
// INSERTs cost milliseconds a row); one statement then merges the batch into
// its table. They are an implementation detail, recreated at every Open.
var staging = []string{
	`CREATE OR REPLACE TABLE staging_rollups (minute TIMESTAMP, writer VARCHAR, version UBIGINT, service VARCHAR,
    tenant VARCHAR, route VARCHAR, tier UTINYINT, kind VARCHAR, count UBIGINT, errors UBIGINT, duration_seconds DOUBLE,
    ru DOUBLE, bytes UBIGINT, "rows" UBIGINT, active_session_seconds DOUBLE, latency BLOB)`,
	`CREATE OR REPLACE TABLE staging_hot_keys (minute TIMESTAMP, writer VARCHAR, version UBIGINT, key VARCHAR,
    tenant VARCHAR, count UBIGINT, err UBIGINT)`,
	`CREATE OR REPLACE TABLE staging_statements (time TIMESTAMP_NS, writer VARCHAR, pid INTEGER, tenant VARCHAR,
    route VARCHAR, application VARCHAR, query VARCHAR, state VARCHAR, wait_event_type VARCHAR, wait_event VARCHAR,
    duration_seconds DOUBLE)`,
	`CREATE OR REPLACE TABLE staging_audit (time TIMESTAMP_NS, who VARCHAR, action VARCHAR, policy_version UBIGINT,
    rule VARCHAR)`,
}

// merger merges the staging table into its table inside tx; committed,
// when not nil, runs once the transaction has committed, under the write
// lock.
type merger func(ctx context.Context, tx *sql.Tx) (committed func(), err error)

// statement is the merger that runs one statement.
func statement(q string) merger {
	return func(ctx context.Context, tx *sql.Tx) (func(), error) {
		_, err := tx.ExecContext(ctx, q)
		return nil, err
	}
}

// write appends n rows to the staging table, then merges them into the
// table in one transaction. Writes are serialised.
func (s *Store) write(ctx context.Context, what, stagingTable string, merge merger, n int, row func(i int) []driver.Value) (err error) {
	done, err := s.begin()
	if err != nil {
		return err
	}
	defer done()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	start := time.Now()
	defer func() { s.wm.Written(strings.TrimPrefix(stagingTable, "staging_"), n, start, err) }()
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("duckstore: write %s: %w", what, err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "DELETE FROM "+stagingTable); err != nil {
		return fmt.Errorf("duckstore: write %s: %w", what, err)
	}
	err = conn.Raw(func(dc any) error {
		a, err := duckdb.NewAppenderFromConn(dc.(driver.Conn), "", stagingTable)
		if err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			if err := a.AppendRow(row(i)...); err != nil {
				a.Close()
				return err
			}
		}
		return a.Close()
	})
	if err != nil {
		return fmt.Errorf("duckstore: write %s: %w", what, err)
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("duckstore: write %s: %w", what, err)
	}
	defer tx.Rollback()
	committed, err := merge(ctx, tx)
	if err != nil {
		return fmt.Errorf("duckstore: write %s: %w", what, err)
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM "+stagingTable); err != nil {
		return fmt.Errorf("duckstore: write %s: %w", what, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("duckstore: write %s: %w", what, err)
	}
	if committed != nil {
		committed()
	}
	return nil
}

const upsertRollup = `INSERT INTO rollups (tkey, minute, writer, version, service, tenant, route, tier, kind,
    count, errors, duration_seconds, ru, bytes, "rows", active_session_seconds, latency)
SELECT md5_number_upper(tenant), minute, writer, version, service, tenant, route, tier, kind,
    count, errors, duration_seconds, ru, bytes, "rows", active_session_seconds, latency
FROM staging_rollups
ON CONFLICT (tenant, minute, route, kind, service, writer) DO UPDATE SET
    version = excluded.version, tier = excluded.tier, count = excluded.count, errors = excluded.errors,
    duration_seconds = excluded.duration_seconds, ru = excluded.ru, bytes = excluded.bytes,
    "rows" = excluded."rows", active_session_seconds = excluded.active_session_seconds, latency = excluded.latency
WHERE excluded.version >= rollups.version`

// WriteRollups implements store.Store.
func (s *Store) WriteRollups(ctx context.Context, rows []store.Rollup) error {
	if err := store.ValidateRollups(rows); err != nil || len(rows) == 0 {
		return err
	}
	rows = latestRollups(rows)
	return s.write(ctx, "rollups", "staging_rollups", s.mergeRollups(rows), len(rows), func(i int) []driver.Value {
		r := &rows[i]
		return []driver.Value{r.Minute.UTC(), r.Writer, r.Version, r.Service, r.Tenant, r.Route, uint8(r.Tier), r.Kind,
			r.Count, r.Errors, r.DurationSeconds, r.RU, r.Bytes, r.Rows, r.ActiveSessionSeconds, encodeLatency(&r.Latency)}
	})
}

// latestRollups keeps the newest version of each key in a batch: one
// statement may not update the same row twice.
func latestRollups(rows []store.Rollup) []store.Rollup {
	type key struct {
		m                                    int64
		writer, service, tenant, route, kind string
	}
	at := make(map[key]int, len(rows))
	out := rows[:0:0]
	for _, r := range rows {
		k := key{r.Minute.Unix(), r.Writer, r.Service, r.Tenant, r.Route, r.Kind}
		if i, ok := at[k]; ok {
			if r.Version >= out[i].Version {
				out[i] = r
			}
			continue
		}
		at[k] = len(out)
		out = append(out, r)
	}
	return out
}

const upsertHotKey = `INSERT INTO hot_keys (minute, writer, version, key, tenant, count, err)
SELECT minute, writer, version, key, tenant, count, err FROM staging_hot_keys
ON CONFLICT (minute, key, writer) DO UPDATE SET
    version = excluded.version, tenant = excluded.tenant, count = excluded.count, err = excluded.err
WHERE excluded.version >= hot_keys.version`

// WriteHotKeys implements store.Store.
func (s *Store) WriteHotKeys(ctx context.Context, rows []store.HotKey) error {
	if err := store.ValidateHotKeys(rows); err != nil || len(rows) == 0 {
		return err
	}
	type key struct {
		m           int64
		writer, key string
	}
	at := map[key]int{}
	var uniq []store.HotKey
	for _, r := range rows {
		k := key{r.Minute.Unix(), r.Writer, r.Key}
		if i, ok := at[k]; ok {
			if r.Version >= uniq[i].Version {
				uniq[i] = r
			}
			continue
		}
		at[k] = len(uniq)
		uniq = append(uniq, r)
	}
	return s.write(ctx, "hot keys", "staging_hot_keys", statement(upsertHotKey), len(uniq), func(i int) []driver.Value {
		r := &uniq[i]
		return []driver.Value{r.Minute.UTC(), r.Writer, r.Version, r.Key, r.Tenant, r.Count, r.Err}
	})
}

// WriteStatements implements store.Store. A statement already stored (the
// same time, writer and PID) is left as it is.
func (s *Store) WriteStatements(ctx context.Context, rows []store.Statement) error {
	if err := store.ValidateStatements(rows); err != nil || len(rows) == 0 {
		return err
	}
	return s.write(ctx, "statements", "staging_statements", statement(`INSERT INTO statements BY NAME
SELECT DISTINCT ON (time, writer, pid) * FROM staging_statements ON CONFLICT DO NOTHING`),
		len(rows), func(i int) []driver.Value {
			r := &rows[i]
			return []driver.Value{r.Time.UTC(), r.Writer, r.PID, r.Tenant, r.Route, r.Application, r.Query,
				r.State, r.WaitEventType, r.WaitEvent, r.Duration.Seconds()}
		})
}

// WriteAudit implements store.Store. An identical change already stored is
// left as it is.
func (s *Store) WriteAudit(ctx context.Context, rows []store.Audit) error {
	if err := store.ValidateAudit(rows); err != nil || len(rows) == 0 {
		return err
	}
	return s.write(ctx, "audit", "staging_audit", statement(`INSERT INTO audit BY NAME
SELECT DISTINCT ON (time, who, policy_version, action) * FROM staging_audit ON CONFLICT DO NOTHING`),
		len(rows), func(i int) []driver.Value {
			r := &rows[i]
			return []driver.Value{r.Time.UTC(), r.Who, r.Action, r.PolicyVersion, r.Rule}
		})
}

// Usage implements store.Store.
func (s *Store) Usage(ctx context.Context, from, to time.Time, byRoute bool) ([]store.Usage, error) {
	done, err := s.begin()
	if err != nil {
		return nil, err
	}
	defer done()
	route := "''"
	if byRoute {
		route = "route"
	}
	// The hot rows, the cold ones of partial hours, the sums of the rest.
	parts, args := usageParts(from, to)
	// n counts the rows under a line: a line whose sums cancel out (rows
	// replaced or retained since) covers none and is left out.
	q := fmt.Sprintf(`SELECT tenant, %s AS r,
    CAST(coalesce(sum(count) FILTER (WHERE kind IN ('request', 'job')), 0) AS UBIGINT),
    CAST(coalesce(sum(errors) FILTER (WHERE kind IN ('request', 'job')), 0) AS UBIGINT),
    coalesce(sum(duration_seconds) FILTER (WHERE kind IN ('request', 'job')), 0),
    coalesce(sum(duration_seconds) FILTER (WHERE kind = 'db'), 0) + coalesce(sum(coalesce(active_session_seconds, 0) - duration_seconds) FILTER (WHERE kind = 'pg'), 0),
    coalesce(sum(ru), 0),
    CAST(coalesce(sum(bytes), 0) AS UBIGINT)
FROM (%s)
GROUP BY tenant, r
HAVING sum(n) > 0
ORDER BY tenant, r`, route, parts)
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("duckstore: usage: %w", err)
	}
	defer rows.Close()
	var out []store.Usage
	for rows.Next() {
		var u store.Usage
		if err := rows.Scan(&u.Tenant, &u.Route, &u.Requests, &u.Errors, &u.DurationSeconds, &u.DBSeconds, &u.RU, &u.Bytes); err != nil {
			return nil, fmt.Errorf("duckstore: usage: %w", err)
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("duckstore: usage: %w", err)
	}
	return out, nil
}

// History implements store.Store.
func (s *Store) History(ctx context.Context, tenantName string, from, to time.Time) ([]store.Rollup, error) {
	done, err := s.begin()
	if err != nil {
		return nil, err
	}
	defer done()
	q := rollupsFrom(`minute, tier,
    CASE WHEN kind IN ('request', 'job') THEN count ELSE 0 END AS count,
    CASE WHEN kind IN ('request', 'job') THEN errors ELSE 0 END AS errors,
    CASE kind WHEN 'db' THEN duration_seconds WHEN 'pg' THEN coalesce(active_session_seconds, 0) - duration_seconds ELSE 0 END AS duration_seconds,
    ru, bytes, "rows", active_session_seconds,
    CASE WHEN kind IN ('request', 'job') THEN latency END AS latency`,
		fmt.Sprintf("tkey = %d AND tenant = ? AND minute >= ? AND minute < ?", tenantKey(tenantName))) + "\nORDER BY minute"
	f, t := from.UTC(), to.UTC()
	rows, err := s.db.QueryContext(ctx, q, tenantName, f, t, tenantName, f, t)
	if err != nil {
		return nil, fmt.Errorf("duckstore: history: %w", err)
	}
	defer rows.Close()
	var out []store.Rollup
	for rows.Next() {
		var (
			r    store.Rollup
			tier uint8
			lat  []byte
		)
		if err := rows.Scan(&r.Minute, &tier, &r.Count, &r.Errors, &r.DurationSeconds, &r.RU, &r.Bytes, &r.Rows, &r.ActiveSessionSeconds, &lat); err != nil {
			return nil, fmt.Errorf("duckstore: history: %w", err)
		}
		r.Minute = r.Minute.UTC()
		n := len(out)
		if n == 0 || !out[n-1].Minute.Equal(r.Minute) {
			out = append(out, store.Rollup{Minute: r.Minute, Tenant: tenantName})
			n++
		}
		h := &out[n-1]
		h.Tier = max(h.Tier, tenant.Tier(tier))
		h.Count += r.Count
		h.Errors += r.Errors
		h.DurationSeconds += r.DurationSeconds
		h.RU += r.RU
		h.Bytes += r.Bytes
		h.Rows += r.Rows
		h.ActiveSessionSeconds += r.ActiveSessionSeconds
		if err = addLatency(&h.Latency, lat); err != nil {
			return nil, fmt.Errorf("duckstore: history: %w", err)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("duckstore: history: %w", err)
	}
	return out, nil
}

// encodeLatency stores a histogram sparse: uvarint pairs (bucket, count)
// of the non-empty buckets, increasing; nil (NULL) when there is none.
func encodeLatency(lat *histogram.Sparse) []byte {
	if lat.Len() == 0 {
		return nil
	}
	b := make([]byte, 0, 4*lat.Len())
	lat.Buckets(func(i int, c uint64) {
		b = binary.AppendUvarint(b, uint64(i))
		b = binary.AppendUvarint(b, c)
	})
	return b
}

// addLatency adds an encoded histogram to dst (counts saturate, as
// ratio.Sparse's do). On error dst holds the buckets before the bad one.
func addLatency(dst *histogram.Sparse, b []byte) error {
	for len(b) > 0 {
		i, n := binary.Uvarint(b)
		if n <= 0 || i >= histogram.NumBuckets {
			return errors.New("corrupt latency histogram")
		}
		b = b[n:]
		c, n := binary.Uvarint(b)
		if n <= 0 {
			return errors.New("corrupt latency histogram")
		}
		b = b[n:]
		dst.Add(int(i), c) // a zero count (never written) adds nothing
	}
	return nil
}

// Ping implements store.Store.
func (s *Store) Ping(ctx context.Context) error {
	done, err := s.begin()
	if err != nil {
		return err
	}
	defer done()
	if err := s.db.PingContext(ctx); err != nil {
		return fmt.Errorf("duckstore: ping: %w", err)
	}
	return nil
}

// Close implements store.Store: it waits for calls in flight, then closes
// the file. Calls after Close return store.ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	s.closed = true
	s.wm.Unregister()
	return errors.Join(s.db.Close(), s.connector.Close())
}
