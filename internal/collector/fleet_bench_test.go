package collector

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/store/chstore"
)

var reportEvery = flag.Duration("cluster.report.every", time.Hour,
	"BenchmarkClusterReport7Days: one rollup row per tenant every this long (1m is the densest fleet)")

var withSums = flag.Bool("cluster.report.sums", true,
	"BenchmarkClusterReport7Days: sum the generated hours first, as a collector's writes are (false: time the read of hours without sums)")

// BenchmarkClusterReport7Days measures `collector report --from 7d` (the
// same BuildReport) on the replicated cluster over 10,000 tenants × 7
// days of rollups, generated on the servers (INSERT … SELECT through the
// Distributed table, so they are sharded by tenant and replicated), one
// row per tenant every -cluster.report.every, over 3 writers.
func BenchmarkClusterReport7Days(b *testing.B) {
	name, addrs := testsvc.ClickHouseCluster(b)
	db := fmt.Sprintf("qtop_report_%d", os.Getpid())
	ctx := context.Background()
	st, err := chstore.Open(ctx, strings.Join(addrs, ","), db, chstore.WithCluster(name), chstore.WithReplicated())
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: addrs[:1], ReadTimeout: 10 * time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	defer conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db+" ON CLUSTER "+name)
	const tenants = 10_000
	end := time.Now().UTC().Truncate(time.Hour)
	start := end.Add(-7 * 24 * time.Hour)
	step := int64(reportEvery.Seconds())
	slots := int64(7*24*time.Hour/time.Second) / step
	rows := slots * tenants
	t0 := time.Now()
	q := fmt.Sprintf(`INSERT INTO %s.rollups_dist (minute, writer, version, service, tenant, route, tier, kind,
    count, errors, duration_seconds, ru, bytes, rows, active_session_seconds, latency_idx, latency_cnt)
SELECT toDateTime(%d + intDiv(number, %d) * %d) AS minute, concat('collector', toString(number %% 3)), 1, 'api',
    concat('tenant', toString(number %% %d)), '/r', 2, 'request',
    1 + number %% 97, number %% 3, 0.01 * (number %% 13), toFloat64(1 + number %% 89), 1000, 10, 0, [toUInt16(300)], [toUInt64(1)]
FROM numbers(%d)`, db, start.Unix(), tenants, step, tenants, rows)
	if err := conn.Exec(clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{"insert_distributed_sync": 1})), q); err != nil {
		b.Fatal(err)
	}
	b.Logf("generated %d rollup rows (%d tenants × 7 days, one every %v) in %v", rows, tenants, *reportEvery, time.Since(t0).Round(time.Millisecond))
	// The hours are summed as a collector's writes are (SumHours: what a
	// report reads of the closed hours), unless -cluster.report.sums=false times the read
	// of hours without their sums.
	if *withSums {
		t0 = time.Now()
		if err := chstore.MarkWritten(ctx, st, start, end); err != nil {
			b.Fatal(err)
		}
		// An hour is summed once it went unwritten for 30 s (replicas
		// catch up meanwhile): polled until all are, with a deadline.
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		summed := 0
		for deadline := time.Now().Add(5 * time.Minute); summed < 7*24; <-tick.C {
			n, err := st.SumHours(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if summed += n; time.Now().After(deadline) {
				b.Fatalf("%d of %d hours summed after 5 minutes", summed, 7*24)
			}
		}
		b.Logf("summed %d hours in %v", summed, time.Since(t0).Round(time.Millisecond))
	}
	req := ReportRequest{From: start, To: end, Measure: MeasureRU}
	b.ResetTimer()
	for range b.N {
		rep, err := BuildReport(ctx, st, req, nil)
		if err != nil {
			b.Fatal(err)
		}
		if len(rep.Lines) < tenants {
			b.Fatalf("%d report lines, want %d tenants", len(rep.Lines), tenants)
		}
	}
	b.ReportMetric(float64(rows), "rows")
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/report")
}
