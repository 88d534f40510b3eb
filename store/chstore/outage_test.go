package chstore

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/store/storetest"
)

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// TestSpoolAcrossOutage stops a real ClickHouse in the middle of a run of
// writes through the spool, restarts it, and proves every row arrives once:
// nothing lost, nothing doubled (writes in flight when the server went down
// may be committed and replayed too; reads still count them once). The
// server is a private one (testsvc.StartPrivateClickHouse), so stopping it
// does not disturb the other packages' tests that share the main server.
func TestSpoolAcrossOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("stops and restarts ClickHouse")
	}
	ch := testsvc.StartPrivateClickHouse(t)
	ctx0, cancel0 := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel0()
	s, err := Open(ctx0, ch.Addr(), "qtop_outage")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
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
	restart := func() {
		restartOnce.Do(func() {
			if err := ch.Restart(); err != nil {
				t.Error(err)
			}
		})
	}

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
	// The writes go on every 10 ms while ClickHouse goes down and while
	// it comes back, however long that takes.
	pace := time.NewTicker(10 * time.Millisecond)
	defer pace.Stop()
	down := make(chan struct{})
	go func() { defer close(down); ch.Stop() }()
	defer func() { <-down }()
	for ; ; i++ { // keep writing while it goes down
		write(i)
		select {
		case <-down:
		case <-pace.C:
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
		case <-pace.C:
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
