package histogram_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/qtop-dev/qtop/histogram"
	"github.com/qtop-dev/qtop/internal/testsvc"
)

// The store keeps a histogram per row as Dense() in an Array(UInt64) and
// merges rows with sumForEach. This checks, against a real ClickHouse, that
// what comes back is exactly the Go merge of the same histograms.
func TestDenseMergesInClickHouse(t *testing.T) {
	addr := testsvc.ClickHouse(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Ping(ctx); err != nil {
		t.Fatalf("ping %s: %v", addr, err)
	}
	table := fmt.Sprintf("ratio_dense_test_%d_%d", os.Getpid(), time.Now().UnixNano())
	if err := conn.Exec(ctx, "CREATE TABLE "+table+
		" (minute UInt32, process String, buckets Array(UInt64)) ENGINE = Memory"); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(context.Background(), "DROP TABLE IF EXISTS "+table)

	// Three minutes, five processes each, different latency levels; plus
	// values outside the range, which land in the end buckets.
	r := rand.New(rand.NewPCG(71, 72))
	const minutes, processes = 3, 5
	want := make([]histogram.Histogram, minutes)
	batch, err := conn.PrepareBatch(ctx, "INSERT INTO "+table+" (minute, process, buckets)")
	if err != nil {
		t.Fatal(err)
	}
	for m := 0; m < minutes; m++ {
		for p := 0; p < processes; p++ {
			var h histogram.Histogram
			median := 0.005 * float64(m+1) * float64(p+1)
			for i := 0; i < 2000+r.IntN(2000); i++ {
				h.Observe(median * math.Exp(r.NormFloat64()))
			}
			h.Observe(0)
			h.Observe(2 * histogram.MaxSeconds)
			want[m].Merge(&h)
			if err := batch.Append(uint32(m), fmt.Sprintf("p%d", p), h.Dense()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}

	rows, err := conn.Query(ctx, "SELECT minute, sumForEach(buckets) FROM "+table+" GROUP BY minute ORDER BY minute")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seen := 0
	for rows.Next() {
		var (
			minute uint32
			sum    []uint64
		)
		if err := rows.Scan(&minute, &sum); err != nil {
			t.Fatal(err)
		}
		var got histogram.Histogram
		if err := got.AddDense(sum); err != nil {
			t.Fatalf("minute %d: %v", minute, err)
		}
		w := &want[minute]
		if got.Count() != w.Count() {
			t.Fatalf("minute %d: count %d from ClickHouse, %d merged in Go", minute, got.Count(), w.Count())
		}
		i := 0
		for _, c := range w.Dense() {
			if sum[i] != c {
				t.Fatalf("minute %d bucket %d: %d from ClickHouse, %d merged in Go", minute, i, sum[i], c)
			}
			i++
		}
		for _, q := range []float64{0.5, 0.95, 0.99} {
			if a, b := got.Quantile(q), w.Quantile(q); a != b {
				t.Fatalf("minute %d p%v: %v from ClickHouse, %v in Go", minute, 100*q, a, b)
			}
		}
		seen++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if seen != minutes {
		t.Fatalf("%d minutes back, want %d", seen, minutes)
	}
}
