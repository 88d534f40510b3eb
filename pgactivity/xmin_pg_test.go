package pgactivity

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestXminHoldersByXidAndSnapshot: a READ COMMITTED session that wrote
// and sits idle in its transaction holds no snapshot (backend_xmin is
// null) but its xid holds the horizon back; SERIALIZABLE and REPEATABLE
// READ sessions hold their snapshots. The sampler counts all three.
func TestXminHoldersByXidAndSnapshot(t *testing.T) {
	pool := newPool(t, "", "")
	ctx := context.Background()
	setups := map[string][]string{
		"read committed, xid owner": {"BEGIN", "SELECT pg_current_xact_id()"},
		"serializable":              {"BEGIN ISOLATION LEVEL SERIALIZABLE", "SELECT count(*) FROM pg_class"},
		"repeatable read":           {"BEGIN ISOLATION LEVEL REPEATABLE READ", "SELECT count(*) FROM pg_class"},
	}
	pids := map[int32]string{}
	for name, stmts := range setups {
		s := connect(t)
		for _, q := range stmts {
			if _, err := s.conn.Exec(ctx, q); err != nil {
				t.Fatalf("%s: %s: %v", name, q, err)
			}
		}
		pids[s.pid] = name
	}
	snap := waitFor(t, NewSampler(pool), "the three sessions idle in transaction", func(x Snapshot) bool {
		for pid := range pids {
			if b, ok := byPID(x, pid); !ok || b.State != StateIdleInTransaction {
				return false
			}
		}
		return true
	})
	for pid, name := range pids {
		if b, _ := byPID(snap, pid); b.XminAge < 0 {
			t.Errorf("%s (pid %d): xmin age %d, want the horizon it holds", name, pid, b.XminAge)
		}
	}
}

// TestLockWaitModeAndRelation: a session waiting for a table another
// holds in ACCESS EXCLUSIVE mode says which lock it asks for, on which
// relation.
func TestLockWaitModeAndRelation(t *testing.T) {
	pool := newPool(t, "", "")
	ctx := context.Background()
	table := fmt.Sprintf("qtop_lockwait_%d", time.Now().UnixNano())
	if _, err := pool.Exec(ctx, "CREATE TABLE "+table+" (n int)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+table) })
	holder, waiter := connect(t), connect(t)
	for _, q := range []string{"BEGIN", "LOCK TABLE " + table + " IN ACCESS EXCLUSIVE MODE"} {
		if _, err := holder.conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	waiter.start(ctx, "SELECT count(*) FROM "+table)
	snap := waitFor(t, NewSampler(pool), "the waiter", func(x Snapshot) bool {
		b, ok := byPID(x, waiter.pid)
		return ok && b.WaitEventType == "Lock"
	})
	b, _ := byPID(snap, waiter.pid)
	if b.LockWait != "AccessShareLock on "+table {
		t.Fatalf("lock wait %q", b.LockWait)
	}
	if h, _ := byPID(snap, holder.pid); h.LockWait != "" {
		t.Fatalf("the holder waits for %q", h.LockWait)
	}
	if _, err := holder.conn.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	if err := waiter.wait(t); err != nil {
		t.Fatal(err)
	}
}
