package collector

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/qtop-dev/qtop/meter"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/tenant"
)

// lockedBuffer collects log lines from several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}

// smallDisk mounts a tmpfs of size MiB on a fresh directory (root only),
// unmounted at the end of the test.
func smallDisk(t *testing.T, mib int) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%dm", mib), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root): %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	return dir
}

// fill writes zeros to path until free bytes are left on its disk (or
// the disk is full when free is 0).
func fill(t *testing.T, path string, free int64) {
	t.Helper()
	fh, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	chunk := make([]byte, 64<<10)
	for {
		now, err := freeBytes(filepath.Dir(path))
		if err != nil {
			t.Fatal(err)
		}
		n := min(now-free, int64(len(chunk)))
		if n <= 0 {
			return
		}
		if _, err := fh.Write(chunk[:n]); err != nil {
			if errors.Is(err, syscall.ENOSPC) && free == 0 {
				return
			}
			t.Fatal(err)
		}
	}
}

// bigReport is one process's report of one request for each of 200
// tenants (~10 KB).
func bigReport(t *testing.T, clk *clock, i int) []byte {
	t.Helper()
	rec, err := meter.NewRecorder(meter.WithSource(report.Source{Service: "api", Instance: fmt.Sprint("p", i), Host: "h"}),
		meter.WithClock(clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	for j := range 200 {
		rec.Record(meter.Record{Tags: tenant.Tags{Tenant: fmt.Sprint("tenant-", j), Route: fmt.Sprint("GET /r", i%7), Tier: tenant.T2},
			Kind: report.KindRequest, Duration: time.Millisecond, RU: 1})
	}
	b, err := rec.Cut(clk.Now()).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readyz(h http.Handler) (int, string) {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	b, _ := io.ReadAll(w.Body)
	return w.Code, string(b)
}

// TestFullDisk runs a collector on a 30 MiB tmpfs with a 4 MiB reserve
// and the store down (so closed minutes go to the on-disk spool):
// reports are refused with 503 before the disk fills, /readyz says why,
// the state change is logged once; with the disk then filled to the
// brim a closed minute cannot be spooled, and is once space is back;
// reports are taken again without a restart, and the store ends with
// exactly the acknowledged requests, none lost or doubled.
func TestFullDisk(t *testing.T) {
	disk := smallDisk(t, 30)
	logs := &lockedBuffer{}
	f := &fixture{t: t, clk: &clock{t: t0}, mem: newMemStore(), dir: filepath.Join(disk, "data")}
	f.mem.fail = errors.New("store down")
	f.start(func(c *Config) {
		c.DiskReserve = 4 << 20
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	defer f.stop()
	h := f.s.Handler()
	ctx := context.Background()

	fill(t, filepath.Join(disk, "filler"), 4<<20+600<<10)
	acked, refused, i := 0, 0, 0
	for ; refused < 50; i++ {
		w := postReport(h, bigReport(t, f.clk, i))
		switch w.Code {
		case http.StatusOK:
			acked++
		case http.StatusServiceUnavailable:
			// A reply a reporter reads and logs (its message), not only
			// text (before, meter logged "answered 503: " and nothing).
			if rep, err := report.DecodeReply(w.Body.Bytes()); err != nil || !strings.Contains(rep.Message, "reserve") || w.Header().Get("Retry-After") == "" {
				t.Fatalf("refused with %q (Retry-After %q), want a reply naming the reserve", w.Body.String(), w.Header().Get("Retry-After"))
			}
			refused++
		default:
			t.Fatalf("report %d: %d %s", i, w.Code, w.Body.String())
		}
		if i%10 == 0 {
			f.s.Tick(ctx, f.clk.Now())
		}
	}
	free, _ := freeBytes(disk)
	if acked == 0 || free < 3<<20 {
		t.Fatalf("%d acknowledged, %d bytes free when refusing: want some, and the reserve nearly whole", acked, free)
	}
	if code, why := readyz(h); code != http.StatusServiceUnavailable || !strings.Contains(why, "reserve") {
		t.Fatalf("/readyz %d %s", code, why)
	}
	if got := testutil.ToFloat64(f.s.disk.degradedG); got != 1 {
		t.Fatalf("qtop_collector_disk_degraded %v", got)
	}
	if got := testutil.ToFloat64(f.s.met.rejected.WithLabelValues(reasonDisk)); got != float64(refused) {
		t.Fatalf(`qtop_collector_reports_rejected_total{reason="disk"} %v, want the %d refused`, got, refused)
	}

	// The minute closes while the disk is full to the brim: it cannot be
	// spooled, and is tried again every tick, logged once.
	fill(t, filepath.Join(disk, "filler2"), 0)
	for range 5 {
		f.s.Tick(ctx, f.clk.Add(time.Minute))
	}
	if n := logs.count("minute not written"); n != 1 {
		t.Fatalf("%d 'minute not written' lines, want 1:\n%s", n, logs.b.String())
	}

	// Space comes back: reports are taken again, the minute is spooled.
	os.Remove(filepath.Join(disk, "filler2"))
	os.Remove(filepath.Join(disk, "filler"))
	f.s.Tick(ctx, f.clk.Add(time.Second))
	if code, why := readyz(h); code != http.StatusOK {
		t.Fatalf("/readyz after space came back: %d %s", code, why)
	}
	for k := range 5 {
		if w := postReport(h, bigReport(t, f.clk, i+k)); w.Code != http.StatusOK {
			t.Fatalf("report after space came back: %d %s", w.Code, w.Body.String())
		}
		acked++
	}
	// The store comes back; every minute is written and the spool drained.
	f.mem.mu.Lock()
	f.mem.fail = nil
	f.mem.mu.Unlock()
	f.s.Tick(ctx, f.clk.Add(2*time.Minute))
	fctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := f.s.em.spool.Flush(fctx); err != nil {
		t.Fatal(err)
	}
	if got, want := f.mem.sum("", "request", count), float64(acked*200); got != want {
		t.Fatalf("store holds %v requests, %d acknowledged", got, int(want))
	}
	if n := logs.count("report not logged"); n != 0 {
		t.Errorf("%d reports failed at the write-ahead log: the reserve did not hold", n)
	}
	for _, line := range []string{"free space below the reserve", "lower --disk-reserve", "free space above the reserve again"} {
		if n := logs.count(line); n != 1 {
			t.Errorf("%q logged %d times, want once", line, n)
		}
	}
	t.Logf("%d reports acknowledged, %d refused for disk, %d bytes free when refusing", acked, refused, free)
}
