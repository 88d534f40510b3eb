package store

import (
	"context"
	"fmt"
	"testing"
)

// partlyDown answers Ping but refuses every rollup batch with
// ErrUnavailable, as a ClickHouse cluster does when one shard's replicas
// are all down or ZooKeeper is gone while the node pinged is up.
type partlyDown struct {
	*memStore
	down bool
}

func (p *partlyDown) WriteRollups(ctx context.Context, rows []Rollup) error {
	if p.down {
		return fmt.Errorf("chstore: write rollups: code: 279, All connection tries failed: %w", ErrUnavailable)
	}
	return p.memStore.WriteRollups(ctx, rows)
}

// An unavailable part of the store is an outage, not a poison batch: the
// batch stays spooled however often it fails while Ping answers, and is
// written once the store takes it again.
func TestSpoolUnavailableIsNotPoison(t *testing.T) {
	mem := newMemStore()
	st := &partlyDown{memStore: mem, down: true}
	sp, err := NewSpool(st, t.TempDir(), func(c *spoolConfig) { c.manual = true }, WithCloseTimeout(0))
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	ctx := context.Background()
	if err := sp.WriteRollups(ctx, batchOf("a", 2)); err != nil {
		t.Fatal(err)
	}
	for range 3 * DeadLetterAfter {
		if sp.Flush(ctx) == nil {
			t.Fatal("flush succeeded with a shard down")
		}
	}
	if s := sp.Stats(); s.DeadLetters != 0 || s.PendingRows != 2 {
		t.Fatalf("stats %+v, want 2 rows pending, no dead letter", s)
	}
	st.down = false
	if err := sp.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := mem.counts()["a"]; got != 2 {
		t.Fatalf("rows written %v, want 2", got)
	}
}
