package pgxcomment

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/qtop-dev/qtop/sqlcomment"
	"github.com/qtop-dev/qtop/sqlcomment/internal/lex"
)

// setLocal sets application_name until the end of the transaction; in a
// batch outside a transaction that is the batch's implicit transaction.
const setLocal = "SELECT set_config('application_name', $1, true)"

// batcher is what *pgxpool.Pool, *pgx.Conn and pgx.Tx have to pipeline.
type batcher interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// txBeginner is what *pgxpool.Pool and *pgx.Conn have to begin a
// transaction with options.
type txBeginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// sessionName returns the application_name to set for a statement sent
// outside a transaction, or "" to send it as is: untagged, in a
// transaction, in ModeComment, with an execution mode chosen by the
// caller (a batch cannot carry one), or a statement that cannot run in a
// transaction block.
func (db *DB) sessionName(st *sqlcomment.Statement, sql string, args []any) string {
	if db.mode < sqlcomment.ModeSession || db.inTx || !st.Tagged || st.Tags.Tenant == "" || st.Unique {
		return ""
	}
	if sendsOwn(sql, args) {
		return ""
	}
	return db.c.SessionName(db.own, st.Tags)
}

// sendsOwn reports whether a statement is sent as written, with the
// comment instead of a session tag: its first argument is an option a
// batch cannot carry (an execution mode or result formats the caller
// chose), or ownTx says the tag's implicit transaction would change what
// it does.
func sendsOwn(sql string, args []any) bool {
	if len(args) > 0 {
		switch args[0].(type) {
		case pgx.QueryExecMode, pgx.QueryResultFormats, pgx.QueryResultFormatsByOID:
			return true
		}
	}
	return ownTx(sql)
}

// exec sends st: with its tenant's application_name set in the same
// round trip when sessionName says so.
func (db *DB) exec(ctx context.Context, st *sqlcomment.Statement, sql string, args []any) (pgconn.CommandTag, error) {
	name := db.sessionName(st, sql, args)
	if name == "" {
		return db.q.Exec(ctx, st.Query, args...)
	}
	if len(args) == 0 {
		// pgx sends a statement without arguments as a simple query, which
		// may hold several statements: keep that, in one Query message (one
		// implicit transaction).
		return db.q.Exec(ctx, "SET LOCAL application_name = '"+name+"'; "+st.Query)
	}
	b, ok := db.q.(batcher)
	if !ok {
		return db.q.Exec(ctx, st.Query, args...)
	}
	var batch pgx.Batch
	batch.Queue(setLocal, name)
	batch.Queue(st.Query, args...)
	br := b.SendBatch(ctx, &batch)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

// query is exec for Query.
func (db *DB) query(ctx context.Context, st *sqlcomment.Statement, sql string, args []any) (pgx.Rows, error) {
	name := db.sessionName(st, sql, args)
	b, ok := db.q.(batcher)
	if name == "" || !ok {
		return db.q.Query(ctx, st.Query, args...)
	}
	var batch pgx.Batch
	batch.Queue(setLocal, name)
	batch.Queue(st.Query, args...)
	br := b.SendBatch(ctx, &batch)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return nil, err
	}
	r, err := br.Query()
	if err != nil {
		br.Close()
		return r, err
	}
	return &batchRows{Rows: r, br: br}, nil
}

// batchRows closes the batch (and so releases a pool's connection) when
// the rows end.
type batchRows struct {
	pgx.Rows
	br     pgx.BatchResults
	closed bool
	err    error
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.end()
	return false
}

func (r *batchRows) Close() {
	r.Rows.Close()
	r.end()
}

func (r *batchRows) end() {
	if !r.closed {
		r.closed = true
		r.err = r.br.Close()
	}
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

// ownTx reports whether sql is a statement whose outcome a transaction
// block changes, so that it is sent without the tag's implicit one
// (statement gives it the comment instead):
//   - one PostgreSQL refuses in a transaction block (VACUUM, CREATE
//     DATABASE, CREATE INDEX CONCURRENTLY, …) or one that may end its own
//     transaction (CALL of a procedure or a DO block that commits): in
//     the tag's transaction it would fail;
//   - one PostgreSQL refuses or ignores outside a transaction block
//     (LOCK, SAVEPOINT, RELEASE, ROLLBACK TO, DECLARE without HOLD, SET
//     LOCAL, SET TRANSACTION, SET CONSTRAINTS, PREPARE TRANSACTION): in the
//     tag's transaction it would succeed and do nothing, hiding the
//     caller's mistake.
//
// Comments, white space and parentheses before its first word are
// skipped.
func ownTx(sql string) bool {
	w := strings.Fields(strings.ToLower(head(sql, 96)))
	if len(w) == 0 {
		return false
	}
	two := w[0]
	if len(w) > 1 {
		two += " " + w[1]
	}
	switch w[0] {
	case "vacuum", "reindex", "cluster", "call", "do", "lock", "savepoint", "release", "declare":
		return true
	case "set":
		return two == "set local" || two == "set transaction" || two == "set constraints"
	case "prepare":
		return two == "prepare transaction"
	case "create", "drop", "alter":
		switch two {
		case "create database", "drop database", "alter database", "create tablespace", "drop tablespace",
			"alter system", "create subscription", "drop subscription", "alter subscription":
			return true
		}
		// CREATE [UNIQUE] INDEX CONCURRENTLY, DROP INDEX CONCURRENTLY,
		// ALTER TABLE … DETACH PARTITION … CONCURRENTLY.
		return hasWord(strings.ToLower(sql), "concurrently")
	case "discard":
		return two == "discard all"
	case "commit":
		return two == "commit prepared"
	case "rollback":
		return two == "rollback prepared" || two == "rollback to"
	}
	return false
}

// head returns sql from its first word, at most n bytes of it: white
// space, parentheses and comments before it skipped.
func head(sql string, n int) string {
	for i := 0; i < len(sql); {
		c := sql[i]
		switch {
		case lex.IsSpace(c) || c == '(':
			i++
		case c == '/' && i+1 < len(sql) && sql[i+1] == '*':
			j, ok := lex.SkipBlockComment(sql, i+2)
			if !ok {
				return ""
			}
			i = j
		case c == '-' && i+1 < len(sql) && sql[i+1] == '-':
			j := strings.IndexByte(sql[i:], '\n')
			if j < 0 {
				return ""
			}
			i += j + 1
		default:
			return sql[i:min(len(sql), i+n)]
		}
	}
	return ""
}

// hasWord reports whether s holds w as a word of its own, not as part of
// an identifier (concurrently_updated).
func hasWord(s, w string) bool {
	for i := 0; ; {
		j := strings.Index(s[i:], w)
		if j < 0 {
			return false
		}
		a, b := i+j, i+j+len(w)
		if (a == 0 || !lex.IsIdent(s[a-1])) && (b == len(s) || !lex.IsIdent(s[b])) {
			return true
		}
		i = b
	}
}

// beginTx begins a transaction whose application_name is the context's
// tenant's, set in the round trip of BEGIN (a simple query of two
// statements), when the DB is in a session mode and the context has a
// tenant.
func (db *DB) beginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error) {
	if b, ok := db.q.(txBeginner); ok {
		named := false
		if db.mode >= sqlcomment.ModeSession && opts.BeginQuery == "" {
			if st := db.c.Plain(ctx, ""); st.Tagged && st.Tags.Tenant != "" {
				opts.BeginQuery = beginSQL(opts) + "; SET LOCAL application_name = '" + db.c.SessionName(db.own, st.Tags) + "'"
				named = true
			}
		}
		tx, err := b.BeginTx(ctx, opts)
		if err != nil || !named {
			return tx, err
		}
		return namedTx{tx}, nil
	}
	if b, ok := db.q.(beginner); ok && opts == (pgx.TxOptions{}) {
		return b.Begin(ctx) // a pgx.Tx: a savepoint, already tagged
	}
	if _, ok := db.q.(beginner); ok {
		return nil, fmt.Errorf("pgxcomment: a transaction's savepoint takes no options")
	}
	return nil, errNoBegin
}

// namedTx is a transaction whose BEGIN set the application_name: a DB
// for it (With) sends its statements as written in ModeSession, where a
// DB for any other transaction comments them, since nothing else names
// their tenant. Its savepoints are named too (they run under its name).
type namedTx struct{ pgx.Tx }

var _ pgx.Tx = namedTx{}

// Begin begins a savepoint, which runs under the transaction's name.
func (t namedTx) Begin(ctx context.Context) (pgx.Tx, error) {
	sp, err := t.Tx.Begin(ctx)
	if err != nil {
		return sp, err
	}
	return namedTx{sp}, nil
}

// beginSQL is pgx's TxOptions.beginSQL (unexported there).
func beginSQL(o pgx.TxOptions) string {
	var b strings.Builder
	b.WriteString("begin")
	if o.IsoLevel != "" {
		b.WriteString(" isolation level ")
		b.WriteString(string(o.IsoLevel))
	}
	if o.AccessMode != "" {
		b.WriteByte(' ')
		b.WriteString(string(o.AccessMode))
	}
	if o.DeferrableMode != "" {
		b.WriteByte(' ')
		b.WriteString(string(o.DeferrableMode))
	}
	return b.String()
}
