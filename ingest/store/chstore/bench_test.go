package chstore

import (
	"context"
	"fmt"
	"testing"

	"github.com/qtop-dev/qtop/ingest/store"
	"github.com/qtop-dev/qtop/ingest/store/storetest"
	"github.com/qtop-dev/qtop/ratio"
)

func benchRows(n int, withLatency bool) []store.Rollup {
	rows := make([]store.Rollup, n)
	for i := range rows {
		rows[i] = storetest.Row(i%60, fmt.Sprintf("c%d", i%4), fmt.Sprintf("tenant-%05d", i%5000), fmt.Sprintf("/r/%d", i%50), uint64(i%977+1))
		if withLatency {
			lat := make([]uint64, ratio.NumBuckets)
			lat[200+i%300], lat[600+i%100] = uint64(i%50+1), 3
			rows[i].Latency = lat
		}
	}
	return rows
}

// BenchmarkWriteRollups measures batched rollup inserts into the real
// ClickHouse, column-wise with LZ4; rows/s is the figure to read.
func BenchmarkWriteRollups(b *testing.B) {
	for _, c := range []struct {
		name    string
		n       int
		latency bool
	}{
		{"10k", 10_000, false},
		{"100k", 100_000, false},
		{"10k_latency", 10_000, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			s, _, _ := openTest(b)
			rows := benchRows(c.n, c.latency)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := s.WriteRollups(ctx, rows); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(c.n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// BenchmarkWriteRollupsParallel is the same with several collectors'
// batches in flight at once (the store is safe for concurrent use): on
// ClickHouse 18.16 each insert writes a part file per column, a fixed
// cost that parallel inserts overlap.
func BenchmarkWriteRollupsParallel(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			s, _, _ := openTest(b)
			rows := benchRows(n, false)
			b.SetParallelism(2) // 2 × GOMAXPROCS writers
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := s.WriteRollups(context.Background(), rows); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

func TestAppendSparse(t *testing.T) {
	for _, set := range [][]int{nil, {0}, {7}, {8}, {ratio.NumBuckets - 1}, {3, 4, 5, 700, ratio.NumBuckets - 2}} {
		lat := make([]uint64, ratio.NumBuckets)
		for k, i := range set {
			lat[i] = uint64(k + 1)
		}
		idx, cnt := appendSparse([]uint16{9}, []uint64{9}, lat)
		if len(idx) != len(set)+1 || len(cnt) != len(set)+1 || idx[0] != 9 {
			t.Fatalf("set %v: idx %v cnt %v", set, idx, cnt)
		}
		for k, i := range set {
			if int(idx[k+1]) != i || cnt[k+1] != uint64(k+1) {
				t.Fatalf("set %v: idx %v cnt %v", set, idx, cnt)
			}
		}
	}
}

// BenchmarkFill is the client-side part of a write: rows to columns.
func BenchmarkFill(b *testing.B) {
	rows := benchRows(10_000, true)
	c := new(rollupCols)
	c.fill(rows) // warm: the pool keeps buffers this size
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		c.fill(rows)
	}
}
