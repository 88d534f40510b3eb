package chstore

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/column"

	"github.com/qtop-dev/qtop/histogram"
	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/store/storetest"
)

func benchRows(n int, withLatency bool) []store.Rollup {
	rows := make([]store.Rollup, n)
	for i := range rows {
		rows[i] = storetest.Row(i%60, fmt.Sprintf("c%d", i%4), fmt.Sprintf("tenant-%05d", i%5000), fmt.Sprintf("/r/%d", i%50), uint64(i%977+1))
		if withLatency {
			rows[i].Latency = storetest.Latency(uint64(200+i%300), uint64(i%50+1), uint64(600+i%100), 3)
		}
	}
	return rows
}

// BenchmarkWriteRollups measures batched rollup inserts into the real
// ClickHouse, column-wise with LZ4; rows/s is the figure to read, and
// client-ms/op the CPU the writing process spent per batch.
func BenchmarkWriteRollups(b *testing.B) {
	for _, c := range []struct {
		name    string
		n       int
		latency bool
	}{
		{"10k", 10_000, false},
		{"100k", 100_000, false},
		{"10k_latency", 10_000, true},
		{"100k_latency", 100_000, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			s, _, _ := openTest(b)
			rows := benchRows(c.n, c.latency)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			cpu := processCPU()
			for range b.N {
				if err := s.WriteRollups(ctx, rows); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(c.n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric((processCPU()-cpu).Seconds()*1000/float64(b.N), "client-ms/op")
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

// TestSparseLatency reads summed pairs back into a histogram: in order,
// with zero sums, out of order (summed), and refuses a bucket beyond the
// layout.
func TestSparseLatency(t *testing.T) {
	want := storetest.Latency(3, 1, 700, 5, histogram.NumBuckets-1, 2)
	for name, c := range map[string]struct {
		idx []uint16
		cnt []uint64
	}{
		"sorted":   {[]uint16{3, 700, histogram.NumBuckets - 1}, []uint64{1, 5, 2}},
		"zero sum": {[]uint16{3, 4, 700, histogram.NumBuckets - 1}, []uint64{1, 0, 5, 2}},
		"unsorted": {[]uint16{700, histogram.NumBuckets - 1, 3, 700}, []uint64{2, 2, 1, 3}},
	} {
		var got histogram.Sparse
		got.Add(9, 9) // replaced
		if err := sparseLatency(&got, c.idx, c.cnt); err != nil || !got.Equal(&want) {
			t.Errorf("%s: %v, %v, want %v", name, err, storetest.Pairs(&got), storetest.Pairs(&want))
		}
	}
	var got histogram.Sparse
	if err := sparseLatency(&got, []uint16{1, histogram.NumBuckets}, []uint64{1, 1}); !errors.Is(err, histogram.ErrLayout) {
		t.Errorf("bucket beyond the layout: %v", err)
	}
	if err := sparseLatency(&got, []uint16{1, 2}, []uint64{1}); err == nil {
		t.Error("more buckets than counts read")
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

// TestWriteWithoutLatency writes a batch in which no row has a histogram
// (latency arrays that are all empty, one of them from an emptied
// histogram): the rows read back with none, and a newer version written
// that way replaces one that had one.
func TestWriteWithoutLatency(t *testing.T) {
	s, _, _ := openTest(t)
	ctx := context.Background()
	old := storetest.Row(0, "w1", "acme", "/a", 10)
	old.Latency = storetest.Latency(5, 3)
	newer := storetest.Row(0, "w1", "acme", "/a", 12)
	newer.Version = 2
	newer.Latency = storetest.Latency(7, 1)
	newer.Latency.Reset()
	other := storetest.Row(1, "w1", "acme", "/a", 7)
	for _, batch := range [][]store.Rollup{{old}, {newer, other}} {
		if err := s.WriteRollups(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	from, to := storetest.T0, storetest.T0.Add(time.Hour)
	got, err := s.History(ctx, "acme", from, to)
	if err != nil {
		t.Fatal(err)
	}
	storetest.CheckHistory(t, got, storetest.ExpectHistory([]store.Rollup{old, newer, other}, "acme", from, to))
	if len(got) != 2 || got[0].Count != 12 || got[0].Latency.Len() != 0 || got[1].Latency.Len() != 0 {
		t.Fatalf("history %+v", got)
	}
}

// rowColumn is a driver.BatchColumn over a bare column, as a batch's is.
type rowColumn struct{ column.Interface }

func (c rowColumn) Append(v any) error { _, err := c.Interface.Append(v); return err }

// TestAppendArray checks that an Array column decoded from its wire form
// holds what appending row by row holds, on both paths of appendArray.
func TestAppendArray(t *testing.T) {
	ends := []int{0, 2, 2, 5, 6}
	idx := flatArray[uint16]{ends, []uint16{3, 700, 0, 255, 256, histogram.NumBuckets - 1}}
	cnt := flatArray[uint64]{ends, []uint64{1, 1 << 40, 7, 300, 2, 9}}
	newCol := func(typ column.Type) column.Interface {
		col, err := typ.Column("x", &column.ServerContext{})
		if err != nil {
			t.Fatal(err)
		}
		return col
	}
	check := func(typ column.Type, c any, rows func(i int) any) {
		fast, slow := newCol(typ), newCol(typ)
		if err := appendColumn(rowColumn{fast}, fast, c); err != nil { // decoded
			t.Fatal(err)
		}
		if err := appendColumn(rowColumn{slow}, nil, c); err != nil { // row by row
			t.Fatal(err)
		}
		if fast.Rows() != len(ends) || slow.Rows() != len(ends) {
			t.Fatalf("%s: rows %d and %d, want %d", typ, fast.Rows(), slow.Rows(), len(ends))
		}
		for i := range ends {
			want := rows(i)
			if got := fast.Row(i, false); !reflect.DeepEqual(got, want) {
				t.Errorf("%s row %d decoded: %v, want %v", typ, i, got, want)
			}
			if got := slow.Row(i, false); !reflect.DeepEqual(got, want) {
				t.Errorf("%s row %d row by row: %v, want %v", typ, i, got, want)
			}
		}
	}
	start := func(i int) int {
		if i == 0 {
			return 0
		}
		return ends[i-1]
	}
	check("Array(UInt16)", idx, func(i int) any { return idx.vals[start(i):ends[i]:ends[i]] })
	check("Array(UInt64)", cnt, func(i int) any { return cnt.vals[start(i):ends[i]:ends[i]] })
}

// BenchmarkReads: one tenant's day and the cost report's Usage over
// storetest.BenchHistory (200 tenants × 2 days, written first, untimed),
// its closed hours summed (SumHours on a clock past the margin, as a
// collector's write 30 s later would, instead of waiting).
func BenchmarkReads(b *testing.B) {
	s, _, _ := openTest(b)
	storetest.FillBench(b, s)
	s.cfg.now = func() time.Time { return time.Now().Add(sumMargin + time.Second) }
	if _, err := s.SumHours(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	storetest.BenchReads(b, s)
}
