package sqlcomment

import (
	"context"
	"database/sql/driver"
	"errors"
	"time"
)

// conn comments statements and forwards every optional interface of
// database/sql/driver. Where the wrapped connection lacks one, it does what
// database/sql does for a connection without it, so a program sees the same
// behaviour wrapped or not: Ping and ResetSession succeed, IsValid is true,
// CheckNamedValue and Exec/QueryContext return driver.ErrSkip (which
// database/sql handles by falling back), PrepareContext and BeginTx fall
// back to Prepare and Begin with database/sql's own checks.
type conn struct {
	c  driver.Conn
	cm *Commenter
	// The wrapped connection's statement interfaces, asserted once.
	ec driver.ExecerContext
	ex driver.Execer //nolint:staticcheck // forwarded for old drivers
	qc driver.QueryerContext
	qx driver.Queryer //nolint:staticcheck // forwarded for old drivers
	// inTx is true between BeginTx and the end of its transaction; a
	// connection is used by one goroutine at a time.
	inTx bool
	// named is true while inTx for a transaction whose BEGIN set the
	// application_name (ModeSession and ModeBoth, a tagged context).
	named bool
	// mode is the resolved Mode.
	mode Mode
}

func newConn(c driver.Conn, cm *Commenter) *conn {
	w := &conn{c: c, cm: cm, mode: cm.cfg.sess.mode.Resolve(cm.cfg.sess.session != nil)}
	w.ec, _ = c.(driver.ExecerContext)
	w.ex, _ = c.(driver.Execer) //nolint:staticcheck
	w.qc, _ = c.(driver.QueryerContext)
	w.qx, _ = c.(driver.Queryer) //nolint:staticcheck
	return w
}

var (
	_ driver.Conn               = (*conn)(nil)
	_ driver.Pinger             = (*conn)(nil)
	_ driver.ExecerContext      = (*conn)(nil)
	_ driver.QueryerContext     = (*conn)(nil)
	_ driver.ConnPrepareContext = (*conn)(nil)
	_ driver.ConnBeginTx        = (*conn)(nil)
	_ driver.SessionResetter    = (*conn)(nil)
	_ driver.Validator          = (*conn)(nil)
	_ driver.NamedValueChecker  = (*conn)(nil)
)

// Unwrap returns the wrapped driver connection; sql.Conn.Raw hands out the
// wrapper, and Unwrap (or the package function Unwrap) reaches the driver's.
func (c *conn) Unwrap() driver.Conn { return c.c }

// Unwrap returns the driver connection inside a connection of this
// package's wrapper, as sql.Conn.Raw passes it, and any other value as is.
func Unwrap(driverConn any) any {
	if w, ok := driverConn.(*conn); ok {
		return w.c
	}
	return driverConn
}

func (c *conn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *conn) Close() error { return c.c.Close() }

func (c *conn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *conn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	st := c.cm.Comment(ctx, query, true)
	if c.mode == ModeSession && (!c.inTx || c.named) {
		// Outside a transaction as written (see Sessions in the package
		// doc); in a transaction begun untagged, commented as statement does.
		st = c.cm.Plain(ctx, query)
	}
	if !c.cm.Observing() && c.cm.cfg.budgets == nil && c.mode < ModeSession {
		return c.prepare(ctx, st.Query)
	}
	start := time.Now()
	s, err := c.prepare(ctx, st.Query)
	if c.cm.Observing() {
		c.cm.Observe(ctx, Event{Tags: st.Tags, Tagged: st.Tagged, Op: OpPrepare, Query: st.Query,
			Start: start, Duration: time.Since(start), Rows: -1, Err: err})
	}
	if err != nil {
		return nil, err
	}
	return wrapStmt(s, st.Query, c), nil
}

func (c *conn) prepare(ctx context.Context, query string) (driver.Stmt, error) {
	if p, ok := c.c.(driver.ConnPrepareContext); ok {
		return p.PrepareContext(ctx, query)
	}
	s, err := c.c.Prepare(query)
	if err == nil {
		select {
		default:
		case <-ctx.Done():
			s.Close()
			return nil, ctx.Err()
		}
	}
	return s, err
}

func (c *conn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	ec, e := c.ec, c.ex
	hasCtx := ec != nil
	if ec == nil && e == nil {
		return nil, driver.ErrSkip
	}
	st := c.statement(ctx, query)
	if st.Unique && len(c.cm.cfg.leadingArgs) > 0 {
		args = leading(c.cm.cfg.leadingArgs, args)
	}
	if c.cm.cfg.budgets != nil {
		return c.execBudgeted(ctx, query, st, args)
	}
	var start time.Time
	if c.cm.Observing() {
		start = time.Now()
	}
	var res driver.Result
	var err error
	if hasCtx {
		res, err = ec.ExecContext(ctx, st.Query, args)
	} else {
		res, err = execOld(ctx, e, st.Query, args)
	}
	if c.cm.Observing() && !errors.Is(err, driver.ErrSkip) {
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

func (c *conn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	qc, q := c.qc, c.qx
	hasCtx := qc != nil
	if qc == nil && q == nil {
		return nil, driver.ErrSkip
	}
	st := c.statement(ctx, query)
	if st.Unique && len(c.cm.cfg.leadingArgs) > 0 {
		args = leading(c.cm.cfg.leadingArgs, args)
	}
	if c.cm.cfg.budgets != nil {
		return c.queryBudgeted(ctx, query, st, args)
	}
	var start time.Time
	if c.cm.Observing() {
		start = time.Now()
	}
	var r driver.Rows
	var err error
	if hasCtx {
		r, err = qc.QueryContext(ctx, st.Query, args)
	} else {
		r, err = queryOld(ctx, q, st.Query, args)
	}
	if !c.cm.Observing() || errors.Is(err, driver.ErrSkip) {
		return r, err
	}
	ev := Event{Tags: st.Tags, Tagged: st.Tagged, Op: OpQuery, Query: st.Query, Start: start}
	if err != nil {
		ev.Duration, ev.Rows, ev.Err = time.Since(start), -1, err
		c.cm.Observe(ctx, ev)
		return nil, err
	}
	return &rows{r: r, ctx: ctx, cm: c.cm, ev: ev}, nil
}

// leading returns args after the values vs, in a new slice.
func leading(vs []driver.Value, args []driver.NamedValue) []driver.NamedValue {
	out := make([]driver.NamedValue, 0, len(vs)+len(args))
	for _, v := range vs {
		out = append(out, driver.NamedValue{Value: v})
	}
	return append(out, args...)
}

// errNamed is database/sql's error for named arguments to an old driver.
var errNamed = errors.New("sql: driver does not support the use of Named Parameters")

func values(args []driver.NamedValue) ([]driver.Value, error) {
	vs := make([]driver.Value, len(args))
	for i, a := range args {
		if a.Name != "" {
			return nil, errNamed
		}
		vs[i] = a.Value
	}
	return vs, nil
}

func execOld(ctx context.Context, e driver.Execer, query string, args []driver.NamedValue) (driver.Result, error) { //nolint:staticcheck
	vs, err := values(args)
	if err != nil {
		return nil, err
	}
	select {
	default:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return e.Exec(query, vs)
}

func queryOld(ctx context.Context, q driver.Queryer, query string, args []driver.NamedValue) (driver.Rows, error) { //nolint:staticcheck
	vs, err := values(args)
	if err != nil {
		return nil, err
	}
	select {
	default:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return q.Query(query, vs)
}

func (c *conn) Ping(ctx context.Context) error {
	p, ok := c.c.(driver.Pinger)
	if !ok {
		return nil
	}
	if !c.cm.Observing() {
		return p.Ping(ctx)
	}
	start := time.Now()
	err := p.Ping(ctx)
	t, tagged := tenantFrom(ctx)
	c.cm.Observe(ctx, Event{Tags: t, Tagged: tagged, Op: OpPing, Start: start,
		Duration: time.Since(start), Rows: -1, Err: err})
	return err
}

func (c *conn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if c.mode >= ModeSession {
		return c.beginTagged(ctx, opts)
	}
	if c.cm.cfg.budgets != nil {
		return c.beginBudgeted(ctx, opts)
	}
	if !c.cm.Observing() {
		return c.begin(ctx, opts)
	}
	start := time.Now()
	tx, err := c.begin(ctx, opts)
	t, tagged := tenantFrom(ctx)
	c.cm.Observe(ctx, Event{Tags: t, Tagged: tagged, Op: OpBegin, Start: start,
		Duration: time.Since(start), Rows: -1, Err: err})
	if err != nil {
		return nil, err
	}
	return &txn{tx: tx, ctx: ctx, cm: c.cm, tags: t, tagged: tagged}, nil
}

// begin is database/sql's ctxDriverBegin.
func (c *conn) begin(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if b, ok := c.c.(driver.ConnBeginTx); ok {
		return b.BeginTx(ctx, opts)
	}
	if opts.Isolation != driver.IsolationLevel(0) {
		return nil, errors.New("sql: driver does not support non-default isolation level")
	}
	if opts.ReadOnly {
		return nil, errors.New("sql: driver does not support read-only transactions")
	}
	tx, err := c.c.Begin() //nolint:staticcheck // the fallback database/sql uses
	if err == nil {
		select {
		default:
		case <-ctx.Done():
			tx.Rollback()
			return nil, ctx.Err()
		}
	}
	return tx, err
}

func (c *conn) ResetSession(ctx context.Context) error {
	if r, ok := c.c.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c *conn) IsValid() bool {
	if v, ok := c.c.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (c *conn) CheckNamedValue(nv *driver.NamedValue) error {
	if n, ok := c.c.(driver.NamedValueChecker); ok {
		return n.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}
