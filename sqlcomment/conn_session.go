package sqlcomment

import (
	"context"
	"database/sql/driver"
	"fmt"
	"time"

	"github.com/qtop-dev/qtop/tenant"
)

// statement returns what the connection sends for query: commented in
// ModeComment and ModeBoth, as written in ModeSession. In ModeSession and
// ModeBoth, outside a transaction, it first sets the connection's
// application_name to the statement's tenant when it names another (one
// round trip, only on a change; see Sessions in the package doc).
func (c *conn) statement(ctx context.Context, query string) (Statement, error) {
	var st Statement
	if c.mode == ModeSession {
		st = c.cm.Plain(ctx, query)
	} else {
		st = c.cm.Comment(ctx, query, false)
	}
	if c.mode >= ModeSession && !c.inTx {
		if err := c.setName(ctx, st); err != nil {
			return st, err
		}
	}
	return st, nil
}

// sessionName is the application_name for st's tags; "" when it has no
// tenant (the connection's own name).
func (c *conn) sessionName(st Statement) string {
	if !st.Tagged || st.Tags.Tenant == "" {
		return ""
	}
	return c.cm.ApplicationName(st.Tags)
}

// setName makes the session's application_name the one of st.
func (c *conn) setName(ctx context.Context, st Statement) error {
	want := c.sessionName(st)
	if c.named && want == c.name {
		return nil
	}
	if !c.named && want == "" {
		return nil // never set: the connection's own name
	}
	if err := c.cm.cfg.sess.session.SetName(ctx, c.c, want); err != nil {
		c.named, c.name = true, "\x00unknown" // not known: set it again next time
		return fmt.Errorf("sqlcomment: setting application_name: %w", err)
	}
	c.named, c.name = want != "", want
	return nil
}

// beginSession begins a transaction whose application_name is its
// tenant's (or, untagged on a connection that a statement named, the
// service's), in the round trip of BEGIN.
func (c *conn) beginSession(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	name := c.sessionName(c.cm.Plain(ctx, ""))
	if name == "" {
		if !c.named {
			return c.begin(ctx, opts)
		}
		name = ApplicationName(c.cm.cfg.application, tenant.Tags{}) // may be ""
	}
	return c.cm.cfg.sess.session.BeginTx(ctx, c.c, opts, name)
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
	tx, err := c.beginSession(ctx, opts)
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

// sessionStmt names the session for an execution of a prepared statement
// outside a transaction, in ModeSession and ModeBoth.
func (c *conn) sessionStmt(ctx context.Context) error {
	if c.mode < ModeSession || c.inTx {
		return nil
	}
	return c.setName(ctx, c.cm.Plain(ctx, ""))
}
