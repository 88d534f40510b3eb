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
)

// BenchmarkPostgresTPCBSession runs pgbench's TPC-B-like transaction on
// four loopback connections, alternating transaction by transaction (the
// order and the connection of each mode rotating) so that all see the
// same server:
//
//   - untagged: pgx's default mode (statement cache), no tags;
//   - session: pgxcomment in ModeSession, 10,000 tenants in turn, the
//     tenant and tier set with set_config(…, true) in BEGIN's round trip;
//   - session-zipf: the same with tenants drawn from Zipf(1.1) over 10,000;
//   - comment: pgxcomment in ModeComment, 10,000 tenants in turn (tagged
//     statements in QueryExecModeExec).
//
// Commits do not wait for the WAL flush (synchronous_commit off), so that
// the figures measure the statements and round trips rather than the
// disk. It reports the time per transaction of each and their ratios to
// untagged, as sums and as the median of each iteration's ratio. Run it
// with
//
//	go test ./sqlcomment/pgxcomment -run '^$' -bench PostgresTPCBSession -benchtime 3s -count 3
func BenchmarkPostgresTPCBSession(b *testing.B) {
	dsn := tpcbDB(b)
	bg := context.Background()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		b.Fatal(err)
	}
	// Without waiting for the WAL flush at commit, a transaction is the
	// work of its statements and round trips: the tag's cost is a larger
	// part of it, and the shared disk's noise a smaller one.
	cfg.RuntimeParams["synchronous_commit"] = "off"
	conns := make([]*pgx.Conn, 4)
	for i := range conns {
		c, err := pgx.ConnectConfig(bg, cfg)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close(bg)
		conns[i] = c
	}
	// Each mode runs on each connection in turn: under CPU contention the
	// scheduler favours some server processes over others for seconds at
	// a time, which would otherwise count as a mode's cost.
	wrap := func(m sqlcomment.Mode) []*pgxcomment.DB {
		dbs := make([]*pgxcomment.DB, len(conns))
		for i, c := range conns {
			dbs[i] = pgxcomment.Wrap(c, sqlcomment.WithApplication("bench"), sqlcomment.WithMode(m))
		}
		return dbs
	}
	sess, comm := wrap(sqlcomment.ModeSession), wrap(sqlcomment.ModeComment)
	ctxs := tenantContexts()
	r := rand.New(rand.NewPCG(1, 2))
	zipf := rand.NewZipf(rand.New(rand.NewPCG(3, 4)), 1.1, 1, benchTenants-1)
	plainWith := func(tx pgx.Tx) pgxcomment.Querier { return tx }
	tagged := func(ctx context.Context, db *pgxcomment.DB) error {
		return tpcb(ctx, db.Begin, func(tx pgx.Tx) pgxcomment.Querier { return db.With(tx) }, r)
	}
	runs := []func(i, c int) error{
		func(_, c int) error { return tpcb(bg, conns[c].Begin, plainWith, r) },
		func(i, c int) error { return tagged(ctxs[i%benchTenants], sess[c]) },
		func(_, c int) error { return tagged(ctxs[zipf.Uint64()], sess[c]) },
		func(i, c int) error { return tagged(ctxs[i%benchTenants], comm[c]) },
	}
	for i := range 50 { // warm every connection's statement cache
		for j, run := range runs {
			if err := run(i, (i+j)%len(conns)); err != nil {
				b.Fatal(err)
			}
		}
	}
	var took [4]time.Duration
	var each [4][]time.Duration
	i := 0
	for b.Loop() {
		for k := range len(runs) {
			j := (i + k) % len(runs)
			t0 := time.Now()
			if err := runs[j](i, (i/len(runs)+j)%len(conns)); err != nil {
				b.Fatal(err)
			}
			d := time.Since(t0)
			took[j] += d
			each[j] = append(each[j], d)
		}
		i++
	}
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(i) }
	b.ReportMetric(per(took[0]), "untagged-ns/tx")
	b.ReportMetric(per(took[1]), "session-ns/tx")
	b.ReportMetric(float64(took[1])/float64(took[0]), "session/untagged")
	b.ReportMetric(float64(took[2])/float64(took[0]), "session-zipf/untagged")
	b.ReportMetric(float64(took[3])/float64(took[0]), "comment/untagged")
	// On a shared machine a few transactions wait for a CPU far longer
	// than they work: the median tells the typical transaction, and
	// the median of each iteration's ratio, whose two transactions ran
	// side by side, tells it best.
	paired := func(j int) float64 {
		r := make([]float64, len(each[j]))
		for k := range r {
			r[k] = float64(each[j][k]) / float64(each[0][k])
		}
		slices.Sort(r)
		return r[len(r)/2]
	}
	// The tenth percentile is each mode's own cost with the least
	// waiting for a CPU.
	p10 := func(j int) float64 {
		d := slices.Clone(each[j])
		slices.Sort(d)
		return float64(d[len(d)/10])
	}
	b.ReportMetric(p10(1)/p10(0), "p10-session/untagged")
	b.ReportMetric(p10(2)/p10(0), "p10-session-zipf/untagged")
	b.ReportMetric(p10(3)/p10(0), "p10-comment/untagged")
	b.ReportMetric(p10(0), "p10-untagged-ns/tx")
	b.ReportMetric(paired(1), "median-session/untagged")
	b.ReportMetric(paired(2), "median-session-zipf/untagged")
	b.ReportMetric(paired(3), "median-comment/untagged")
}
