package report

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

// rowBomb is a body of about a hundred bytes whose rows (all alike)
// decompress to n rows.
func rowBomb(t testing.TB, n int) []byte {
	t.Helper()
	r := &Report{Source: Source{Service: "s", Instance: "i"}, Start: time.Unix(1e9, 0), End: time.Unix(1e9+1, 0)}
	r.Rows = make([]Row, n)
	for i := range r.Rows {
		r.Rows[i] = Row{Tenant: "t", Route: "r", Kind: KindRequest}
	}
	b, err := r.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A body of ~100 bytes claiming 16,384 rows used to allocate ~150 MB; now
// it is refused having allocated no more than DecodeBudget of its size.
func TestDecodeMemoryFollowsBytesReceived(t *testing.T) {
	b := rowBomb(t, MaxRows)
	if len(b) > 1000 {
		t.Fatalf("bomb of %d bytes; want a small one", len(b))
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := Decode(b)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "bytes received") {
		t.Fatalf("got %v, want ErrTooLarge naming the bytes received", err)
	}
	if grew, budget := after.TotalAlloc-before.TotalAlloc, uint64(DecodeBudget(b)); grew > budget+1<<20 {
		t.Fatalf("decoding %d bytes allocated %d, budget %d", len(b), grew, budget)
	}
	// Within the expansion bound, rows still cannot outnumber the bytes.
	if _, err := Decode(rowBomb(t, 2000)); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "rows in a body of") {
		t.Fatalf("2000 rows in a small body: %v", err)
	}
	// A report with as many rows as bytes, less the slack, still decodes.
	if _, err := Decode(rowBomb(t, 64)); err != nil {
		t.Fatalf("64 rows: %v", err)
	}
}

// A header that claims far more than the body can expand to is refused
// before anything is allocated for it.
func TestClaimedLengthNotAllocated(t *testing.T) {
	enc, _ := zstd.NewWriter(nil)
	z := enc.EncodeAll([]byte("tiny"), nil)
	enc.Close()
	b := append([]byte("qtrp"), 0, 2, codecZstd, 0)
	b = binary.AppendUvarint(b, MaxDecodedBytes)
	b = append(b, z...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := Decode(b)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v, want ErrTooLarge", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Fatalf("a %d-byte body claiming %d bytes allocated %d", len(b), MaxDecodedBytes, grew)
	}
}

// Decoding runs on several decoders at once (no shared decoder to queue
// on): every goroutine decodes, and the race detector sees no sharing.
func TestParallelDecode(t *testing.T) {
	b := rowBomb(t, 32)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				if _, err := Decode(b); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func BenchmarkDecodeBomb(b *testing.B) {
	body := rowBomb(b, MaxRows)
	b.ReportAllocs()
	for b.Loop() {
		Decode(body)
	}
}

// TestDecodedLatencyCostsItsBuckets: what a decoded 100-row report keeps
// for its rows' latencies grows with their non-empty buckets, 8 bytes each
// and a fixed index per row, in the same number of allocations — not a
// dense histogram of ratio.NumBuckets counts per row (9 KiB each, 930 KB
// for these 100 rows, when rows decoded into ratio.Histogram).
func TestDecodedLatencyCostsItsBuckets(t *testing.T) {
	const rows = 100
	body := func(buckets int) []byte {
		r := &Report{Source: Source{Service: "s", Instance: "i"}, Start: time.Unix(1e9, 0), End: time.Unix(1e9+1, 0)}
		for i := range rows {
			row := Row{Tenant: fmt.Sprintf("tenant-%03d", i), Route: "GET /", Kind: KindRequest}
			for k := range buckets {
				row.Latency.Add(3+7*k, uint64(1+k))
				row.Count += uint64(1 + k)
			}
			r.Rows = append(r.Rows, row)
		}
		b, err := r.marshalUncompressed() // no decompressed copy: only what the report keeps
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	kept := func(b []byte) (perReport uint64, allocs float64) {
		decode := func() {
			r, err := Decode(b)
			if err != nil || len(r.Rows) != rows {
				t.Fatal(err)
			}
		}
		allocs = testing.AllocsPerRun(10, decode)
		const n = 20
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range n {
			decode()
		}
		runtime.ReadMemStats(&after)
		return (after.TotalAlloc - before.TotalAlloc) / n, allocs
	}
	b1, a1 := kept(body(1))
	b50, a50 := kept(body(50))
	t.Logf("100 rows: %d bytes in %v allocations with 1 bucket each, %d bytes in %v with 50", b1, a1, b50, a50)
	// One bucket a row: the rows, their indexes and counts, the strings.
	if limit := uint64(rows*(RowBytes+8+16) + 8<<10); b1 > limit {
		t.Errorf("1 bucket a row: %d bytes, want at most %d", b1, limit)
	}
	// 49 more buckets a row: 8 bytes each (and the allocator's rounding).
	if more, counts := b50-b1, uint64(rows*49*8); b50 < b1 || more < counts || more > counts*5/4 {
		t.Errorf("49 more buckets in each of %d rows cost %d bytes, want %d to %d", rows, int64(b50)-int64(b1), counts, counts*5/4)
	}
	// Per row: its tenant string, its latency's index and its counts.
	if a50 != a1 || a1 > 3*rows+16 {
		t.Errorf("%v allocations with 1 bucket a row, %v with 50: want the same, at most 3 a row", a1, a50)
	}
}

// Decoding into a reused report (rows with other latencies, then fewer
// rows) gives every row exactly the buckets a new report gets, and a
// report decoded before does not change.
func TestDecodeReuseKeepsRowsApart(t *testing.T) {
	mk := func(n, shift int) []byte {
		r := &Report{Source: Source{Service: "s", Instance: "i"}, Start: time.Unix(1e9, 0), End: time.Unix(1e9+1, 0)}
		for i := range n {
			row := Row{Tenant: fmt.Sprintf("t%d", i), Kind: KindRequest, Count: uint64(i + 1)}
			for k := range i + 1 {
				row.Latency.Observe(1e-5 * float64(1+k*k*k+shift))
			}
			r.Rows = append(r.Rows, row)
		}
		b, err := r.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	into := new(Report)
	for _, body := range [][]byte{mk(50, 0), mk(50, 900), mk(20, 40), mk(50, 7)} {
		want, err := Decode(body)
		if err != nil {
			t.Fatal(err)
		}
		if err := into.UnmarshalBinary(body); err != nil {
			t.Fatal(err)
		}
		sameReport(t, want, into)
		for i := range into.Rows {
			if got := into.Rows[i].Latency.Count(); got != uint64(i+1) {
				t.Fatalf("row %d: %d observations, want %d", i, got, i+1)
			}
		}
	}
}

func BenchmarkUnmarshal100Rows(b *testing.B) {
	r := &Report{Source: Source{Service: "s", Instance: "i"}, Start: time.Unix(1e9, 0), End: time.Unix(1e9+1, 0)}
	for i := range 100 {
		row := Row{Tenant: fmt.Sprintf("tenant-%d", i), Kind: KindRequest, Count: 10}
		for k := range 10 {
			row.Latency.Observe(0.005 * float64(1+k))
		}
		r.Rows = append(r.Rows, row)
	}
	body, _ := r.MarshalBinary()
	into := new(Report)
	b.ReportAllocs()
	for b.Loop() {
		into.UnmarshalBinary(body)
	}
}

// A reused report decodes its string table in one allocation, however
// many strings it holds (the source's three strings are one each), and
// the strings of a report decoded before stay as they were when the
// table's memory is reused for the next.
func TestDecodeIntoStringsAllocOnce(t *testing.T) {
	mk := func(prefix string) []byte {
		r := &Report{Source: Source{Service: "s", Instance: "i", Host: "h"}, Start: time.Unix(1e9, 0), End: time.Unix(1e9+1, 0)}
		for i := range 100 {
			row := Row{Tenant: fmt.Sprintf("%s-tenant-%d", prefix, i), Route: fmt.Sprintf("/r/%d", i%7), Kind: KindRequest, Count: 1}
			row.Latency.Observe(0.01)
			r.Rows = append(r.Rows, row)
		}
		b, err := r.marshalUncompressed() // no decompression buffer, which a sync.Pool keeps
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a, b := mk("a"), mk("b")
	first, err := Decode(a)
	if err != nil {
		t.Fatal(err)
	}
	into := new(Report)
	if err := into.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if allocs := testing.AllocsPerRun(100, func() {
		if err := into.UnmarshalBinary(b); err != nil {
			t.Fatal(err)
		}
	}); allocs > 4.5 {
		t.Errorf("%v allocations per decode of 100 rows into a reused report, want 4 (source service, instance, host, the table)", allocs)
	}
	// Tables other decodes left behind (TestParallelDecode's, say) are not
	// gone round one by one, each grown in turn: the table just used is
	// the one taken next.
	var left []*stringTable
	for range 8 {
		left = append(left, takeStringTable())
	}
	for _, t := range left {
		t.release()
	}
	if allocs := testing.AllocsPerRun(5, func() {
		if err := into.UnmarshalBinary(b); err != nil {
			t.Fatal(err)
		}
	}); allocs > 4 {
		t.Errorf("%v allocations per decode with 8 small tables left behind, want 4", allocs)
	}
	again, err := Decode(a)
	if err != nil {
		t.Fatal(err)
	}
	sameReport(t, again, first)
	if first.Rows[99].Tenant != "a-tenant-99" || into.Rows[99].Tenant != "b-tenant-99" {
		t.Fatalf("tenants %q and %q", first.Rows[99].Tenant, into.Rows[99].Tenant)
	}
}
