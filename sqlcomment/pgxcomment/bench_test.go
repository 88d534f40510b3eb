package pgxcomment_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/sqlcomment"
	"github.com/qtop-dev/qtop/sqlcomment/pgxcomment"
	"github.com/qtop-dev/qtop/tenant"
)

const (
	benchTenants = 10000
	benchQuery   = "SELECT $1::int8 + 1"
)

func tenantContexts() []context.Context {
	ctxs := make([]context.Context, benchTenants)
	for i := range ctxs {
		ctxs[i] = tenant.With(context.Background(), tenant.Tags{Tenant: fmt.Sprintf("tenant-%05d", i), Route: "GET /v1/items", Tier: tenant.T2})
	}
	return ctxs
}

// BenchmarkPostgres runs a short query on one connection to the real
// PostgreSQL, cycling through 10,000 tenants, and reports the statements
// left prepared on the server (server-prepared):
//
//   - pgx/untagged: pgx's default mode, statement cache, no comment;
//   - pgx/tagged: through pgxcomment (QueryExecModeExec for tagged texts);
//   - pgx/naive-cached: the same comments in pgx's default mode, which is
//     what a QueryRewriter gives: a prepare per distinct text;
//   - stdlib/*: the same through database/sql, with pgxcomment.StdlibExecMode
//     (tagged) and without it (tagged-cached).
func BenchmarkPostgres(b *testing.B) {
	dsn := testsvc.Postgres(b)
	ctxs := tenantContexts()
	naive := make([]string, benchTenants)
	for i := range naive {
		t, _ := tenant.From(ctxs[i])
		naive[i] = sqlcomment.Append(benchQuery, map[string]string{"tenant": t.Tenant, "route": t.Route, "tier": t.Tier.String()})
	}
	bg := context.Background()

	pgxRun := func(b *testing.B, query func(c *pgx.Conn, db *pgxcomment.DB, i int) pgx.Row) {
		c, err := pgx.Connect(bg, dsn)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close(bg)
		db := pgxcomment.Wrap(c)
		var x int64
		i := 0
		for b.Loop() {
			if err := query(c, db, i).Scan(&x); err != nil {
				b.Fatal(err)
			}
			i++
		}
		var n int
		if err := c.QueryRow(bg, "SELECT count(*) FROM pg_prepared_statements", pgx.QueryExecModeSimpleProtocol).Scan(&n); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(n), "server-prepared")
	}
	b.Run("pgx/untagged", func(b *testing.B) {
		pgxRun(b, func(c *pgx.Conn, _ *pgxcomment.DB, i int) pgx.Row { return c.QueryRow(bg, benchQuery, i) })
	})
	b.Run("pgx/tagged", func(b *testing.B) {
		pgxRun(b, func(_ *pgx.Conn, db *pgxcomment.DB, i int) pgx.Row {
			return db.QueryRow(ctxs[i%benchTenants], benchQuery, i)
		})
	})
	b.Run("pgx/naive-cached", func(b *testing.B) {
		pgxRun(b, func(c *pgx.Conn, _ *pgxcomment.DB, i int) pgx.Row { return c.QueryRow(bg, naive[i%benchTenants], i) })
	})

	stdRun := func(b *testing.B, tagged bool, opts ...sqlcomment.Option) {
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			b.Fatal(err)
		}
		var db *sql.DB
		if tagged {
			db = sql.OpenDB(sqlcomment.WrapConnector(stdlib.GetConnector(*cfg), opts...))
		} else {
			db = sql.OpenDB(stdlib.GetConnector(*cfg))
		}
		defer db.Close()
		db.SetMaxOpenConns(1)
		var x int64
		i := 0
		for b.Loop() {
			ctx := bg
			if tagged {
				ctx = ctxs[i%benchTenants]
			}
			if err := db.QueryRowContext(ctx, benchQuery, i).Scan(&x); err != nil {
				b.Fatal(err)
			}
			i++
		}
		var n int
		if err := db.QueryRowContext(bg, "SELECT count(*) FROM pg_prepared_statements").Scan(&n); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(n), "server-prepared")
	}
	b.Run("stdlib/untagged", func(b *testing.B) { stdRun(b, false) })
	b.Run("stdlib/tagged", func(b *testing.B) { stdRun(b, true, pgxcomment.StdlibExecMode()) })
	b.Run("stdlib/tagged-cached", func(b *testing.B) { stdRun(b, true) })
}

// BenchmarkPostgresInterleaved alternates an untagged and a tagged query
// (each on its own connection) in the same loop, so that both see the same
// machine load, and reports the throughput ratio: tagged-vs-untagged is
// the tagged mean time over the untagged one (1.10 = 10% slower), with the
// medians beside it.
//
// The pgx case runs a third connection: the untagged query in the tagged
// one's execution mode (QueryExecModeExec, nothing prepared), so that the
// two parts of the cost are apart: tagged-vs-exec is what the comment
// itself costs, exec-vs-untagged what not preparing costs.
func BenchmarkPostgresInterleaved(b *testing.B) {
	dsn := testsvc.Postgres(b)
	ctxs := tenantContexts()
	bg := context.Background()
	mean := func(d []time.Duration) float64 {
		var s time.Duration
		for _, v := range d {
			s += v
		}
		return float64(s) / float64(len(d))
	}
	median := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2])
	}
	report := func(b *testing.B, plain, tagged []time.Duration) {
		b.ReportMetric(mean(tagged)/mean(plain), "tagged-vs-untagged")
		b.ReportMetric(median(plain), "untagged-median-ns")
		b.ReportMetric(median(tagged), "tagged-median-ns")
	}
	b.Run("pgx", func(b *testing.B) {
		conns := make([]*pgx.Conn, 3)
		for i := range conns {
			c, err := pgx.Connect(bg, dsn)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close(bg)
			conns[i] = c
		}
		db := pgxcomment.Wrap(conns[2])
		var plain, exec, tagged []time.Duration
		var x int64
		i := 0
		for b.Loop() {
			t0 := time.Now()
			if err := conns[0].QueryRow(bg, benchQuery, i).Scan(&x); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			if err := conns[1].QueryRow(bg, benchQuery, pgx.QueryExecModeExec, i).Scan(&x); err != nil {
				b.Fatal(err)
			}
			t2 := time.Now()
			if err := db.QueryRow(ctxs[i%benchTenants], benchQuery, i).Scan(&x); err != nil {
				b.Fatal(err)
			}
			t3 := time.Now()
			plain, exec, tagged = append(plain, t1.Sub(t0)), append(exec, t2.Sub(t1)), append(tagged, t3.Sub(t2))
			i++
		}
		b.ReportMetric(mean(tagged)/mean(exec), "tagged-vs-exec")
		b.ReportMetric(mean(exec)/mean(plain), "exec-vs-untagged")
		report(b, plain, tagged)
	})
	b.Run("stdlib", func(b *testing.B) {
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			b.Fatal(err)
		}
		raw := sql.OpenDB(stdlib.GetConnector(*cfg))
		defer raw.Close()
		wrapped := sql.OpenDB(sqlcomment.WrapConnector(stdlib.GetConnector(*cfg), pgxcomment.StdlibExecMode()))
		defer wrapped.Close()
		raw.SetMaxOpenConns(1)
		wrapped.SetMaxOpenConns(1)
		var plain, tagged []time.Duration
		var x int64
		i := 0
		for b.Loop() {
			t0 := time.Now()
			if err := raw.QueryRowContext(bg, benchQuery, i).Scan(&x); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			if err := wrapped.QueryRowContext(ctxs[i%benchTenants], benchQuery, i).Scan(&x); err != nil {
				b.Fatal(err)
			}
			t2 := time.Now()
			plain, tagged = append(plain, t1.Sub(t0)), append(tagged, t2.Sub(t1))
			i++
		}
		report(b, plain, tagged)
	})
}
