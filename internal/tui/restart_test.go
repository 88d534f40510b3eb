package tui

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/internal/collector"
)

// serveCollector starts a demo collector on addr ("127.0.0.1:0" for any
// port) and returns its address and its stop.
func serveCollector(t *testing.T, addr, dir string) (string, func()) {
	t.Helper()
	srv, err := collector.New(collector.Config{Store: collector.StoreNone, DataDir: dir, Demo: true, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv.Run(ctx)
	hs := &http.Server{Handler: srv.Handler()}
	go hs.Serve(ln)
	return ln.Addr().String(), func() {
		hs.Close()
		cancel()
		srv.Shutdown(context.Background())
	}
}

// TestReconnectAfterCollectorRestart: qtop's source follows a real
// collector, the collector stops and comes back on the same address, and
// the source, retried as the UI retries it (nextBackoff), hands out its
// snapshots again. The time from the new collector's listen to the first
// snapshot is logged (a wall-clock figure, not asserted): it is bounded
// by maxBackoff plus a connect.
func TestReconnectAfterCollectorRestart(t *testing.T) {
	dir := t.TempDir()
	addr, stop := serveCollector(t, "127.0.0.1:0", filepath.Join(dir, "a"))
	src, err := NewCollector(addr, "")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	q := Query{Measure: api.MeasureRU, Top: 5}
	if _, err := src.Next(ctx, q); err != nil {
		t.Fatal(err)
	}
	stop()
	var backoff time.Duration
	for { // the stream ends: Next says so
		if _, err := src.Next(ctx, q); err != nil {
			if ctx.Err() != nil {
				t.Fatal(err)
			}
			break
		}
	}
	// Down for a few retries, as the UI would make them.
	for range 3 {
		backoff = nextBackoff(backoff)
		<-time.After(backoff)
		if _, err := src.Next(ctx, q); err == nil {
			t.Fatal("a snapshot from a stopped collector")
		}
	}
	_, stop = serveCollector(t, addr, filepath.Join(dir, "b"))
	defer stop()
	back := time.Now()
	for {
		backoff = nextBackoff(backoff)
		if backoff > maxBackoff {
			t.Fatalf("backoff %v over its cap", backoff)
		}
		<-time.After(backoff)
		s, err := src.Next(ctx, q)
		if err == nil {
			t.Logf("following the restarted collector %v after it listened again (uptime %v)", time.Since(back).Round(time.Millisecond), s.Collector.Uptime)
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("no snapshot from the restarted collector: %v", err)
		}
	}
}
