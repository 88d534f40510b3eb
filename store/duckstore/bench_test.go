package duckstore

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/store/storetest"
)

func benchRows(n int) []store.Rollup {
	rows := make([]store.Rollup, n)
	for i := range rows {
		rows[i] = storetest.Row(i%1440, fmt.Sprintf("c%d", i%4), fmt.Sprintf("tenant-%05d", i%5000), fmt.Sprintf("/r/%d", i%50), uint64(i%977+1))
	}
	return rows
}

// BenchmarkWriteRollups measures upserting a batch into a DuckDB file;
// every iteration after the first replaces the same rows (a new version).
func BenchmarkWriteRollups(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			s, err := Open(filepath.Join(b.TempDir(), "bench.duckdb"))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			rows := benchRows(n)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				for j := range rows {
					rows[j].Version = uint64(i + 1)
				}
				if err := s.WriteRollups(context.Background(), rows); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

func BenchmarkUsage(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "bench.duckdb"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.WriteRollups(context.Background(), benchRows(50_000)); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := s.Usage(context.Background(), storetest.T0, storetest.T0.Add(24*time.Hour), true); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReads: one tenant's day and the cost report's Usage over
// storetest.BenchHistory (200 tenants × 2 days, written first, untimed).
func BenchmarkReads(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "bench.duckdb"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	storetest.FillBench(b, s)
	b.ResetTimer()
	storetest.BenchReads(b, s)
}
