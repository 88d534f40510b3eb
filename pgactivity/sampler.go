package pgactivity

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// marker is in the sampling query's text, so every sampler (this process's
// and any other's, sampling as the same role) leaves its own queries out.
const marker = "qtop pgactivity sampler"

// sampleSQL reads every client backend but the sampler's own (of the
// connection's database unless $2, WithAllDatabases), and the
// parallel workers of client backends (they are load of the same
// statement: a query with two workers keeps three processes busy).
// leader_pid appeared in PostgreSQL 13: before it workers cannot be tied
// to their leader and are left out.
//
// For a session hidden from the role PostgreSQL shows neither its
// backend_type nor its state: every hidden session attached to a database
// is kept (a hidden autovacuum or parallel worker among them, which cannot
// be told apart), so that Sample can say how many it could not see.
//
// It calls pg_blocking_pids only for sessions that wait for a lock (or for
// a safe snapshot), since the function takes the lock manager's locks.
func sampleSQL(leaderPID, queryID bool) string {
	leader, types, qid := "NULL::int4", "'client backend'", "NULL::int8"
	if leaderPID {
		leader, types = "a.leader_pid", "'client backend', 'parallel worker'"
	}
	if queryID {
		qid = "a.query_id"
	}
	return `SELECT /* ` + marker + ` */
	a.pid,
	` + leader + `,
	coalesce(a.datname, ''),
	coalesce(a.usename, ''),
	coalesce(a.application_name, ''),
	coalesce(a.state, ''),
	coalesce(a.wait_event_type, ''),
	coalesce(a.wait_event, ''),
	a.query_start,
	a.xact_start,
	coalesce(a.query, ''),
	CASE WHEN a.wait_event_type = 'Lock' OR a.wait_event = 'SafeSnapshot'
		THEN pg_blocking_pids(a.pid) END,
	clock_timestamp(),
	current_user,
	(SELECT setting::int FROM pg_settings WHERE name = 'track_activity_query_size'),
	coalesce(host(a.client_addr), ''),
	a.backend_start,
	coalesce(greatest(age(a.backend_xmin), age(a.backend_xid)), -1),
	CASE WHEN a.wait_event_type = 'Lock' THEN coalesce((SELECT l.mode || ' on ' || coalesce(l.relation::regclass::text, l.locktype)
		FROM pg_locks l WHERE l.pid = a.pid AND NOT l.granted LIMIT 1), '') ELSE '' END,
	` + qid + `
FROM pg_stat_activity a
WHERE (a.backend_type IN (` + types + `) OR (a.backend_type IS NULL AND a.datid IS NOT NULL))
	AND a.pid <> pg_backend_pid()
	AND coalesce(a.query, '') NOT LIKE '%` + marker + `%'
	AND ($1 OR coalesce(a.state, '') <> 'idle')
	AND ($2 OR a.datname = current_database())`
}

var (
	sampleSQL14 = sampleSQL(true, true)
	sampleSQL13 = sampleSQL(true, false)
	sampleSQL10 = sampleSQL(false, false)
)

// serverMajor reads the major version from the server_version the server
// reports at connection start ("15.18 (Debian …)", "9.6.24", "17beta1");
// 0 when it cannot.
func serverMajor(v string) int {
	n := 0
	for i := 0; i < len(v) && v[i] >= '0' && v[i] <= '9'; i++ {
		n = n*10 + int(v[i]-'0')
		if n > 1000 {
			return 0
		}
	}
	return n
}

// Sampler reads pg_stat_activity through a pool. It is safe for concurrent
// use; it holds one pooled connection only while a sample runs.
type Sampler struct {
	pool *pgxpool.Pool
	cfg  config
	seen seenNames // the names behind short ids, learned from comments
}

// NewSampler returns a sampler that reads through pool. The pool's role
// should have pg_monitor (see the package documentation).
func NewSampler(pool *pgxpool.Pool, opts ...Option) *Sampler {
	return &Sampler{pool: pool, cfg: newConfig(opts)}
}

// Sample reads pg_stat_activity once. Sessions whose details PostgreSQL
// hid from the sampling role are kept (State "", Query HiddenQuery) and
// counted in Snapshot.Hidden; when there are any, Sample returns the
// snapshot together with an error wrapping ErrInsufficientPrivilege that
// names the missing grant. Any other error wraps ErrSample and comes with
// an empty snapshot.
func (s *Sampler) Sample(ctx context.Context) (Snapshot, error) {
	snap := Snapshot{Time: s.cfg.now()}
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return Snapshot{}, fmt.Errorf("%w: %w", ErrSample, err)
	}
	defer c.Release()
	sql := sampleSQL14
	if v := c.Conn().PgConn().ParameterStatus("server_version"); serverMajor(v) < 14 {
		sql = sampleSQL13
	}
	if v := c.Conn().PgConn().ParameterStatus("server_version"); serverMajor(v) < 13 {
		if serverMajor(v) < 10 {
			return Snapshot{}, fmt.Errorf("%w: PostgreSQL %q is too old; pg_stat_activity.backend_type needs 10 or later", ErrSample, v)
		}
		sql = sampleSQL10
	}
	rows, err := c.Query(ctx, sql, s.cfg.idle, s.cfg.allDBs)
	if err != nil {
		return Snapshot{}, fmt.Errorf("%w: %w", ErrSample, err)
	}
	defer rows.Close()
	var (
		role      string
		querySize int32
	)
	for rows.Next() {
		var (
			b          Backend
			queryStart pgtype.Timestamptz // nullable without an allocation
			xactStart  pgtype.Timestamptz
			serverNow  time.Time
			leader     pgtype.Int4
			backStart  pgtype.Timestamptz
			xminAge    int32
			queryID    pgtype.Int8
		)
		if err := rows.Scan(&b.PID, &leader, &b.Database, &b.User, &b.Application, &b.State,
			&b.WaitEventType, &b.WaitEvent, &queryStart, &xactStart, &b.Query, &b.BlockedBy,
			&serverNow, &role, &querySize, &b.Client, &backStart, &xminAge, &b.LockWait, &queryID); err != nil {
			return Snapshot{}, fmt.Errorf("%w: %w", ErrSample, err)
		}
		if leader.Valid && leader.Int32 != b.PID { // a leader may show itself as its own leader
			b.LeaderPID = leader.Int32
		}
		b.setTimes(queryStart, xactStart, backStart, serverNow)
		b.XminAge, b.QueryID = int64(xminAge), queryID.Int64
		if b.Hidden() {
			snap.Hidden++
		} else {
			b.Truncated = querySize > 0 && len(b.Query) >= int(querySize)-4
			b.setTags()
			if b.Malformed {
				snap.Malformed++
			}
			if b.TagsCut {
				snap.TagsCut++
			}
		}
		s.seen.learn(&b)
		snap.Backends = append(snap.Backends, b)
	}
	if err := rows.Err(); err != nil {
		return Snapshot{}, fmt.Errorf("%w: %w", ErrSample, err)
	}
	s.setSessionTags(&snap)
	s.cfg.metrics.observe(&snap)
	if snap.Hidden > 0 {
		return snap, hiddenError(role, snap.Hidden, len(snap.Backends))
	}
	return snap, nil
}

// setSessionTags reads the session tags of snap's backends, after every
// comment of the sample has taught its names (seenNames), and counts the
// invalid tenants.
func (s *Sampler) setSessionTags(snap *Snapshot) {
	names := s.seen.resolver(s.cfg.names)
	for i := range snap.Backends {
		b := &snap.Backends[i]
		b.setSessionTags(names) // after the comment's, which win
		if b.InvalidTenant() {
			snap.InvalidTenants++
		}
	}
}

// checkSQL asks whether the role sees every session: pg_read_all_stats
// (a member of pg_monitor) or superuser, for which pg_has_role is true.
const checkSQL = `SELECT /* ` + marker + ` */ current_user, pg_has_role('pg_read_all_stats', 'USAGE')`

// Check tells whether the pool's role may see other roles' sessions. It
// returns an error wrapping ErrInsufficientPrivilege, naming the grant,
// when it may not, even while no other role is connected; call it once at
// start to warn early.
func (s *Sampler) Check(ctx context.Context) error {
	var (
		role string
		ok   bool
	)
	if err := s.pool.QueryRow(ctx, checkSQL).Scan(&role, &ok); err != nil {
		return fmt.Errorf("%w: %w", ErrSample, err)
	}
	if !ok {
		return fmt.Errorf("%w: role %q is not a member of pg_monitor or pg_read_all_stats, so the statements, states and waits of other roles' sessions are hidden from it; "+
			"grant it: GRANT pg_monitor TO %s", ErrInsufficientPrivilege, role, quoteIdent(role))
	}
	return nil
}

func hiddenError(role string, hidden, total int) error {
	return fmt.Errorf("%w: %d of %d sessions belong to other roles and their statements, states and waits are hidden from role %q; "+
		"grant it pg_monitor (or pg_read_all_stats): GRANT pg_monitor TO %s",
		ErrInsufficientPrivilege, hidden, total, role, quoteIdent(role))
}

// quoteIdent quotes a role name for the GRANT statement in an error.
func quoteIdent(s string) string {
	if s == "" {
		return `"…"`
	}
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// Run calls Sample at once and then every interval (1 s when interval is
// not positive) until ctx ends, and hands each result to fn, in Run's
// goroutine. Each sample may take up to the WithTimeout limit: a server
// under stress answers slowly, and a late sample is worth more than none
// during an incident. Ticks missed while a sample or fn runs are skipped,
// not queued. Run returns when ctx ends; it starts no goroutine.
func (s *Sampler) Run(ctx context.Context, interval time.Duration, fn func(Snapshot, error)) {
	if interval <= 0 {
		interval = time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		sctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
		snap, err := s.Sample(sctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		fn(snap, err)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// setTimes sets the session's instants that are not null, and the
// statement's duration by the server's clock.
func (b *Backend) setTimes(queryStart, xactStart, backStart pgtype.Timestamptz, serverNow time.Time) {
	b.QueryStart, b.XactStart, b.BackendStart = queryStart.Time, xactStart.Time, backStart.Time
	if b.Active() && !b.QueryStart.IsZero() {
		if d := serverNow.Sub(b.QueryStart); d > 0 {
			b.Duration = d
		}
	}
}
