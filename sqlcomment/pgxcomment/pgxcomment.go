// Package pgxcomment puts sqlcommenter tags on the statements of pgx v5
// users who do not go through database/sql: a *pgxpool.Pool, a *pgx.Conn
// or a pgx.Tx wrapped with Wrap.
//
// # Why a wrapper that switches the execution mode
//
// pgx by default prepares every statement text on the server and caches it
// by text (QueryExecModeCacheStatement, 512 statements per connection).
// A comment with a tenant makes the text differ per tenant: with 10,000
// tenants each connection prepares, evicts and deallocates statements in a
// loop, and server memory grows with prepared statements. That is why a
// QueryRewriter that adds comments "defeats the statement cache", as pgx's
// maintainers say, and why sqlcommenter users have seen prepared-statement
// caches blow up in production.
//
// The statement cache cannot be kept for a text that varies per request:
// PostgreSQL shows, in pg_stat_activity, the text a statement was prepared
// with, so the comment must be in that text. What does not defeat the cache
// is to leave it for the texts that do not vary, and to send the texts that
// do with QueryExecModeExec: the unnamed statement, parsed and executed in
// the same single round trip (Parse, Bind, Describe, Execute, Sync), with
// nothing left prepared on the server and nothing put in pgx's caches. So a
// DB here:
//
//   - sends a statement whose context has no tags (and no traceparent) as
//     is, in the connection's default mode, cached as before; static tags
//     (application, db_driver) do not vary, so they are kept on it;
//   - sends a statement whose comment carries per-request values with
//     QueryExecModeExec prepended to its arguments, unless the caller chose
//     a mode (a QueryExecMode as first argument), which is respected;
//   - adds traceparent (sqlcomment.WithTraceContext) only to statements it
//     sends in QueryExecModeExec or QueryExecModeSimpleProtocol, where it
//     cannot multiply prepared statements.
//
// The cost of QueryExecModeExec over a cached statement is the server
// parsing and planning the statement each time, and arguments encoded from
// their Go types rather than from a described statement; the simple
// protocol (pgx.QueryExecModeSimpleProtocol as first argument, respected
// here) is the alternative. bench/README.md has the measured ratios.
//
// For database/sql through pgx's stdlib, pass StdlibExecMode to
// sqlcomment.WrapConnector or sqlcomment.Open: the wrapper then prepends
// QueryExecModeExec to the arguments of tagged ExecContext and QueryContext
// calls in the same way.
//
// # Sessions
//
// A comment cannot carry the tenant without making each text differ per
// tenant. The session can: with sqlcomment.WithMode(sqlcomment.ModeSession)
// (or ModeAuto, which is session for pgx) a DB sends statements as
// written, so pgx's statement cache keeps them prepared, and puts the
// tenant and tier in application_name, which pg_stat_activity shows
// beside every statement (sqlcomment.ApplicationName: "billing|t=acme|T2",
// at most 63 ASCII bytes, long or non-ASCII tenants as a short id; its
// service is sqlcomment.WithApplication's or, without it, the
// application_name the pool's connections open with):
//
//   - Begin and BeginTx send "BEGIN; SET LOCAL application_name = '…'" as
//     one simple query: the round trip BEGIN took anyway. The name is the
//     transaction's only: COMMIT and ROLLBACK undo it, so a connection
//     goes back to its pool under its own name and the next tenant never
//     runs under the previous one's; it is also safe behind PgBouncer's
//     transaction pooling (bench/pgbouncer). Run the statements through
//     db.With(tx): they run under the transaction's name whatever their
//     own contexts' tenants. An error in the transaction undoes the name
//     at once, not at ROLLBACK: PostgreSQL shows the session "idle in
//     transaction (aborted)" under its own name.
//   - A transaction that Begin did not name (begun with a context
//     without a tenant, with opts.BeginQuery, or elsewhere: pool.Begin)
//     runs under the connection's own name, and db.With(tx) sends its
//     statements with their own context's tenant in the comment (in
//     QueryExecModeExec, as ModeComment does; untagged ones as written);
//     the name is never set in the middle of a transaction, where it
//     would stay on the statements that follow. A transaction Begin names is returned as a pgx.Tx that
//     wraps the pool's or connection's, so that With can tell.
//   - Exec, Query and QueryRow outside a transaction send
//     set_config('application_name', $1, true) and the statement as one
//     pgx batch: one round trip, one implicit transaction, both statements
//     prepared and cached; an Exec without arguments (a simple query, which
//     may hold several statements) is sent as "SET LOCAL …; statement"
//     (the collector's sampler reads the statement after it).
//     Statements that PostgreSQL refuses in a transaction block (VACUUM,
//     CREATE DATABASE, CREATE INDEX CONCURRENTLY and the like, behind
//     comments too), CALL and DO (a procedure or block may commit), those
//     it refuses or ignores outside one (LOCK, SAVEPOINT, RELEASE, ROLLBACK
//     TO, DECLARE, SET LOCAL, SET TRANSACTION, …: the tag's transaction
//     would hide the mistake) and those whose first argument is a
//     pgx.QueryExecMode, pgx.QueryResultFormats or
//     pgx.QueryResultFormatsByOID (a batch cannot carry them) carry the
//     tenant in a comment instead: the tag never changes what a statement
//     does.
//   - Untagged contexts are sent as is, under the connection's own name.
//   - A savepoint (db.With(tx).Begin, tx.Begin, pgx.BeginFunc on it) runs
//     under its transaction's name, whatever its context's tenant, and its
//     statements are sent as their transaction's are.
//
// DB.Mode says which mode a DB resolved ModeAuto to.
//
// Behind PgBouncer's transaction pooling, statements stay prepared only
// where PgBouncer keeps prepared statements across its server connections
// (1.21 and later, with max_prepared_statements): an older one hands a
// client's next statement to a server connection that lacks (or already
// has) pgx's "stmtcache_…" statement, and pgx's default
// QueryExecModeCacheStatement fails there with or without this package.
// Use QueryExecModeExec, QueryExecModeCacheDescribe or
// QueryExecModeSimpleProtocol as the connection's default mode with such a
// PgBouncer.
//
// ModeBoth adds the comment too (route, traceparent), at the comment's
// cost; its statements outside a transaction carry the comment only. The
// pgactivity sampler reads both forms. StdlibSession does the same for
// database/sql over pgx's stdlib, except outside a transaction: there a
// statement carries the comment, as in ModeComment (with StdlibExecMode it
// is sent in QueryExecModeExec, not prepared per tenant), since
// database/sql's rows cannot come from a pgx batch, and a name set for the
// session would outlive the statement: behind PgBouncer's transaction
// pooling the server connection goes on to other clients, which do not
// reset a name they never set, and their statements would show the
// tenant. A statement prepared with Prepare and run outside a transaction
// shows no tenant in ModeSession (in ModeBoth, the comment of the context
// it was prepared in); the Observer still charges each run to its
// context's tenant.
// bench/README.md has the cost against untagged pgx: BenchmarkPostgresTPCBSession.
//
// # Budgets
//
// With sqlcomment.WithBudgets, a DB applies the database budgets and
// runaway rules of a sqlcomment.Budgets to Exec, Query and QueryRow
// before sending (an Enforce refusal is an error that
// errors.Is(err, sqlcomment.ErrBudget), sent nothing); a runaway rule's
// deadline is the statement's context deadline, so pgx cancels it on the
// server, and the caller's error names the rule (a
// *sqlcomment.RunawayError, errors.Is(err, context.DeadlineExceeded))
// from Exec, from Query or, where pgx defers it, from rows.Err and
// Row.Scan. Begin checks a transaction before it begins; a DB made by With
// for a pgx.Tx never refuses the transaction's statements (see
// Transactions in the sqlcomment.Budgets doc).
//
// Batches (SendBatch) and CopyFrom are not commented: a batch's queued
// texts could be, but its execution mode is the connection's; COPY has no
// statement text of the caller's. Run them through the wrapped value's
// Querier if they must be attributed (QueryExecModeExec per statement).
package pgxcomment

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/qtop-dev/qtop/sqlcomment"
)

// Querier is what *pgxpool.Pool, *pgx.Conn and pgx.Tx have in common.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// DB comments the statements it sends to a Querier. It is safe for
// concurrent use when the Querier is (a pool is; a pgx.Conn or a pgx.Tx is
// not).
type DB struct {
	q Querier
	c *sqlcomment.Commenter
	// inTx: q is a pgx.Tx, whose statements budgets never refuse.
	inTx bool
	// named: q is a transaction whose BEGIN set the application_name
	// (namedTx), whose statements ModeSession sends as written.
	named bool
	mode  sqlcomment.Mode // resolved: ModeComment, ModeSession or ModeBoth
	// own is the application_name q's connections open with (a pool's or
	// connection's configuration), the service of session names without
	// sqlcomment.WithApplication (Commenter.SessionName).
	own string
}

var _ Querier = (*DB)(nil)

// Wrap returns a DB that sends q's statements with the tags of their
// context, configured by opts (sqlcomment.WithApplication, WithObserver, …).
// Wrap a pool or connection once: each DB has a Commenter, whose caches
// take about 20 KiB; use With for a transaction.
func Wrap(q Querier, opts ...sqlcomment.Option) *DB {
	_, inTx := q.(pgx.Tx)
	_, named := q.(namedTx)
	c := sqlcomment.NewCommenter(opts...)
	return &DB{q: q, c: c, inTx: inTx, named: named, mode: c.Mode().Resolve(true), own: ownName(q)}
}

// Mode returns the mode db tags in: ModeAuto and the session modes as
// resolved for pgx (ModeSession for ModeAuto).
func (db *DB) Mode() sqlcomment.Mode { return db.mode }

// ownName returns the application_name q's connections open with, when q
// says ("" for a transaction: its DB keeps its parent's).
func ownName(q Querier) string {
	switch q := q.(type) {
	case *pgxpool.Pool:
		return q.Config().ConnConfig.RuntimeParams["application_name"]
	case *pgx.Conn:
		return q.Config().RuntimeParams["application_name"]
	case *pgxpool.Conn: // from pool.Acquire
		return q.Conn().Config().RuntimeParams["application_name"]
	}
	return ""
}

// With returns a DB for q that shares db's configuration and counters; use
// it for a transaction: tx, _ := pool.Begin(ctx); db.With(tx).Exec(…).
func (db *DB) With(q Querier) *DB {
	_, inTx := q.(pgx.Tx)
	_, named := q.(namedTx)
	own := ownName(q)
	if own == "" {
		own = db.own
	}
	return &DB{q: q, c: db.c, inTx: inTx, named: named, mode: db.mode, own: own}
}

// Commenter returns the DB's commenter (for Dropped).
func (db *DB) Commenter() *sqlcomment.Commenter { return db.c }

// StdlibExecMode is the option for sqlcomment.WrapConnector and
// sqlcomment.Open over pgx's stdlib driver: tagged statements are sent with
// QueryExecModeExec instead of being prepared and cached per text.
func StdlibExecMode() sqlcomment.Option {
	return sqlcomment.WithLeadingArgs(pgx.QueryExecModeExec)
}

// statement returns the text to send and the arguments to send it with.
func (db *DB) statement(ctx context.Context, sql string, args []any) (sqlcomment.Statement, []any) {
	if db.mode == sqlcomment.ModeSession && !sendsOwn(sql, args) {
		// A statement that must be sent without a session tag (sendsOwn),
		// or a tenant's in a transaction that BEGIN did not name, carries
		// the comment instead.
		st := db.c.Plain(ctx, sql)
		if !db.inTx || db.named || !st.Tagged || st.Tags.Tenant == "" {
			return st, args
		}
	}
	if len(args) > 0 {
		if m, ok := args[0].(pgx.QueryExecMode); ok {
			// The caller chose the mode: a traceparent only where nothing is
			// prepared by text.
			noCache := m == pgx.QueryExecModeExec || m == pgx.QueryExecModeSimpleProtocol
			return db.c.Comment(ctx, sql, !noCache), args
		}
	}
	st := db.c.Comment(ctx, sql, false)
	if !st.Unique {
		return st, args
	}
	out := make([]any, 0, len(args)+1)
	out = append(out, pgx.QueryExecModeExec)
	return st, append(out, args...)
}

// Exec runs a statement with the comment of ctx.
func (db *DB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	st, args := db.statement(ctx, sql, args)
	if db.c.Budgets() != nil {
		return db.execBudgeted(ctx, sql, st, args)
	}
	if !db.c.Observing() {
		return db.exec(ctx, &st, sql, args)
	}
	start := time.Now()
	tag, err := db.exec(ctx, &st, sql, args)
	rows := int64(-1)
	if err == nil {
		rows = tag.RowsAffected()
	}
	db.c.Observe(ctx, sqlcomment.Event{Tags: st.Tags, Tagged: st.Tagged, Op: sqlcomment.OpExec,
		Query: st.Query, Start: start, Duration: time.Since(start), Rows: rows, Err: err})
	return tag, err
}

// Query runs a query with the comment of ctx. With an Observer, the query
// is reported when its rows are closed (pgx closes them when Next returns
// false).
func (db *DB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	st, args := db.statement(ctx, sql, args)
	if db.c.Budgets() != nil {
		return db.queryBudgeted(ctx, sql, st, args)
	}
	if !db.c.Observing() {
		return db.query(ctx, &st, sql, args)
	}
	start := time.Now()
	r, err := db.query(ctx, &st, sql, args)
	ev := sqlcomment.Event{Tags: st.Tags, Tagged: st.Tagged, Op: sqlcomment.OpQuery, Query: st.Query, Start: start}
	if err != nil {
		ev.Duration, ev.Rows, ev.Err = time.Since(start), -1, err
		db.c.Observe(ctx, ev)
		return r, err
	}
	return &rows{Rows: r, ctx: ctx, c: db.c, ev: ev}, nil
}

// QueryRow runs a query expected to return at most one row, with the
// comment of ctx; errors are deferred to Row.Scan, as in pgx.
func (db *DB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if !db.c.Observing() && db.c.Budgets() == nil {
		st, args := db.statement(ctx, sql, args)
		if db.sessionName(&st, sql, args) == "" {
			return db.q.QueryRow(ctx, st.Query, args...)
		}
	}
	r, err := db.Query(ctx, sql, args...)
	return &row{rows: r, err: err}
}

// rows reports the query once, when pgx closes the rows.
type rows struct {
	pgx.Rows
	ctx  context.Context
	c    *sqlcomment.Commenter
	ev   sqlcomment.Event
	n    int64
	done bool
	db   *DB
	run  *run // with budgets: finished when the rows close
}

func (r *rows) Next() bool {
	if r.Rows.Next() {
		r.n++
		return true
	}
	r.report() // pgx has closed the rows
	return false
}

func (r *rows) Close() {
	r.Rows.Close()
	r.report()
}

// Err is pgx's, naming the runaway rule whose deadline ended the query
// (sqlcomment.RunawayErr).
func (r *rows) Err() error {
	err := r.Rows.Err()
	if r.run != nil {
		err = sqlcomment.RunawayErr(r.run.ctx, err)
	}
	return err
}

func (r *rows) report() {
	if r.done {
		return
	}
	r.done = true
	if r.run != nil {
		r.db.finish(r.run)
	}
	if !r.c.Observing() {
		return
	}
	r.ev.Duration = time.Since(r.ev.Start)
	r.ev.Rows = r.n
	r.ev.Err = r.Err()
	if r.ev.Err != nil && r.n == 0 {
		r.ev.Rows = -1 // pgx defers errors to the rows: failed before any row
	}
	r.c.Observe(r.ctx, r.ev)
}

// row is pgx's QueryRow over an observed Query.
type row struct {
	rows pgx.Rows
	err  error
}

func (r *row) Scan(dest ...any) error {
	if r.err != nil {
		if r.rows != nil {
			r.rows.Close()
		}
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}
