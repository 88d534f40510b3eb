package pgxcomment_test

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"math/rand/v2"
	"net"
	"net/url"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/sqlcomment"
	"github.com/qtop-dev/qtop/sqlcomment/pgxcomment"
)

// tpcbDB creates a database of its own, fills it with `pgbench -i -s 1`,
// and returns its DSN; it is dropped when b ends.
func tpcbDB(b *testing.B) string {
	b.Helper()
	dsn := testsvc.Postgres(b)
	bg := context.Background()
	admin, err := pgx.Connect(bg, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close(bg)
	var rb [4]byte
	crand.Read(rb[:])
	name := "qtop_tpcb_" + hex.EncodeToString(rb[:])
	if _, err := admin.Exec(bg, "CREATE DATABASE "+name); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		c, err := pgx.Connect(bg, dsn)
		if err == nil {
			c.Exec(bg, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			c.Close(bg)
		}
	})
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		b.Fatal(err)
	}
	u := (&url.URL{Scheme: "postgres", User: url.UserPassword(cfg.User, cfg.Password),
		Host: net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))), Path: "/" + name, RawQuery: "sslmode=disable"}).String()
	out, err := exec.Command("pgbench", "-i", "-s", "1", "-q", u).CombinedOutput()
	if err != nil {
		b.Fatalf("pgbench -i: %v\n%s", err, out)
	}
	return u
}

// The five statements of pgbench's built-in TPC-B-like script.
const (
	tpcbAccount = "UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2"
	tpcbSelect  = "SELECT abalance FROM pgbench_accounts WHERE aid = $1"
	tpcbTeller  = "UPDATE pgbench_tellers SET tbalance = tbalance + $1 WHERE tid = $2"
	tpcbBranch  = "UPDATE pgbench_branches SET bbalance = bbalance + $1 WHERE bid = $2"
	tpcbHistory = "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES ($1, $2, $3, $4, CURRENT_TIMESTAMP)"
)

// tpcb runs one TPC-B-like transaction on q (begun by begin).
func tpcb(ctx context.Context, begin func(context.Context) (pgx.Tx, error), with func(pgx.Tx) pgxcomment.Querier, r *rand.Rand) error {
	aid, bid, tid, delta := 1+r.IntN(100000), 1, 1+r.IntN(10), r.IntN(10001)-5000
	tx, err := begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	q := with(tx)
	if _, err := q.Exec(ctx, tpcbAccount, delta, aid); err != nil {
		return err
	}
	var bal int
	if err := q.QueryRow(ctx, tpcbSelect, aid).Scan(&bal); err != nil {
		return err
	}
	if _, err := q.Exec(ctx, tpcbTeller, delta, tid); err != nil {
		return err
	}
	if _, err := q.Exec(ctx, tpcbBranch, delta, bid); err != nil {
		return err
	}
	if _, err := q.Exec(ctx, tpcbHistory, tid, bid, aid, delta); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// BenchmarkPostgresTPCB runs pgbench's TPC-B-like transaction (tables
// from `pgbench -i -s 1` in a database of its own) on two loopback
// connections, alternating transaction by transaction so that both see
// the same server: untagged through pgx's default mode, and tagged (10,000
// tenants in turn) and budgeted through pgxcomment with an "each tenant"
// budget (share, per-statement cap, concurrency, Enforce) and a runaway
// rule that matches none of them; and, to tell the execution mode's cost
// from the wrapper's, untagged in QueryExecModeExec. It reports the time
// per transaction of each and the ratios.
func BenchmarkPostgresTPCB(b *testing.B) {
	dsn := tpcbDB(b)
	bg := context.Background()
	plain, err := pgx.Connect(bg, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer plain.Close(bg)
	tc, err := pgx.Connect(bg, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer tc.Close(bg)
	budgets := sqlcomment.NewBudgets()
	if err := budgets.Set([]policy.Budget{{ID: "tenants", Each: "tenant", Share: 10, MaxStatementSeconds: 5,
		Concurrency: 4, Mode: policy.Enforce, ConfirmBroad: true, Reason: "bench"}},
		[]policy.Runaway{{ID: "r", Match: []map[string]string{{"tenant": "nobody"}}, AfterSeconds: 60, Action: policy.Cancel, Reason: "bench"}}); err != nil {
		b.Fatal(err)
	}
	db := pgxcomment.Wrap(tc, sqlcomment.WithApplication("bench"), sqlcomment.WithBudgets(budgets))
	ctxs := tenantContexts()
	r := rand.New(rand.NewPCG(1, 2))
	plainBegin := plain.Begin
	plainWith := func(tx pgx.Tx) pgxcomment.Querier { return tx }
	taggedWith := func(tx pgx.Tx) pgxcomment.Querier { return db.With(tx) }
	// Warm both (statement cache, shapes).
	for i := range 50 {
		if err := tpcb(bg, plainBegin, plainWith, r); err != nil {
			b.Fatal(err)
		}
		if err := tpcb(ctxs[i], db.Begin, taggedWith, r); err != nil {
			b.Fatal(err)
		}
	}
	// The third: untagged in QueryExecModeExec, the mode pgxcomment sends
	// tagged statements in, to tell the mode's cost from the wrapper's.
	ec, err := pgx.Connect(bg, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer ec.Close(bg)
	execWith := func(tx pgx.Tx) pgxcomment.Querier { return execMode{tx} }
	// The fourth: tagged and budgeted, sent in the simple protocol (a
	// QueryExecMode first argument, which the wrapper respects).
	sc, err := pgx.Connect(bg, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer sc.Close(bg)
	sdb := pgxcomment.Wrap(sc, sqlcomment.WithApplication("bench"), sqlcomment.WithBudgets(budgets))
	simpleWith := func(tx pgx.Tx) pgxcomment.Querier { return withMode{sdb.With(tx), pgx.QueryExecModeSimpleProtocol} }
	runs := []func(i int) error{
		func(int) error { return tpcb(bg, plainBegin, plainWith, r) },
		func(i int) error { return tpcb(ctxs[i%benchTenants], db.Begin, taggedWith, r) },
		func(int) error { return tpcb(bg, ec.Begin, execWith, r) },
		func(i int) error { return tpcb(ctxs[i%benchTenants], sdb.Begin, simpleWith, r) },
	}
	var took [4]time.Duration
	i := 0
	for b.Loop() {
		// Rotate which goes first, so that none always follows another's
		// commit.
		for k := range len(runs) {
			j := (i + k) % len(runs)
			t0 := time.Now()
			if err := runs[j](i); err != nil {
				b.Fatal(err)
			}
			took[j] += time.Since(t0)
		}
		i++
	}
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(i) }
	b.ReportMetric(per(took[0]), "untagged-ns/tx")
	b.ReportMetric(per(took[1]), "tagged-ns/tx")
	b.ReportMetric(per(took[2]), "untagged-exec-ns/tx")
	b.ReportMetric(float64(took[1])/float64(took[0]), "tagged/untagged")
	b.ReportMetric(float64(took[1])/float64(took[2]), "tagged/untagged-exec")
	b.ReportMetric(per(took[3]), "tagged-simple-ns/tx")
	b.ReportMetric(float64(took[3])/float64(took[0]), "tagged-simple/untagged")
	if bs, _ := budgets.Stats(); bs[0].Admitted == 0 {
		b.Fatal("the budget admitted nothing")
	}
}

// execMode sends every statement of a transaction in QueryExecModeExec.
type execMode struct{ tx pgx.Tx }

func (e execMode) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return e.tx.Exec(ctx, sql, append([]any{pgx.QueryExecModeExec}, args...)...)
}

func (e execMode) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return e.tx.Query(ctx, sql, append([]any{pgx.QueryExecModeExec}, args...)...)
}

func (e execMode) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return e.tx.QueryRow(ctx, sql, append([]any{pgx.QueryExecModeExec}, args...)...)
}

// withMode sends every statement through q with mode as first argument.
type withMode struct {
	q    pgxcomment.Querier
	mode pgx.QueryExecMode
}

func (w withMode) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return w.q.Exec(ctx, sql, append([]any{w.mode}, args...)...)
}

func (w withMode) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return w.q.Query(ctx, sql, append([]any{w.mode}, args...)...)
}

func (w withMode) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return w.q.QueryRow(ctx, sql, append([]any{w.mode}, args...)...)
}
