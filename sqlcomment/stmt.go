package sqlcomment

import (
	"context"
	"database/sql/driver"
	"errors"
	"time"
)

// stmt reports executions of a prepared statement to the Observer and
// applies the budgets to them (with the tags of the context each runs
// in). It exists only with WithObserver or WithBudgets (otherwise the
// driver's statement is returned as is). database/sql treats a statement's NamedValueChecker and
// ColumnConverter differently from the connection's, so wrapStmt picks one
// of four types that implement exactly the ones the wrapped statement has.
type stmt struct {
	s     driver.Stmt
	query string
	c     *conn
}

var (
	_ driver.Stmt             = (*stmt)(nil)
	_ driver.StmtExecContext  = (*stmt)(nil)
	_ driver.StmtQueryContext = (*stmt)(nil)

	_ driver.NamedValueChecker = stmtNVC{}
	_ driver.ColumnConverter   = stmtCC{} //nolint:staticcheck // forwarded
	_ driver.NamedValueChecker = stmtNVCCC{}
	_ driver.ColumnConverter   = stmtNVCCC{} //nolint:staticcheck // forwarded
)

type (
	stmtNVC   struct{ *stmt }
	stmtCC    struct{ *stmt }
	stmtNVCCC struct{ *stmt }
)

func (s stmtNVC) CheckNamedValue(nv *driver.NamedValue) error {
	return s.s.(driver.NamedValueChecker).CheckNamedValue(nv)
}

func (s stmtCC) ColumnConverter(i int) driver.ValueConverter {
	return s.s.(driver.ColumnConverter).ColumnConverter(i) //nolint:staticcheck
}

func (s stmtNVCCC) CheckNamedValue(nv *driver.NamedValue) error {
	return s.s.(driver.NamedValueChecker).CheckNamedValue(nv)
}

func (s stmtNVCCC) ColumnConverter(i int) driver.ValueConverter {
	return s.s.(driver.ColumnConverter).ColumnConverter(i) //nolint:staticcheck
}

func wrapStmt(s driver.Stmt, query string, c *conn) driver.Stmt {
	w := &stmt{s: s, query: query, c: c}
	_, nvc := s.(driver.NamedValueChecker)
	_, cc := s.(driver.ColumnConverter) //nolint:staticcheck
	switch {
	case nvc && cc:
		return stmtNVCCC{w}
	case nvc:
		return stmtNVC{w}
	case cc:
		return stmtCC{w}
	}
	return w
}

func (s *stmt) Close() error  { return s.s.Close() }
func (s *stmt) NumInput() int { return s.s.NumInput() }

func (s *stmt) Exec(args []driver.Value) (driver.Result, error) {
	return s.s.Exec(args) //nolint:staticcheck // database/sql calls ExecContext
}

func (s *stmt) Query(args []driver.Value) (driver.Rows, error) {
	return s.s.Query(args) //nolint:staticcheck // database/sql calls QueryContext
}

// ExecContext reports the execution with the tags of ctx, the context it
// runs in (the comment carries those of the context it was prepared in).
func (s *stmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	var run budgetRun
	if s.c.cm.cfg.budgets != nil {
		var err error
		if ctx, err = s.c.cm.startPrepared(ctx, &run, s.query, s.c.inTx); err != nil {
			return nil, err
		}
		defer run.finish(nil)
	}
	start := time.Now()
	var res driver.Result
	var err error
	if e, ok := s.s.(driver.StmtExecContext); ok {
		res, err = e.ExecContext(ctx, args)
	} else {
		var vs []driver.Value
		if vs, err = values(args); err == nil {
			select {
			default:
				res, err = s.s.Exec(vs) //nolint:staticcheck // database/sql's fallback
			case <-ctx.Done():
				err = ctx.Err()
			}
		}
	}
	err = run.err(err)
	if errors.Is(err, driver.ErrSkip) || !s.c.cm.Observing() {
		return res, err
	}
	rows := int64(-1)
	if err == nil {
		if n, rerr := res.RowsAffected(); rerr == nil {
			rows = n
		}
	}
	t, tagged := tenantFrom(ctx)
	s.c.cm.Observe(ctx, Event{Tags: t, Tagged: tagged, Op: OpExec, Query: s.query, Prepared: true,
		Start: start, Duration: time.Since(start), Rows: rows, Err: err})
	return res, err
}

func (s *stmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	var run *budgetRun
	octx := ctx
	if s.c.cm.cfg.budgets != nil {
		run = &budgetRun{}
		var err error
		if ctx, err = s.c.cm.startPrepared(ctx, run, s.query, s.c.inTx); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	var r driver.Rows
	var err error
	if q, ok := s.s.(driver.StmtQueryContext); ok {
		r, err = q.QueryContext(ctx, args)
	} else {
		var vs []driver.Value
		if vs, err = values(args); err == nil {
			select {
			default:
				r, err = s.s.Query(vs) //nolint:staticcheck // database/sql's fallback
			case <-ctx.Done():
				err = ctx.Err()
			}
		}
	}
	if errors.Is(err, driver.ErrSkip) {
		if run != nil {
			run.finish(nil)
		}
		return r, err
	}
	t, tagged := tenantFrom(octx)
	ev := Event{Tags: t, Tagged: tagged, Op: OpQuery, Query: s.query, Prepared: true, Start: start}
	if err != nil {
		if run != nil {
			run.finish(err)
		}
		err = run.err(err)
		if s.c.cm.Observing() {
			ev.Duration, ev.Rows, ev.Err = time.Since(start), -1, err
			s.c.cm.Observe(octx, ev)
		}
		return nil, err
	}
	return &rows{r: r, ctx: octx, cm: s.c.cm, ev: ev, run: run}, nil
}
