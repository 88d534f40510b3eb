package main

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/qtop-dev/qtop/sqlcomment"
	"github.com/qtop-dev/qtop/sqlcomment/pgxcomment"
	"github.com/qtop-dev/qtop/tenant"
)

// The kinds of work a worker does, in turn at random.
const (
	kindTxCommit   = iota // BEGIN (tagged), a statement, COMMIT
	kindTxRollback        // BEGIN, a statement, ROLLBACK
	kindTxError           // BEGIN, a statement, a failing one, ROLLBACK
	kindAutoArgs          // one statement with arguments outside a transaction
	kindAutoNoArgs        // one statement without arguments (a simple query)
	kindUntagged          // one statement whose context has no tenant
	kindUntaggedTx        // an untagged transaction
	kinds
)

var kindNames = [kinds]string{"tx-commit", "tx-rollback", "tx-error", "autocommit", "autocommit-noargs", "untagged", "untagged-tx"}

// probe names its tenant in a literal and returns the application_name
// the statement itself ran under.
const probe = "SELECT '%s'::text, current_setting('application_name'), (SELECT 1 FROM pg_sleep($1::float8))"

// probeNoArgs is probe as a simple query (Exec without arguments).
const probeNoArgs = "SELECT '%s'::text, current_setting('application_name'), (SELECT 1 FROM pg_sleep(%g))"

// loader sends the load through pgx or database/sql.
type loader struct {
	o       options
	mode    sqlcomment.Mode
	tenants []string
	pgx     *pgxcomment.DB
	sql     *sql.DB
}

func newLoader(ctx context.Context, o options, cfg *pgxpool.Config, mode sqlcomment.Mode) (*loader, func(), error) {
	ld := &loader{o: o, mode: mode}
	for i := range o.tenants {
		ld.tenants = append(ld.tenants, fmt.Sprintf("tenant%02d", i))
	}
	opts := []sqlcomment.Option{sqlcomment.WithApplication(o.service), sqlcomment.WithMode(mode)}
	switch o.driver {
	case "pgx":
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return nil, nil, err
		}
		ld.pgx = pgxcomment.Wrap(pool, opts...)
		return ld, pool.Close, nil
	case "stdlib":
		opts = append(opts, pgxcomment.StdlibSession(), pgxcomment.StdlibExecMode())
		ld.sql = sql.OpenDB(sqlcomment.WrapConnector(stdlib.GetConnector(*cfg.ConnConfig), opts...))
		ld.sql.SetMaxOpenConns(o.poolConns)
		ld.sql.SetMaxIdleConns(o.poolConns)
		return ld, func() { ld.sql.Close() }, nil
	}
	return nil, nil, fmt.Errorf("unknown driver %q", o.driver)
}

// want is the application_name a statement of tags should run under: the
// tenant's in a tagged transaction of a session mode, and for a statement
// outside a transaction with pgx in ModeSession (set in its round trip);
// the connection's own elsewhere (outside a transaction, database/sql and
// ModeBoth send the comment).
func (ld *loader) want(kind int, t tenant.Tags, tagged bool) string {
	mode := ld.mode.Resolve(true)
	switch {
	case !tagged || mode == sqlcomment.ModeComment:
		return ld.o.startupName
	case kind == kindAutoArgs && (ld.sql != nil || mode == sqlcomment.ModeBoth):
		return ld.o.startupName
	}
	return sqlcomment.ApplicationName(ld.o.service, t)
}

func (ld *loader) work(ctx context.Context, w int, res *results) {
	rng := rand.New(rand.NewPCG(uint64(w), 1))
	for ctx.Err() == nil {
		kind := rng.IntN(kinds)
		t := tenant.Tags{Tenant: ld.tenants[rng.IntN(len(ld.tenants))], Tier: tenant.T0 + tenant.Tier(rng.IntN(4))}
		tagged := kind != kindUntagged && kind != kindUntaggedTx
		tctx := ctx
		truthName := "truth:-"
		if tagged {
			tctx = tenant.With(ctx, t)
			truthName = "truth:" + t.Tenant
		}
		var err error
		var got string
		if ld.pgx != nil {
			got, err = ld.pgxOp(tctx, kind, truthName)
		} else {
			got, err = ld.sqlOp(tctx, kind, truthName)
		}
		if ctx.Err() != nil {
			return
		}
		res.ops.Add(1)
		if err != nil {
			res.fail(kindNames[kind], err)
			continue
		}
		if want := ld.want(kind, t, tagged); got != "\x00" && got != want {
			res.mismatch(kindNames[kind], want, got)
		}
	}
}

// isDivByZero: the failing statement of kindTxError failed as meant.
func isDivByZero(err error) bool {
	return err != nil && strings.Contains(err.Error(), "division by zero")
}

func (ld *loader) pgxOp(ctx context.Context, kind int, truthName string) (string, error) {
	q := fmt.Sprintf(probe, truthName)
	var s string
	var name string
	var one int
	switch kind {
	case kindAutoArgs, kindUntagged:
		err := ld.pgx.QueryRow(ctx, q, ld.o.sleep).Scan(&s, &name, &one)
		return name, err
	case kindAutoNoArgs:
		_, err := ld.pgx.Exec(ctx, fmt.Sprintf(probeNoArgs, truthName, ld.o.sleep))
		return "\x00", err
	}
	tx, err := ld.pgx.Begin(ctx)
	if err != nil {
		return "", err
	}
	defer tx.Rollback(context.Background())
	db := ld.pgx.With(tx)
	if err := db.QueryRow(ctx, q, ld.o.sleep).Scan(&s, &name, &one); err != nil {
		return "", err
	}
	switch kind {
	case kindTxRollback:
		return name, tx.Rollback(ctx)
	case kindTxError:
		if _, err := db.Exec(ctx, "SELECT 1/$1::int", 0); !isDivByZero(err) {
			return "", fmt.Errorf("want division by zero, got %v", err)
		}
		return name, tx.Rollback(ctx)
	}
	return name, tx.Commit(ctx)
}

func (ld *loader) sqlOp(ctx context.Context, kind int, truthName string) (string, error) {
	q := fmt.Sprintf(probe, truthName)
	var s, name string
	var one int
	switch kind {
	case kindAutoArgs, kindUntagged:
		err := ld.sql.QueryRowContext(ctx, q, ld.o.sleep).Scan(&s, &name, &one)
		return name, err
	case kindAutoNoArgs:
		_, err := ld.sql.ExecContext(ctx, fmt.Sprintf(probeNoArgs, truthName, ld.o.sleep))
		return "\x00", err
	}
	tx, err := ld.sql.BeginTx(ctx, nil)
	if err != nil {
		return "", err
	}
	defer tx.Rollback()
	if err := tx.QueryRowContext(ctx, q, ld.o.sleep).Scan(&s, &name, &one); err != nil {
		return "", err
	}
	switch kind {
	case kindTxRollback:
		return name, tx.Rollback()
	case kindTxError:
		if _, err := tx.ExecContext(ctx, "SELECT 1/$1::int", 0); !isDivByZero(err) {
			return "", fmt.Errorf("want division by zero, got %v", err)
		}
		return name, tx.Rollback()
	}
	return name, tx.Commit()
}
