package chstore

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/qtop-dev/qtop/store"
)

// BenchmarkLiveClusterWrite measures three collectors writing rollups at
// once into the replicated cluster (2 shards × 2 replicas, each insert
// through the Distributed table, synchronous, deduplicated by the
// Replicated tables), each through a different node, in batches of the
// size given. One op is one batch from each of the three; rows/s counts
// all three.
func BenchmarkLiveClusterWrite(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("3x%dk", n/1000), func(b *testing.B) {
			c := newLiveCluster(b)
			var stores []*Store
			for i := range 3 {
				order := append(append([]string(nil), c.addrs[i:]...), c.addrs[:i]...)
				s, err := Open(context.Background(), strings.Join(order, ","), c.db, WithCluster(c.name), WithReplicated())
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { s.Close() })
				stores = append(stores, s)
			}
			batches := make([][]store.Rollup, 3)
			for i := range batches {
				batches[i] = benchRows(n, false)
				for j := range batches[i] {
					batches[i][j].Writer = fmt.Sprintf("collector%d", i)
				}
			}
			ctx := context.Background()
			b.ResetTimer()
			for it := range b.N {
				var wg sync.WaitGroup
				for i, s := range stores {
					rows := batches[i]
					for j := range rows {
						rows[j].Version = uint64(it + 1) // a new block each time: not deduplicated
					}
					wg.Add(1)
					go func() {
						defer wg.Done()
						if err := s.WriteRollups(ctx, rows); err != nil {
							b.Error(err)
						}
					}()
				}
				wg.Wait()
			}
			b.ReportMetric(float64(3*n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
