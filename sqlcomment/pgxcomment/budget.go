package pgxcomment

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/qtop-dev/qtop/sqlcomment"
)

// run is one statement admitted by the DB's budgets.
type run struct {
	tk     sqlcomment.Ticket
	ctx    context.Context
	cancel context.CancelFunc
}

// admit checks the statement sql, commented as st, against the budgets
// (sqlcomment.WithBudgets) and returns the context to run it under.
func (db *DB) admit(ctx context.Context, r *run, sql string, st *sqlcomment.Statement) (context.Context, error) {
	tk, err := db.c.Admit(time.Now(), sql, st, db.inTx)
	if err != nil {
		return ctx, err
	}
	r.tk = tk
	r.ctx, r.cancel = r.tk.Context(ctx)
	return r.ctx, nil
}

func (db *DB) finish(r *run) {
	now := time.Now()
	cancelled := false
	if r.cancel != nil {
		cancelled = errors.Is(context.Cause(r.ctx), sqlcomment.ErrRunaway)
		r.cancel()
		r.cancel = nil
	}
	db.c.Finish(&r.tk, now, now.Sub(r.tk.Start()), cancelled)
}

// beginner is what *pgxpool.Pool, *pgx.Conn and pgx.Tx have to begin a
// transaction.
type beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Begin begins a transaction on the wrapped Querier (a pool, a connection
// or a transaction, for a savepoint) after checking it against the
// budgets (sqlcomment.Budgets.AdmitBegin): in Enforce mode it returns an
// error that errors.Is(err, sqlcomment.ErrBudget) while a matching
// bucket is spent or full, before anything is sent. Run the transaction's
// statements through db.With(tx), which never refuses them (see
// Transactions in the sqlcomment.Budgets doc).
//
// In ModeSession and ModeBoth (see Sessions in the package doc) the
// transaction's application_name names the context's tenant, set in the
// round trip of BEGIN.
func (db *DB) Begin(ctx context.Context) (pgx.Tx, error) {
	return db.BeginTx(ctx, pgx.TxOptions{})
}

// BeginTx is Begin with pgx's transaction options. With
// opts.BeginQuery set, the transaction is not named: its statements carry
// the comment (see Sessions in the package doc).
func (db *DB) BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error) {
	if _, ok := db.q.(beginner); !ok {
		return nil, errNoBegin
	}
	if err := db.c.AdmitBegin(ctx, time.Now()); err != nil {
		return nil, err
	}
	return db.beginTx(ctx, opts)
}

func (db *DB) execBudgeted(ctx context.Context, sql string, st sqlcomment.Statement, args []any) (pgconn.CommandTag, error) {
	var r run
	rctx, err := db.admit(ctx, &r, sql, &st)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := db.exec(rctx, &st, sql, args)
	db.finish(&r)
	err = sqlcomment.RunawayErr(rctx, err)
	if db.c.Observing() {
		start := r.tk.Start()
		rows := int64(-1)
		if err == nil {
			rows = tag.RowsAffected()
		}
		db.c.Observe(ctx, sqlcomment.Event{Tags: st.Tags, Tagged: st.Tagged, Op: sqlcomment.OpExec,
			Query: st.Query, Start: start, Duration: time.Since(start), Rows: rows, Err: err})
	}
	return tag, err
}

func (db *DB) queryBudgeted(ctx context.Context, sql string, st sqlcomment.Statement, args []any) (pgx.Rows, error) {
	r := &run{}
	rctx, err := db.admit(ctx, r, sql, &st)
	if err != nil {
		return nil, err
	}
	rs, err := db.query(rctx, &st, sql, args)
	ev := sqlcomment.Event{Tags: st.Tags, Tagged: st.Tagged, Op: sqlcomment.OpQuery, Query: st.Query, Start: r.tk.Start()}
	if err != nil {
		db.finish(r)
		err = sqlcomment.RunawayErr(rctx, err)
		if db.c.Observing() {
			ev.Duration, ev.Rows, ev.Err = time.Since(ev.Start), -1, err
			db.c.Observe(ctx, ev)
		}
		return rs, err
	}
	return &rows{Rows: rs, ctx: ctx, c: db.c, ev: ev, db: db, run: r}, nil
}

var errNoBegin = errors.New("pgxcomment: the wrapped Querier cannot begin a transaction (want a pool, a connection or a transaction)")
