package sqlcomment

import (
	"context"
	"database/sql/driver"
	"time"
)

// statement returns what the connection sends for query: as written in
// ModeSession inside a transaction whose BEGIN set the application_name,
// commented otherwise. Outside a transaction a session mode comments the
// statement as ModeComment does: database/sql cannot set the
// application_name in the round trip of the statement, and a name set for
// the session outlives it — behind a transaction pooler such as PgBouncer,
// on a server connection that other clients (other services among them)
// then use under that tenant's name. So does a transaction begun without a
// tenant: its statements would otherwise carry no tenant at all.
func (c *conn) statement(ctx context.Context, query string) Statement {
	if c.mode == ModeSession && c.named {
		return c.cm.Plain(ctx, query)
	}
	return c.cm.Comment(ctx, query, false)
}

// beginSession begins a transaction whose application_name is its
// tenant's, in the round trip of BEGIN, and reports that it named it; an
// untagged one as is.
func (c *conn) beginSession(ctx context.Context, opts driver.TxOptions) (driver.Tx, bool, error) {
	st := c.cm.Plain(ctx, "")
	if !st.Tagged || st.Tags.Tenant == "" {
		tx, err := c.begin(ctx, opts)
		return tx, false, err
	}
	var own string
	if a, ok := c.cm.cfg.sess.session.(ownApplication); ok {
		own = a.Application(c.c)
	}
	tx, err := c.cm.cfg.sess.session.BeginTx(ctx, c.c, opts, c.cm.SessionName(own, st.Tags))
	return tx, err == nil, err
}

// beginTagged is BeginTx in ModeSession and ModeBoth: the transaction is
// always wrapped, so that the connection knows when it ends.
func (c *conn) beginTagged(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	t, tagged := tenantFrom(ctx)
	if c.cm.cfg.budgets != nil {
		if err := c.cm.cfg.budgets.AdmitBegin(time.Now(), &t, &c.cm.cfg); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	tx, named, err := c.beginSession(ctx, opts)
	if c.cm.Observing() {
		c.cm.Observe(ctx, Event{Tags: t, Tagged: tagged, Op: OpBegin, Start: start,
			Duration: time.Since(start), Rows: -1, Err: err})
	}
	if err != nil {
		return nil, err
	}
	c.inTx, c.named = true, named
	return &txn{tx: tx, ctx: ctx, cm: c.cm, tags: t, tagged: tagged, c: c}, nil
}
