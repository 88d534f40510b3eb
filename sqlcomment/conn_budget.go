package sqlcomment

import (
	"context"
	"database/sql/driver"
	"errors"
	"time"
)

// budgetRun is one admitted statement of the database/sql wrapper: its
// ticket, and the runaway deadline's context.
type budgetRun struct {
	b      *Budgets
	tk     Ticket
	ctx    context.Context
	cancel context.CancelFunc
}

// err returns the statement's error, naming the runaway rule whose
// deadline ended it (RunawayErr).
func (r *budgetRun) err(err error) error {
	if r == nil || r.ctx == nil {
		return err
	}
	return RunawayErr(r.ctx, err)
}

// start admits the statement query (as the caller wrote it) with the
// tags of st, and returns the context to run it under.
func (c *Commenter) start(ctx context.Context, r *budgetRun, query string, st *Statement, inTx bool) (context.Context, error) {
	b := c.cfg.budgets
	now := time.Now()
	tk, err := b.Admit(now, &st.Tags, &c.cfg, query, inTx)
	if err != nil {
		return ctx, err
	}
	r.b, r.tk = b, tk
	r.ctx, r.cancel = r.tk.Context(ctx)
	return r.ctx, nil
}

// startPrepared is start for an execution of a prepared statement: the
// tags are those of the context it runs in.
func (c *Commenter) startPrepared(ctx context.Context, r *budgetRun, query string, inTx bool) (context.Context, error) {
	t, tagged := tenantFrom(ctx)
	st := Statement{Tags: t, Tagged: tagged}
	return c.start(ctx, r, query, &st, inTx)
}

// finish ends the statement of r.
func (r *budgetRun) finish(err error) {
	if r.b == nil {
		return
	}
	now := time.Now()
	cancelled := false
	if r.cancel != nil {
		cancelled = runawayCancelled(r.ctx)
		r.cancel()
	}
	r.b.Finish(&r.tk, now, now.Sub(r.tk.start), cancelled)
	r.b = nil
}

func (c *conn) execBudgeted(ctx context.Context, query string, st Statement, args []driver.NamedValue) (driver.Result, error) {
	var run budgetRun
	rctx, err := c.cm.start(ctx, &run, query, &st, c.inTx)
	if err != nil {
		return nil, err
	}
	start := run.tk.start
	var res driver.Result
	if c.ec != nil {
		res, err = c.ec.ExecContext(rctx, st.Query, args)
	} else {
		res, err = execOld(rctx, c.ex, st.Query, args)
	}
	run.finish(err)
	err = run.err(err)
	if c.cm.Observing() && !errors.Is(err, driver.ErrSkip) {
		if start.IsZero() {
			start = time.Now()
		}
		rows := int64(-1)
		if err == nil {
			if n, rerr := res.RowsAffected(); rerr == nil {
				rows = n
			}
		}
		c.cm.Observe(ctx, Event{Tags: st.Tags, Tagged: st.Tagged, Op: OpExec, Query: st.Query,
			Start: start, Duration: time.Since(start), Rows: rows, Err: err})
	}
	return res, err
}

func (c *conn) queryBudgeted(ctx context.Context, query string, st Statement, args []driver.NamedValue) (driver.Rows, error) {
	run := &budgetRun{}
	rctx, err := c.cm.start(ctx, run, query, &st, c.inTx)
	if err != nil {
		return nil, err
	}
	start := run.tk.start
	if start.IsZero() {
		start = time.Now()
	}
	var r driver.Rows
	if c.qc != nil {
		r, err = c.qc.QueryContext(rctx, st.Query, args)
	} else {
		r, err = queryOld(rctx, c.qx, st.Query, args)
	}
	if errors.Is(err, driver.ErrSkip) {
		run.finish(nil)
		return nil, err
	}
	ev := Event{Tags: st.Tags, Tagged: st.Tagged, Op: OpQuery, Query: st.Query, Start: start}
	if err != nil {
		run.finish(err)
		err = run.err(err)
		if c.cm.Observing() {
			ev.Duration, ev.Rows, ev.Err = time.Since(start), -1, err
			c.cm.Observe(ctx, ev)
		}
		return nil, err
	}
	return &rows{r: r, ctx: ctx, cm: c.cm, ev: ev, run: run}, nil
}

// beginBudgeted is BeginTx with budgets: the transaction is checked as a
// whole before it begins (see Transactions in the Budgets doc).
func (c *conn) beginBudgeted(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	t, tagged := tenantFrom(ctx)
	if err := c.cm.cfg.budgets.AdmitBegin(time.Now(), &t, &c.cm.cfg); err != nil {
		return nil, err
	}
	start := time.Now()
	tx, err := c.begin(ctx, opts)
	if c.cm.Observing() {
		c.cm.Observe(ctx, Event{Tags: t, Tagged: tagged, Op: OpBegin, Start: start,
			Duration: time.Since(start), Rows: -1, Err: err})
	}
	if err != nil {
		return nil, err
	}
	c.inTx = true
	return &txn{tx: tx, ctx: ctx, cm: c.cm, tags: t, tagged: tagged, c: c}, nil
}

// WithBudgets applies b's budgets and runaway rules to the statements of
// the wrapper (see Budgets). One Budgets may serve several wrappers.
// Executions of prepared statements (database/sql Stmt) are budgeted with
// the tags of the context each runs in.
func WithBudgets(b *Budgets) Option { return func(c *config) { c.budgets = b } }

// Budgets returns the Budgets of WithBudgets, or nil.
func (c *Commenter) Budgets() *Budgets { return c.cfg.budgets }

// Admit checks the statement query (the text as the caller wrote it)
// commented as st against the Commenter's budgets at now, for wrappers of
// other drivers (pgxcomment): see Budgets.Admit. Without WithBudgets it
// returns the zero Ticket.
func (c *Commenter) Admit(now time.Time, query string, st *Statement, inTx bool) (Ticket, error) {
	if c.cfg.budgets == nil {
		return Ticket{}, nil
	}
	return c.cfg.budgets.Admit(now, &st.Tags, &c.cfg, query, inTx)
}

// AdmitBegin checks a transaction about to begin under ctx: see
// Budgets.AdmitBegin.
func (c *Commenter) AdmitBegin(ctx context.Context, now time.Time) error {
	if c.cfg.budgets == nil {
		return nil
	}
	t, _ := tenantFrom(ctx)
	return c.cfg.budgets.AdmitBegin(now, &t, &c.cfg)
}

// Finish ends a statement admitted by Admit: see Budgets.Finish.
func (c *Commenter) Finish(tk *Ticket, now time.Time, d time.Duration, cancelled bool) {
	if c.cfg.budgets != nil {
		c.cfg.budgets.Finish(tk, now, d, cancelled)
	}
}

// Start returns the start time passed to Admit.
func (t *Ticket) Start() time.Time { return t.start }
