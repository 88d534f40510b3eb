package tui

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/pgactivity"
	"github.com/qtop-dev/qtop/policy"
)

// Postgres samples pg_stat_activity itself every interval, reads the
// sqlcommenter tags of every running statement and groups the load by
// tenant: no collector needed. It can cancel and terminate backends.
type Postgres struct {
	pool     *pgxpool.Pool
	sampler  *pgactivity.Sampler
	metrics  *pgactivity.Metrics
	desc     string
	interval time.Duration
	now      func() time.Time

	mu     sync.Mutex
	agg    *pgRecent
	server pgServer
	last   time.Time // when the last sample was taken
	warn   string    // the privilege check's warning
	closed bool
	done   chan struct{}
}

var (
	_ Source     = (*Postgres)(nil)
	_ OnceSource = (*Postgres)(nil)
)

type pgConfig struct {
	interval time.Duration
	now      func() time.Time
}

// PostgresOption configures NewPostgres.
type PostgresOption func(*pgConfig)

// WithInterval sets how often pg_stat_activity is sampled (default 1 s).
func WithInterval(d time.Duration) PostgresOption { return func(c *pgConfig) { c.interval = d } }

// WithPostgresClock sets the clock (default time.Now).
func WithPostgresClock(now func() time.Time) PostgresOption { return func(c *pgConfig) { c.now = now } }

// NewPostgres connects to the server of dsn (a role with pg_monitor sees
// every session; pg_signal_backend lets c and k signal them) and checks
// that it answers.
func NewPostgres(ctx context.Context, dsn string, opts ...PostgresOption) (*Postgres, error) {
	cfg := pgConfig{interval: time.Second, now: time.Now}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.interval <= 0 {
		return nil, fmt.Errorf("%w: sampling interval %s: want > 0", ErrInput, cfg.interval)
	}
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("%w: --postgres: %v (want postgres://user:password@host:5432/db or \"host=… user=… dbname=…\")", ErrInput, err)
	}
	pc.MaxConns = 2
	desc := fmt.Sprintf("postgres %s@%s:%d/%s", pc.ConnConfig.User, pc.ConnConfig.Host, pc.ConnConfig.Port, pc.ConnConfig.Database)
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("tui: %s: %w", desc, err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("%w: cannot connect to %s: %w", ErrUnreachable, desc, err)
	}
	met, _ := pgactivity.NewMetrics(nil) // cannot fail without a registerer
	p := &Postgres{
		pool: pool, sampler: pgactivity.NewSampler(pool, pgactivity.WithClock(cfg.now), pgactivity.WithMetrics(met)), metrics: met,
		desc: desc, interval: cfg.interval, now: cfg.now, agg: newPGRecent(), done: make(chan struct{}),
	}
	if err := p.sampler.Check(pctx); err != nil {
		p.warn = err.Error()
	}
	return p, nil
}

// Describe names the server.
func (p *Postgres) Describe() string { return p.desc }

// Features: backends can be signalled and load grouped by any session
// field; there is no policy to throttle.
func (p *Postgres) Features() Features { return Features{Signal: true, Group: true} }

// Next waits for the next sampling instant, samples pg_stat_activity and
// returns the load over the last samples.
func (p *Postgres) Next(ctx context.Context, q Query) (api.Snapshot, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return api.Snapshot{}, ErrClosed
	}
	last := p.last
	p.mu.Unlock()
	if !last.IsZero() {
		if wait := last.Add(p.interval).Sub(p.now()); wait > 0 {
			t := time.NewTimer(wait)
			defer t.Stop()
			select {
			case <-ctx.Done():
				return api.Snapshot{}, ctx.Err()
			case <-p.done:
				return api.Snapshot{}, ErrClosed
			case <-t.C:
			}
		}
	}
	return p.sample(ctx, q)
}

// Once takes one sample and returns it, for --once: its Window is 0, as
// one sample averages over nothing.
func (p *Postgres) Once(ctx context.Context, q Query) (api.Snapshot, error) {
	s, err := p.sample(ctx, q)
	s.Window = 0
	return s, err
}

func (p *Postgres) sample(ctx context.Context, q Query) (api.Snapshot, error) {
	sctx, cancel := context.WithTimeout(ctx, pgactivity.DefaultTimeout)
	defer cancel()
	go func() {
		select {
		case <-p.done:
			cancel()
		case <-sctx.Done():
		}
	}()
	snap, err := p.sampler.Sample(sctx)
	var sr serverRead
	if err == nil || errors.Is(err, pgactivity.ErrInsufficientPrivilege) {
		sr = p.read(sctx)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return api.Snapshot{}, ErrClosed
	}
	p.last = p.now()
	if err != nil && !errors.Is(err, pgactivity.ErrInsufficientPrivilege) {
		return api.Snapshot{}, fmt.Errorf("%s: %w", p.desc, err)
	}
	p.agg.add(snap, p.interval)
	msg := p.warn
	if err != nil {
		msg = err.Error()
	}
	out := p.agg.snapshot(snap.Time, q, msg)
	out.Collector.MalformedComments, out.Collector.TruncatedStatements = p.metrics.Counts()
	p.server.see(snap.Backends)
	p.server.apply(&out, sr, p.now())
	return out, nil
}

// serverRead is what the source reads beside pg_stat_activity.
type serverRead struct {
	stats    pgactivity.ServerStats
	statsErr error
	stmts    []pgactivity.StatementStats
	stmtsErr error
}

// read reads the server's header figures and pg_stat_statements.
func (p *Postgres) read(ctx context.Context) serverRead {
	var r serverRead
	r.stats, r.statsErr = pgactivity.ReadStats(ctx, p.pool)
	r.stmts, r.stmtsErr = pgactivity.ReadStatements(ctx, p.pool, pgTopSQLRead)
	return r
}

// Throttle is not supported: without a collector there is no policy.
func (p *Postgres) Throttle(context.Context, policy.Rule) error {
	return fmt.Errorf("%w: throttling needs a collector (qtop --collector URL)", ErrUnsupported)
}

// Cancel cancels the statement of backend pid.
func (p *Postgres) Cancel(ctx context.Context, pid int32) error {
	return pgactivity.Cancel(ctx, p.pool, pid)
}

// Terminate ends the session of backend pid.
func (p *Postgres) Terminate(ctx context.Context, pid int32) error {
	return pgactivity.Terminate(ctx, p.pool, pid)
}

var _ SafeSignaler = (*Postgres)(nil)

// CancelStatement cancels the statement of t only if its backend still
// runs it (pgactivity.CancelStatement).
func (p *Postgres) CancelStatement(ctx context.Context, t pgactivity.Target, actor string) error {
	return pgactivity.CancelStatement(ctx, p.pool, t, actor)
}

// TerminateSession ends the session of t only if it is still the one
// shown (pgactivity.TerminateSession).
func (p *Postgres) TerminateSession(ctx context.Context, t pgactivity.Target, actor string) error {
	return pgactivity.TerminateSession(ctx, p.pool, t, actor)
}

// Close closes the pool.
func (p *Postgres) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.done)
	p.mu.Unlock()
	p.pool.Close()
	return nil
}

// Window of the PostgreSQL source: DB load is the average active sessions
// over the last pgWindowLen samples; histories hold api.HistoryLen
// samples.
const (
	pgWindowLen     = 10
	pgStatementsMax = 200
	pgXminMax       = 10
)

// numGroups is len(live.Groups).
const numGroups = 6

// groupIndex returns the index of grouping g in live.Groups ("" is
// tenant), or -1.
func groupIndex(g string) int {
	if g == "" {
		return 0
	}
	for i, x := range api.Groups {
		if x == g {
			return i
		}
	}
	return -1
}
