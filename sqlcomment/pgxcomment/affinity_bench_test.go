package pgxcomment_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/qtop-dev/qtop/sqlcomment"
	"github.com/qtop-dev/qtop/sqlcomment/pgxcomment"
	"github.com/qtop-dev/qtop/tenant"
)

// BenchmarkPostgresTPCBAffinity measures the most tenant affinity in a
// pool could buy: a connection that already carries the tenant skips
// setting it. Three modes alternate as in BenchmarkPostgresTPCBSession
// (each on each of three connections in turn): untagged; ModeSession
// (set in every transaction); and a session-level name set in BEGIN's
// round trip only when the connection's (as PostgreSQL reports it to
// pgx) differs, with each tenant kept for four transactions in a row, as
// a pool with perfect affinity would serve a tenant that comes back. The
// last is not what pgxcomment does (a session-level name outlives
// ROLLBACK as the previous tenant's and crosses PgBouncer's transaction
// pooling); it bounds what affinity could save.
//
//	go test ./sqlcomment/pgxcomment -run '^$' -bench PostgresTPCBAffinity -benchtime 300x -count 3
func BenchmarkPostgresTPCBAffinity(b *testing.B) {
	dsn := tpcbDB(b)
	bg := context.Background()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		b.Fatal(err)
	}
	cfg.RuntimeParams["synchronous_commit"] = "off"
	conns := make([]*pgx.Conn, 3)
	sess := make([]*pgxcomment.DB, 3)
	for i := range conns {
		c, err := pgx.ConnectConfig(bg, cfg)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close(bg)
		conns[i] = c
		sess[i] = pgxcomment.Wrap(c, sqlcomment.WithApplication("bench"), sqlcomment.WithMode(sqlcomment.ModeSession))
	}
	ctxs := tenantContexts()
	r := rand.New(rand.NewPCG(1, 2))
	plainWith := func(tx pgx.Tx) pgxcomment.Querier { return tx }
	sticky := func(ctx context.Context, c *pgx.Conn) error {
		begin := func(ctx context.Context) (pgx.Tx, error) {
			t, _ := tenant.From(ctx)
			name := sqlcomment.ApplicationName("bench", t)
			if c.PgConn().ParameterStatus("application_name") == name {
				return c.Begin(ctx)
			}
			return c.BeginTx(ctx, pgx.TxOptions{BeginQuery: "begin; SET application_name = '" + name + "'"})
		}
		return tpcb(ctx, begin, plainWith, r)
	}
	runs := []func(i, c int) error{
		func(_, c int) error { return tpcb(bg, conns[c].Begin, plainWith, r) },
		func(i, c int) error {
			db := sess[c]
			return tpcb(ctxs[i%benchTenants], db.Begin, func(tx pgx.Tx) pgxcomment.Querier { return db.With(tx) }, r)
		},
		func(i, c int) error { return sticky(ctxs[(i/4)%benchTenants], conns[c]) },
	}
	var each [3][]time.Duration
	i := 0
	for b.Loop() {
		for k := range len(runs) {
			j := (i + k) % len(runs)
			// The sticky mode stays on one connection for its four
			// transactions in a row; the others rotate around it.
			c := (i/4/len(runs) + j) % len(conns)
			t0 := time.Now()
			if err := runs[j](i, c); err != nil {
				b.Fatal(err)
			}
			each[j] = append(each[j], time.Since(t0))
		}
		i++
	}
	paired := func(j int) float64 {
		q := make([]float64, len(each[j]))
		for k := range q {
			q[k] = float64(each[j][k]) / float64(each[0][k])
		}
		slices.Sort(q)
		return q[len(q)/2]
	}
	p10 := func(j int) float64 {
		d := slices.Clone(each[j])
		slices.Sort(d)
		return float64(d[len(d)/10])
	}
	b.ReportMetric(paired(1), "median-session/untagged")
	b.ReportMetric(paired(2), "median-sticky4/untagged")
	b.ReportMetric(p10(1)/p10(0), "p10-session/untagged")
	b.ReportMetric(p10(2)/p10(0), "p10-sticky4/untagged")
}
