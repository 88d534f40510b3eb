package sqlcomment

import (
	"context"
	"database/sql/driver"
	"time"

	"github.com/qtop-dev/qtop/tenant"
)

// txn reports commit and rollback to the Observer, with the tags of the
// context that began the transaction. It exists only with WithObserver.
type txn struct {
	tx     driver.Tx
	ctx    context.Context
	cm     *Commenter
	tags   tenant.Tags
	tagged bool
	c      *conn // with WithBudgets: told when the transaction ends
}

var _ driver.Tx = (*txn)(nil)

func (t *txn) Commit() error   { return t.end(OpCommit, t.tx.Commit) }
func (t *txn) Rollback() error { return t.end(OpRollback, t.tx.Rollback) }

func (t *txn) end(op Op, f func() error) error {
	if t.c != nil {
		t.c.inTx, t.c.named = false, false
	}
	if !t.cm.Observing() {
		return f()
	}
	start := time.Now()
	err := f()
	t.cm.Observe(t.ctx, Event{Tags: t.tags, Tagged: t.tagged, Op: op, Start: start,
		Duration: time.Since(start), Rows: -1, Err: err})
	return err
}

// tenantFrom is how every statement finds its tags: tenant.Lookup, so
// that the comment and the Event (and so the DB-time record) agree.
func tenantFrom(ctx context.Context) (tenant.Tags, bool) { return tenant.Lookup(ctx) }
