package chstore

import (
	"context"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/qtop-dev/qtop/internal/testsvc"
)

// Work for one replica of each shard (erasure, retention, per-shard
// migrations) goes to the next replica when the first is down, and fails,
// naming every replica, when none answers. Before, it went to the first
// replica only: `collector erase` and retention failed with "connection
// refused" while one replica of a shard was down.
func TestOnFirstAnsweringFailsOver(t *testing.T) {
	addr := testsvc.ClickHouse(t)
	dial := func(a string) (driver.Conn, error) {
		return clickhouse.Open(&clickhouse.Options{Addr: []string{a}, DialTimeout: 2 * time.Second})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var ran int
	fn := func(conn driver.Conn) error { ran++; return conn.Exec(ctx, "SELECT 1") }
	if err := onFirstAnswering(ctx, []string{"127.0.0.1:1", addr}, dial, fn); err != nil || ran != 1 {
		t.Fatalf("first replica down: %v, ran %d times, want once on the second", err, ran)
	}
	ran = 0
	if err := onFirstAnswering(ctx, []string{"127.0.0.1:1", "127.0.0.1:2"}, dial, fn); err == nil || ran != 0 {
		t.Fatalf("every replica down: %v, ran %d", err, ran)
	}
}
