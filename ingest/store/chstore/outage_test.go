package chstore

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/ingest/store"
	"github.com/qtop-dev/qtop/ingest/store/storetest"
)

// moduleRoot finds the directory of go.mod above the test's directory.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test directory")
		}
		dir = parent
	}
}

// services runs scripts/services; it reports failure with Errorf so it can
// run from a deferred restart.
func services(t *testing.T, script string, args ...string) bool {
	t.Helper()
	out, err := exec.Command(script, args...).CombinedOutput()
	if err != nil {
		t.Errorf("scripts/services %v: %v\n%s", args, err, out)
		return false
	}
	t.Logf("scripts/services %v: %s", args, out)
	return true
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// TestSpoolAcrossOutage stops the real ClickHouse in the middle of a run of
// writes through the spool, restarts it, and proves every row arrives once:
// nothing lost, nothing doubled (writes in flight when the server went down
// may be committed and replayed too; reads still count them once).
func TestSpoolAcrossOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("stops and restarts ClickHouse")
	}
	script := filepath.Join(moduleRoot(t), "scripts", "services")
	// Other packages' tests may use the same server at the same time (go
	// test runs packages in parallel). Tests that take the shared lock on
	// this file are not interrupted: the outage waits for them, and they
	// wait for the outage.
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "qtop-clickhouse.lock"), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)

	s, _, _ := openTest(t)
	reg := prometheus.NewRegistry()
	sp, err := store.NewSpool(s, t.TempDir(),
		store.WithRegisterer(reg),
		store.WithLogger(slog.New(slog.NewTextHandler(testWriter{t}, nil))),
		store.WithRetry(100*time.Millisecond, time.Second),
		store.WithWriteTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var restartOnce sync.Once
	restart := func() { restartOnce.Do(func() { services(t, script, "up", "clickhouse") }) }
	defer restart() // whatever happens, leave the server running, before the lock goes

	var written []store.Rollup
	write := func(i int) {
		batch := make([]store.Rollup, 0, 60)
		for k := range 40 {
			batch = append(batch, storetest.Row(i, fmt.Sprintf("w%d", k%2), fmt.Sprintf("t%02d", k), "/r", uint64(i*40+k+1)))
		}
		if i > 0 { // a late report re-emits the previous minute with a new version
			for k := range 20 {
				r := storetest.Row(i-1, fmt.Sprintf("w%d", k%2), fmt.Sprintf("t%02d", k), "/r", uint64(7*i+k))
				r.Version = 2
				batch = append(batch, r)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := sp.WriteRollups(ctx, batch); err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		written = append(written, batch...)
	}

	i := 0
	for ; i < 15; i++ {
		write(i)
	}
	down := make(chan struct{})
	go func() { defer close(down); services(t, script, "down", "clickhouse") }()
	defer func() { <-down }()
	for ; ; i++ { // keep writing while it goes down
		write(i)
		select {
		case <-down:
		default:
			time.Sleep(10 * time.Millisecond)
			continue
		}
		break
	}
	for end := i + 15; i < end; i++ { // and while it is down
		write(i)
	}
	if rows, _ := sp.Pending(); rows == 0 {
		t.Fatal("nothing was spooled while ClickHouse was down")
	}
	up := make(chan struct{})
	go func() { defer close(up); restart() }()
	for ; ; i++ { // and while it comes back
		write(i)
		select {
		case <-up:
		default:
			time.Sleep(10 * time.Millisecond)
			continue
		}
		break
	}
	for end := i + 15; i < end; i++ {
		write(i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := sp.Flush(ctx); err != nil {
		t.Fatalf("flush after the restart: %v", err)
	}
	st := sp.Stats()
	if st.PendingRows != 0 || st.DroppedRows != 0 {
		t.Fatalf("after the flush %+v: want nothing pending and nothing dropped", st)
	}
	t.Logf("%d batches, %d rows written across the outage", i, len(written))

	from, to := storetest.T0, storetest.T0.Add(24*time.Hour)
	for _, byRoute := range []bool{false, true} {
		u, err := sp.Usage(ctx, from, to, byRoute)
		if err != nil {
			t.Fatal(err)
		}
		storetest.CheckUsage(t, u, storetest.ExpectUsage(written, from, to, byRoute))
	}
	for _, name := range []string{"t00", "t19", "t39"} {
		h, err := sp.History(ctx, name, from, to)
		if err != nil {
			t.Fatal(err)
		}
		storetest.CheckHistory(t, h, storetest.ExpectHistory(written, name, from, to))
	}
	if err := sp.Close(); err != nil {
		t.Fatal(err)
	}
}
