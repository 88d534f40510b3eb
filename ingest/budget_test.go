package ingest

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
	_, err := DecodeReport(b)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "bytes received") {
		t.Fatalf("got %v, want ErrTooLarge naming the bytes received", err)
	}
	if grew, budget := after.TotalAlloc-before.TotalAlloc, uint64(DecodeBudget(b)); grew > budget+1<<20 {
		t.Fatalf("decoding %d bytes allocated %d, budget %d", len(b), grew, budget)
	}
	// Within the expansion bound, rows still cannot outnumber the bytes.
	if _, err := DecodeReport(rowBomb(t, 2000)); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "rows in a body of") {
		t.Fatalf("2000 rows in a small body: %v", err)
	}
	// A report with as many rows as bytes, less the slack, still decodes.
	if _, err := DecodeReport(rowBomb(t, 64)); err != nil {
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
	_, err := DecodeReport(b)
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
				if _, err := DecodeReport(b); err != nil {
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
		DecodeReport(body)
	}
}

// UnmarshalSparse gives every row's buckets exactly as UnmarshalBinary
// does, without filling the dense histograms.
func TestUnmarshalSparseSameBuckets(t *testing.T) {
	r := &Report{Source: Source{Service: "s", Instance: "i"}, Start: time.Unix(1e9, 0), End: time.Unix(1e9+1, 0)}
	for i := range 50 {
		row := Row{Tenant: "t" + string(rune('a'+i%26)) + string(rune('a'+i/26)), Kind: KindRequest, Count: uint64(i + 1)}
		for k := range i + 1 {
			row.Latency.Observe(1e-5 * float64(1+k*k*k))
		}
		r.Rows = append(r.Rows, row)
	}
	b, err := r.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	dense, sp := new(Report), new(Report)
	if err := dense.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second time into a reused report
		if err := sp.UnmarshalSparse(b); err != nil {
			t.Fatal(err)
		}
		for i := range dense.Rows {
			if sp.Rows[i].Latency.Count() != 0 {
				t.Fatalf("row %d: dense histogram filled", i)
			}
			var want, got [][2]uint64
			dense.Rows[i].Latency.Buckets(func(k int, c uint64) { want = append(want, [2]uint64{uint64(k), c}) })
			sp.LatencyBuckets(i, func(k int, c uint64) { got = append(got, [2]uint64{uint64(k), c}) })
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("row %d: buckets %v, want %v", i, got, want)
			}
		}
	}
	// A dense decode after a sparse one into the same report is whole.
	if err := sp.UnmarshalBinary(b); err != nil || sp.Rows[49].Latency.Count() != 50 {
		t.Fatalf("dense after sparse: %v, count %d", err, sp.Rows[49].Latency.Count())
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
	for _, mode := range []string{"dense", "sparse"} {
		b.Run(mode, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if mode == "dense" {
					into.UnmarshalBinary(body)
				} else {
					into.UnmarshalSparse(body)
				}
			}
		})
	}
}
