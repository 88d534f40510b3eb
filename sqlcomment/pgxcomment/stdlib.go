package pgxcomment

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/qtop-dev/qtop/sqlcomment"
)

// StdlibSession is the option for sqlcomment.WrapConnector and
// sqlcomment.Open over pgx's stdlib driver that lets the wrapper tag
// sessions (sqlcomment.ModeSession, and ModeAuto resolves to it): a
// transaction's application_name is set in the round trip of its BEGIN; a
// statement outside a transaction, or in one begun without a tenant,
// carries the comment (see Sessions in the package doc). Combine it with
// StdlibExecMode, so that those commented statements are not prepared per
// tenant.
func StdlibSession() sqlcomment.Option { return sqlcomment.WithSession(stdlibSession{}) }

type stdlibSession struct{}

var _ sqlcomment.Session = stdlibSession{}

// errNotStdlib: the wrapped database/sql driver is not pgx's stdlib.
var errNotStdlib = errors.New("pgxcomment: StdlibSession needs pgx's stdlib driver (its connections have Conn() *pgx.Conn)")

func pgxConn(c driver.Conn) (*pgx.Conn, error) {
	pc, ok := c.(interface{ Conn() *pgx.Conn })
	if !ok {
		return nil, errNotStdlib
	}
	return pc.Conn(), nil
}

// Application returns c's own application_name (its DSN's, or
// PGAPPNAME), which session names take as their service without
// sqlcomment.WithApplication.
func (stdlibSession) Application(c driver.Conn) string {
	pc, err := pgxConn(c)
	if err != nil {
		return ""
	}
	return pc.Config().RuntimeParams["application_name"]
}

// BeginTx begins the transaction as pgx's stdlib does, with the
// application_name set in the same simple query as BEGIN.
func (stdlibSession) BeginTx(ctx context.Context, c driver.Conn, opts driver.TxOptions, name string) (driver.Tx, error) {
	pc, err := pgxConn(c)
	if err != nil {
		return nil, err
	}
	if pc.IsClosed() {
		return nil, driver.ErrBadConn
	}
	if strings.ContainsAny(name, `'\`) { // ApplicationName never writes them
		return nil, fmt.Errorf("pgxcomment: application_name %q has a quote", name)
	}
	var o pgx.TxOptions
	switch sql.IsolationLevel(opts.Isolation) {
	case sql.LevelDefault:
	case sql.LevelReadUncommitted:
		o.IsoLevel = pgx.ReadUncommitted
	case sql.LevelReadCommitted:
		o.IsoLevel = pgx.ReadCommitted
	case sql.LevelRepeatableRead, sql.LevelSnapshot:
		o.IsoLevel = pgx.RepeatableRead
	case sql.LevelSerializable:
		o.IsoLevel = pgx.Serializable
	default:
		return nil, fmt.Errorf("pgxcomment: unsupported isolation: %v", opts.Isolation)
	}
	if opts.ReadOnly {
		o.AccessMode = pgx.ReadOnly
	}
	o.BeginQuery = beginSQL(o) + "; SET LOCAL application_name = '" + name + "'"
	tx, err := pc.BeginTx(ctx, o)
	if err != nil {
		return nil, err
	}
	return stdTx{ctx: ctx, tx: tx}, nil
}

// stdTx is pgx's stdlib transaction.
type stdTx struct {
	ctx context.Context
	tx  pgx.Tx
}

func (t stdTx) Commit() error   { return t.tx.Commit(t.ctx) }
func (t stdTx) Rollback() error { return t.tx.Rollback(t.ctx) }
