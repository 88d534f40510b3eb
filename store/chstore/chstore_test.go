package chstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/store/storetest"
	"github.com/qtop-dev/qtop/tenant"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/ClickHouse/clickhouse-go/v2.(*clickhouse).startAutoCloseIdleConnections"))
}

var dbSeq atomic.Int64

// testDB returns a fresh database name, dropped when the test ends.
func testDB(t testing.TB, addr string) string {
	t.Helper()
	name := fmt.Sprintf("qtop_chstore_test_%d_%d", os.Getpid(), dbSeq.Add(1))
	t.Cleanup(func() {
		conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}})
		if err != nil {
			return
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name)
	})
	return name
}

func testsvcClickHouse(t testing.TB) string { return testsvc.ClickHouse(t) }

func openTest(t testing.TB, opts ...Option) (*Store, string, string) {
	t.Helper()
	addr := testsvc.ClickHouse(t)
	db := testDB(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := Open(ctx, addr, db, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, addr, db
}

var m0 = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

func TestSmoke(t *testing.T) {
	s, _, _ := openTest(t)
	ctx := context.Background()
	rows := []store.Rollup{
		{Minute: m0, Writer: "w1", Version: 1, Service: "api", Tenant: "acme", Route: "GET /", Tier: tenant.T1, Kind: store.KindRequest, Count: 10, Errors: 1, DurationSeconds: 2, RU: 30, Bytes: 100},
		{Minute: m0, Writer: "w1", Version: 1, Tenant: "acme", Route: "GET /", Kind: store.KindPG, ActiveSessionSeconds: 12},
	}
	if err := s.WriteRollups(ctx, rows); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteRollups(ctx, rows); err != nil {
		t.Fatal(err)
	}
	u, err := s.Usage(ctx, m0, m0.Add(time.Hour), false)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", u)
	h, err := s.History(ctx, "acme", m0, m0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", h)
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, _, _ := openTest(t)
		return s
	})
}

func TestMetricsAndRetentionWarning(t *testing.T) {
	reg := prometheus.NewRegistry()
	var logs strings.Builder
	s, _, _ := openTest(t, WithRegisterer(reg), WithRetention(30*24*time.Hour),
		WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if !FeaturesOf(s.Schema().Version).TTL && !strings.Contains(logs.String(), "no TTL") {
		t.Errorf("retention on a server without TTL was not warned about:\n%s", logs.String())
	}
	if err := s.WriteRollups(context.Background(), []store.Rollup{storetest.Row(0, "w", "a", "/", 1), storetest.Row(1, "w", "a", "/", 1)}); err != nil {
		t.Fatal(err)
	}
	if got := storetest.Counter(t, reg, "qtop_collector_store_rows_written_total", TableRollups); got != 2 {
		t.Fatalf("rows written = %v, want 2", got)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatal(problems, err)
	}
}

// TestReadOutageIsUnavailable: a read that fails for an outage (here a
// deadline: a shard whose replicas are all down fails alike, code 279) is
// store.ErrUnavailable, so that the collector answers 503 with
// Retry-After, not 500.
func TestReadOutageIsUnavailable(t *testing.T) {
	s, _, _ := openTest(t)
	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel()
	if _, err := s.Usage(ctx, m0, m0.Add(time.Hour), false); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Usage: %v, want store.ErrUnavailable", err)
	}
	if _, err := s.History(ctx, "acme", m0, m0.Add(time.Hour)); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("History: %v, want store.ErrUnavailable", err)
	}
}
