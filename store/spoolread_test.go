package store

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"
)

// readableMem is a memStore whose reads answer while its writes fail (as
// a replicated ClickHouse table without ZooKeeper: read-only): Usage sums
// what it holds.
type readableMem struct{ *memStore }

func (r readableMem) Usage(context.Context, time.Time, time.Time, bool) ([]Usage, error) {
	var u Usage
	u.Tenant = "a"
	for _, n := range r.counts() {
		u.Requests += n
	}
	return []Usage{u}, nil
}

func (r readableMem) History(context.Context, string, time.Time, time.Time) ([]Rollup, error) {
	return nil, nil
}

// A read over minutes that wait in the spool fails with ErrSpooled while
// the store cannot take them, instead of sums that leave them out (a
// cost report that under-counts without saying so); a range without
// spooled minutes reads as before; once the store takes writes again the
// read replays the spool first and counts every row. Before, Usage read the
// store alone: 3 requests of 5.
func TestSpoolReadsDoNotLeaveSpooledRowsOut(t *testing.T) {
	mem := newMemStore()
	st := readableMem{mem}
	dir := t.TempDir()
	sp, err := NewSpool(st, dir, func(c *spoolConfig) { c.manual = true }, WithCloseTimeout(0))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := sp.WriteRollups(ctx, batchOf("a", 3)); err != nil { // minutes 0–2, stored
		t.Fatal(err)
	}
	mem.down.Store(true)
	late := batchOf("a", 5)[3:] // minutes 3–4, spooled
	if err := sp.WriteRollups(ctx, late); err != nil {
		t.Fatal(err)
	}
	if _, err := sp.Usage(ctx, t0, t0.Add(time.Hour), false); !errors.Is(err, ErrSpooled) {
		t.Fatalf("usage with minutes spooled: %v, want ErrSpooled", err)
	}
	if _, err := sp.History(ctx, "a", t0, t0.Add(time.Hour)); !errors.Is(err, ErrSpooled) {
		t.Fatalf("history with minutes spooled: %v, want ErrSpooled", err)
	}
	if u, err := sp.Usage(ctx, t0, t0.Add(3*time.Minute), false); err != nil || u[0].Requests != 3 {
		t.Fatalf("usage of minutes 0–2 (none spooled): %+v, %v", u, err)
	}
	// Another process opens the spool: the minutes of a file found at
	// start are not known, so every range waits for it.
	sp.Close()
	sp, err = NewSpool(st, dir, func(c *spoolConfig) { c.manual = true }, WithCloseTimeout(0))
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	if _, err := sp.Usage(ctx, t0, t0.Add(3*time.Minute), false); !errors.Is(err, ErrSpooled) {
		t.Fatalf("usage with a spool file of unknown minutes: %v, want ErrSpooled", err)
	}
	mem.down.Store(false)
	u, err := sp.Usage(ctx, t0, t0.Add(time.Hour), false)
	if err != nil || u[0].Requests != 5 {
		t.Fatalf("usage once the store is back: %+v, %v: want 5 requests", u, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("spool not drained: %v", ents)
	}
}
