package ingest

import (
	"encoding/binary"
	"errors"
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
