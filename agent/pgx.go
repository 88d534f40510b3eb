package agent

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/qtop-dev/qtop/sqlcomment"
	"github.com/qtop-dev/qtop/sqlcomment/pgxcomment"
	"github.com/qtop-dev/qtop/tenant"
)

// OpenPgxPool opens a pgx pool from cfg and returns it wrapped: the
// statements sent through the returned DB carry the comment of their
// context's tenant and are recorded as database time, and the time each
// acquisition waits for a connection is recorded per tenant (pool
// exhaustion is where a noisy neighbour shows first) and reported as the
// window's pool wait. Close the pool when done.
func (a *Agent) OpenPgxPool(ctx context.Context, cfg *pgxpool.Config, opts ...sqlcomment.Option) (*pgxcomment.DB, *pgxpool.Pool, error) {
	if cfg == nil {
		return nil, nil, fmt.Errorf("%w: nil pgxpool config", ErrConfig)
	}
	a.ConfigurePgxPool(cfg)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("agent: pgx pool: %w", err)
	}
	o := []sqlcomment.Option{sqlcomment.WithApplication(a.cfg.service), sqlcomment.WithObserver(a.obs),
		sqlcomment.WithMode(a.cfg.sqlMode), sqlcomment.WithTenantNames(a.cfg.sqlNames)}
	if a.cfg.budgets != nil {
		o = append(o, sqlcomment.WithBudgets(a.cfg.budgets))
	}
	o = append(o, opts...)
	db := pgxcomment.Wrap(pool, o...)
	a.logTagging("pgx", db.Mode())
	return db, pool, nil
}

// logTagging says where a handle's statements carry their tenant (the
// mode WithSQLTagging resolved to for its driver), once per handle made.
func (a *Agent) logTagging(driver string, m sqlcomment.Mode) {
	if a.cfg.logger != nil {
		a.cfg.logger.Info("agent: SQL tagging", "driver", driver, "mode", m.String(), "asked", a.cfg.sqlMode.String())
	}
}

// TenantNames holds the names behind the short ids that session tagging
// (WithSQLTagging) writes for tenants whose names do not fit in
// application_name; the agent's reporter sends them to the collector
// (TenantNames.Section), whose pg_stat_activity sampler names them.
func (a *Agent) TenantNames() *sqlcomment.TenantNames { return a.cfg.sqlNames }

// ConfigurePgxPool installs the agent's acquire tracer on cfg (keeping a
// tracer already there, which still sees every call) and names its
// connections' sessions with the service unless cfg names them
// (application_name), for a pool opened by the caller; OpenPgxPool calls
// it.
func (a *Agent) ConfigurePgxPool(cfg *pgxpool.Config) {
	cfg.ConnConfig.Tracer = &poolTracer{a: a, next: cfg.ConnConfig.Tracer}
	a.nameSessions(cfg.ConnConfig)
}

// poolTracer measures pgxpool acquisitions.
type poolTracer struct {
	a    *Agent
	next pgx.QueryTracer
}

var (
	_ pgx.QueryTracer       = (*poolTracer)(nil)
	_ pgxpool.AcquireTracer = (*poolTracer)(nil)
	_ pgx.BatchTracer       = (*poolTracer)(nil)
	_ pgx.ConnectTracer     = (*poolTracer)(nil)
	_ pgx.PrepareTracer     = (*poolTracer)(nil)
	_ pgx.CopyFromTracer    = (*poolTracer)(nil)
	_ pgxpool.ReleaseTracer = (*poolTracer)(nil)
)

type acquireKey struct{}

func (t *poolTracer) TraceAcquireStart(ctx context.Context, p *pgxpool.Pool, d pgxpool.TraceAcquireStartData) context.Context {
	if n, ok := t.next.(pgxpool.AcquireTracer); ok {
		ctx = n.TraceAcquireStart(ctx, p, d)
	}
	now := time.Now().UnixNano()
	if q := requestOf(ctx); q != nil && q.acquire.CompareAndSwap(0, now) {
		return ctx // the request's own state holds the start: no allocation
	}
	return context.WithValue(ctx, acquireKey{}, now)
}

func (t *poolTracer) TraceAcquireEnd(ctx context.Context, p *pgxpool.Pool, d pgxpool.TraceAcquireEndData) {
	if n, ok := t.next.(pgxpool.AcquireTracer); ok {
		n.TraceAcquireEnd(ctx, p, d)
	}
	now := time.Now().UnixNano()
	start, ok := ctx.Value(acquireKey{}).(int64)
	q := requestOf(ctx)
	if !ok && q != nil {
		start, ok = q.acquire.Swap(0), true
	}
	if !ok || start == 0 {
		return
	}
	wait := time.Duration(now - start)
	if q != nil {
		q.poolWait.Add(int64(wait))
	}
	tags, _ := tenant.Lookup(ctx)
	t.a.pool.add(tags.Tenant, wait)
}

func (t *poolTracer) TraceQueryStart(ctx context.Context, c *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if t.next != nil {
		return t.next.TraceQueryStart(ctx, c, d)
	}
	return ctx
}

func (t *poolTracer) TraceQueryEnd(ctx context.Context, c *pgx.Conn, d pgx.TraceQueryEndData) {
	if t.next != nil {
		t.next.TraceQueryEnd(ctx, c, d)
	}
}

// The other tracer interfaces are forwarded when the wrapped tracer has
// them, so that wrapping loses nothing.

func (t *poolTracer) TraceBatchStart(ctx context.Context, c *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	if n, ok := t.next.(pgx.BatchTracer); ok {
		return n.TraceBatchStart(ctx, c, d)
	}
	return ctx
}

func (t *poolTracer) TraceBatchQuery(ctx context.Context, c *pgx.Conn, d pgx.TraceBatchQueryData) {
	if n, ok := t.next.(pgx.BatchTracer); ok {
		n.TraceBatchQuery(ctx, c, d)
	}
}

func (t *poolTracer) TraceBatchEnd(ctx context.Context, c *pgx.Conn, d pgx.TraceBatchEndData) {
	if n, ok := t.next.(pgx.BatchTracer); ok {
		n.TraceBatchEnd(ctx, c, d)
	}
}

func (t *poolTracer) TraceConnectStart(ctx context.Context, d pgx.TraceConnectStartData) context.Context {
	if n, ok := t.next.(pgx.ConnectTracer); ok {
		return n.TraceConnectStart(ctx, d)
	}
	return ctx
}

func (t *poolTracer) TraceConnectEnd(ctx context.Context, d pgx.TraceConnectEndData) {
	if n, ok := t.next.(pgx.ConnectTracer); ok {
		n.TraceConnectEnd(ctx, d)
	}
}

func (t *poolTracer) TracePrepareStart(ctx context.Context, c *pgx.Conn, d pgx.TracePrepareStartData) context.Context {
	if n, ok := t.next.(pgx.PrepareTracer); ok {
		return n.TracePrepareStart(ctx, c, d)
	}
	return ctx
}

func (t *poolTracer) TracePrepareEnd(ctx context.Context, c *pgx.Conn, d pgx.TracePrepareEndData) {
	if n, ok := t.next.(pgx.PrepareTracer); ok {
		n.TracePrepareEnd(ctx, c, d)
	}
}

func (t *poolTracer) TraceCopyFromStart(ctx context.Context, c *pgx.Conn, d pgx.TraceCopyFromStartData) context.Context {
	if n, ok := t.next.(pgx.CopyFromTracer); ok {
		return n.TraceCopyFromStart(ctx, c, d)
	}
	return ctx
}

func (t *poolTracer) TraceCopyFromEnd(ctx context.Context, c *pgx.Conn, d pgx.TraceCopyFromEndData) {
	if n, ok := t.next.(pgx.CopyFromTracer); ok {
		n.TraceCopyFromEnd(ctx, c, d)
	}
}

func (t *poolTracer) TraceRelease(p *pgxpool.Pool, d pgxpool.TraceReleaseData) {
	if n, ok := t.next.(pgxpool.ReleaseTracer); ok {
		n.TraceRelease(p, d)
	}
}
