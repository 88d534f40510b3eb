package store_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/qtop-dev/qtop/store"
)

// flaky is a Store that is down until it is told otherwise.
type flaky struct {
	store.Store
	up   atomic.Bool
	rows atomic.Int64
}

func (f *flaky) WriteRollups(_ context.Context, rows []store.Rollup) error {
	if !f.up.Load() {
		return errors.New("connection refused")
	}
	f.rows.Add(int64(len(rows)))
	return nil
}

func (f *flaky) Ping(context.Context) error {
	if !f.up.Load() {
		return errors.New("connection refused")
	}
	return nil
}

func (f *flaky) Close() error { return nil }

func ExampleSpool() {
	dir, _ := os.MkdirTemp("", "spool")
	defer os.RemoveAll(dir)

	next := &flaky{}
	sp, _ := store.NewSpool(next, dir, store.WithRetry(time.Hour, time.Hour))
	defer sp.Close()

	minute := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	rows := []store.Rollup{{Minute: minute, Writer: "c1", Version: 1, Tenant: "acme", Route: "GET /", Kind: store.KindRequest, Count: 10}}
	err := sp.WriteRollups(context.Background(), rows) // the store is down: spooled, not lost
	pending, _ := sp.Pending()
	fmt.Println("write:", err, "pending rows:", pending)

	next.up.Store(true)
	err = sp.Flush(context.Background())
	pending, _ = sp.Pending()
	fmt.Println("flush:", err, "pending rows:", pending, "stored rows:", next.rows.Load())
	// Output:
	// write: <nil> pending rows: 1
	// flush: <nil> pending rows: 0 stored rows: 1
}

func ExampleParseURL() {
	u, _ := store.ParseURL("clickhouse://127.0.0.1:9000/qtop")
	fmt.Println(u.Scheme, u.Addr, u.Database)
	u, _ = store.ParseURL("duckdb://qtop.duckdb")
	fmt.Println(u.Scheme, u.Path)
	// Output:
	// clickhouse 127.0.0.1:9000 qtop
	// duckdb qtop.duckdb
}
