package sqlcomment

import (
	"context"
	"time"

	"github.com/qtop-dev/qtop/tenant"
)

// Op is the kind of database operation an Event reports.
type Op uint8

// The operations reported to an Observer.
const (
	OpQuery    Op = iota + 1 // a query, until its rows are closed
	OpExec                   // a statement without rows
	OpBegin                  // BeginTx
	OpCommit                 // Tx.Commit
	OpRollback               // Tx.Rollback
	OpPrepare                // PrepareContext
	OpPing                   // Ping
)

var opNames = [...]string{"", "query", "exec", "begin", "commit", "rollback", "prepare", "ping"}

// String returns "query", "exec", "begin", …
func (o Op) String() string {
	if int(o) < len(opNames) && o != 0 {
		return opNames[o]
	}
	return "unknown"
}

// Event is one finished database operation, as an Observer sees it.
type Event struct {
	// Tags are the tags of the operation's context, the same the comment
	// carries; Tagged reports whether the context had any (tenant.Lookup).
	Tags   tenant.Tags
	Tagged bool
	Op     Op
	// Query is the statement as sent, comment included; empty for begin,
	// commit, rollback and ping.
	Query string
	// Prepared reports a statement run through a prepared statement
	// (database/sql Stmt), whose comment was written at prepare time.
	Prepared bool
	Start    time.Time
	// Duration runs from Start until the result is back; for queries,
	// until their rows are closed, so that row iteration counts.
	Duration time.Duration
	// Rows is the number of rows read (queries) or affected (exec); -1
	// when unknown, and when the statement failed before any row.
	Rows int64
	// Err is the operation's error, if any (io.EOF at the end of rows is
	// not an error).
	Err error
}

// An Observer receives an Event per database operation, on the goroutine
// that ran it. It must not block: feed a bounded aggregate (ingest's
// recorder), not a remote call.
type Observer func(ctx context.Context, e Event)
