package collector

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/tenant"
)

// TestRetentionRuns runs the retention on fake time over a DuckDB file:
// at start it deletes the rows older than the retention and keeps the
// newer ones; an hour later it deletes those that aged past it meanwhile;
// the metrics and the log say so.
func TestRetentionRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "qtop.duckdb")
		st, err := OpenStore(context.Background(), "duckdb://"+path, Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		now := time.Now().UTC() // the bubble's: 2000-01-01
		ages := []time.Duration{72 * time.Hour, 25 * time.Hour, 23*time.Hour + 30*time.Minute, time.Hour, 0}
		var rows []store.Rollup
		for _, a := range ages {
			rows = append(rows, store.Rollup{Minute: now.Add(-a).Truncate(time.Minute), Writer: "w1", Version: 1, Service: "api",
				Tenant: "acme", Route: "/r", Tier: tenant.T2, Kind: store.KindRequest, Count: 1})
		}
		if err := st.WriteRollups(context.Background(), rows); err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewRegistry()
		var logs bytes.Buffer
		cfg := Config{StoreConfig: StoreConfig{Retention: 24 * time.Hour}, Registerer: reg, Now: time.Now,
			Logger: slog.New(slog.NewTextHandler(&logs, nil))}
		r, err := newRetention(cfg, st, st)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		r.start(ctx, &wg)
		left := func() int {
			u, err := st.Usage(context.Background(), now.Add(-100*time.Hour), now.Add(time.Hour), false)
			if err != nil || len(u) != 1 {
				t.Fatalf("usage %+v, %v", u, err)
			}
			return int(u[0].Requests)
		}

		synctest.Wait() // the run at start
		if n := left(); n != 3 {
			t.Errorf("after the run at start: %d rows, want 3 (72 h and 25 h old deleted)", n)
		}
		time.Sleep(RetainEvery) // fake time: the next run
		synctest.Wait()
		if n := left(); n != 2 {
			t.Errorf("an hour later: %d rows, want 2 (the 23.5 h old one aged past 24 h)", n)
		}
		cancel()
		wg.Wait()

		want := `
# HELP qtop_collector_store_retention_rows_removed_total Rows the retention removed from the store (deleted, or held by the partitions dropped).
# TYPE qtop_collector_store_retention_rows_removed_total counter
qtop_collector_store_retention_rows_removed_total 3
# HELP qtop_collector_store_retention_runs_total Runs of the store's retention (removing history older than --retention), by result (ok, error).
# TYPE qtop_collector_store_retention_runs_total counter
qtop_collector_store_retention_runs_total{result="error"} 0
qtop_collector_store_retention_runs_total{result="ok"} 2
`
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "qtop_collector_store_retention_rows_removed_total", "qtop_collector_store_retention_runs_total"); err != nil {
			t.Error(err)
		}
		if v := testutil.ToFloat64(r.last); v != float64(now.Add(RetainEvery).Unix()) {
			t.Errorf("last success %v, want %v", v, now.Add(RetainEvery).Unix())
		}
		if probs, err := testutil.GatherAndLint(reg); err != nil || len(probs) > 0 {
			t.Errorf("lint: %v %v", probs, err)
		}
		if !strings.Contains(logs.String(), "retention: removed") || !strings.Contains(logs.String(), "rows=2") {
			t.Errorf("log:\n%s", logs.String())
		}
	})
}

// failing is a store whose retention fails while down is set.
type failing struct {
	*memStore
	down  atomic.Bool
	mu    sync.Mutex
	calls []time.Time
}

func (f *failing) Retain(_ context.Context, before time.Time) (store.RetainResult, error) {
	f.mu.Lock()
	f.calls = append(f.calls, before)
	f.mu.Unlock()
	if f.down.Load() {
		return store.RetainResult{}, errors.New("server gone")
	}
	return store.RetainResult{Rows: 1}, nil
}

// TestRetentionRetriesSooner: a run that fails (the store unreachable at
// start) is tried again after RetainRetry, then hourly.
func TestRetentionRetriesSooner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &failing{memStore: newMemStore()}
		st.down.Store(true)
		cfg := Config{StoreConfig: StoreConfig{Retention: time.Hour}, Registerer: prometheus.NewRegistry(), Now: time.Now,
			Logger: slog.New(slog.DiscardHandler)}
		r, err := newRetention(cfg, st, st)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		r.start(ctx, &wg)
		synctest.Wait()
		st.down.Store(false)
		time.Sleep(RetainRetry + RetainEvery)
		synctest.Wait()
		cancel()
		wg.Wait()
		st.mu.Lock()
		defer st.mu.Unlock()
		want := []time.Time{start.Add(-time.Hour), start.Add(RetainRetry - time.Hour), start.Add(RetainRetry)}
		if len(st.calls) != len(want) {
			t.Fatalf("runs with before %v, want %v", st.calls, want)
		}
		for i := range want {
			if !st.calls[i].Equal(want[i]) {
				t.Fatalf("runs with before %v, want %v", st.calls, want)
			}
		}
	})
}

func TestRetentionErrorCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	var logs bytes.Buffer
	st := &failing{memStore: newMemStore()}
	st.down.Store(true)
	cfg := Config{StoreConfig: StoreConfig{Retention: time.Hour}, Registerer: reg, Now: func() time.Time { return t0 },
		Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	r, err := newRetention(cfg, st, st)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.once(context.Background()); err == nil {
		t.Fatal("no error")
	}
	if v := testutil.ToFloat64(r.runs.WithLabelValues("error")); v != 1 {
		t.Errorf("error runs %v, want 1", v)
	}
	if !strings.Contains(logs.String(), "server gone") {
		t.Errorf("log:\n%s", logs.String())
	}
}

func TestRetentionConfig(t *testing.T) {
	for _, d := range []time.Duration{-time.Hour, 30 * time.Minute} {
		if err := (StoreConfig{Retention: d}).Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("retention %v: %v, want ErrConfig", d, err)
		}
	}
	for _, d := range []time.Duration{0, time.Hour, 90 * 24 * time.Hour} {
		if err := (StoreConfig{Retention: d}).Validate(); err != nil {
			t.Errorf("retention %v: %v", d, err)
		}
	}
	// A store that cannot remove old rows is refused at start.
	mem := newMemStore()
	if _, err := newRetention(Config{StoreConfig: StoreConfig{Retention: time.Hour}, Registerer: prometheus.NewRegistry()}, mem, mem); !errors.Is(err, ErrConfig) {
		t.Errorf("memStore: %v, want ErrConfig", err)
	}
	_, err := New(Config{Store: "duckdb://unused.duckdb", DataDir: t.TempDir(), Registerer: prometheus.NewRegistry(),
		StoreConfig: StoreConfig{Retention: time.Hour}, OpenStore: func(string) (store.Store, error) { return mem, nil }})
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "cannot remove old rows") {
		t.Errorf("New with a store that cannot retain: %v", err)
	}
}
