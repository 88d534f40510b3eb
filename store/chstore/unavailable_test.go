package chstore

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/store/storetest"
)

// shardDown is the store's connection with every insert failing as a
// Distributed insert does when all replicas of one shard are down (the
// server's own error, code 279), while queries — Ping among them — answer.
// It is installed before the spool starts (whose replays read the store's
// connection on its own goroutine) and the shard comes back by clearing
// down.
type shardDown struct {
	driver.Conn
	err  error
	down *atomic.Bool
}

func (c shardDown) PrepareBatch(ctx context.Context, q string, opts ...driver.PrepareBatchOption) (driver.Batch, error) {
	if c.down.Load() {
		return nil, c.err
	}
	return c.Conn.PrepareBatch(ctx, q, opts...)
}

// A shard down (every replica) is an outage of part of the cluster, not a
// poison batch: the node the spool pings answers, yet the spooled batch
// must wait, never go to a dead-letter file, and be written once the shard
// is back. Before, three failed replays moved the minute's rows aside: the
// reports of that minute were acknowledged and never stored.
func TestShardDownIsNotPoison(t *testing.T) {
	s, _, _ := openTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The server's own answer when no replica of a shard can be reached.
	err := s.conn.Exec(ctx, "SELECT * FROM remote('127.0.0.1:1', system.one)")
	if err == nil {
		t.Fatal("remote() on a closed port answered")
	}
	if !errors.Is(classify(err), store.ErrUnavailable) {
		t.Fatalf("%v: not classified unavailable", err)
	}
	down := new(atomic.Bool)
	down.Store(true)
	s.conn = shardDown{Conn: s.conn, err: err, down: down}
	sp, err := store.NewSpool(s, t.TempDir(), store.WithRetry(time.Hour, time.Hour), store.WithCloseTimeout(0))
	if err != nil {
		t.Fatal(err)
	}
	rows := []store.Rollup{storetest.Row(0, "w", "acme", "/r", 7)}
	if err := sp.WriteRollups(ctx, rows); err != nil {
		t.Fatal(err)
	}
	for range 3 * store.DeadLetterAfter {
		if sp.Flush(ctx) == nil {
			t.Fatal("flush succeeded with the shard down")
		}
	}
	if st := sp.Stats(); st.DeadLetters != 0 || st.PendingRows != 1 {
		t.Fatalf("stats %+v: want the row pending, no dead letter", st)
	}
	down.Store(false) // the shard is back
	if err := sp.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	u, err := s.Usage(ctx, storetest.Row(0, "w", "acme", "/r", 7).Minute, storetest.Row(2, "w", "acme", "/r", 7).Minute, false)
	if err != nil || len(u) != 1 || u[0].Requests != 7 {
		t.Fatalf("usage %+v, %v: want acme's 7 requests", u, err)
	}
	sp.Close()
}

// A batch the server refuses for what it is (here a table that takes no
// inserts) stays a poison batch: classify leaves it as it is.
func TestClassifyKeepsRefusals(t *testing.T) {
	s, _, _ := openTest(t)
	err := s.conn.Exec(context.Background(), "INSERT INTO system.one (dummy) VALUES (1)")
	if err == nil {
		t.Fatal("insert into system.one succeeded")
	}
	if errors.Is(classify(err), store.ErrUnavailable) {
		t.Fatalf("%v: classified unavailable", err)
	}
}
