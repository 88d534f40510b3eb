package pgactivity

import (
	"context"
	"testing"
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
