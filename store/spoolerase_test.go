package store

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestEraseSpooled spools batches of two tenants while the store is down,
// erases one from the folder, and replays: only the other tenant's rows
// reach the store, a batch of the erased tenant alone is gone, the audit
// batch is kept, and a corrupt file is reported, not touched.
func TestEraseSpooled(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t, dir)
	ctx := context.Background()
	f.mem.down.Store(true)
	mixed := append(batchOf("acme", 3), batchOf("beta", 2)...)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(f.sp.WriteRollups(ctx, mixed))
	must(f.sp.WriteRollups(ctx, batchOf("acme", 4))) // acme alone: the file goes
	must(f.sp.WriteHotKeys(ctx, []HotKey{
		{Minute: t0, Writer: "w1", Key: "acme:cart", Tenant: "acme", Count: 9, Err: 1},
		{Minute: t0, Writer: "w1", Key: "beta:cart", Tenant: "beta", Count: 7},
	}))
	must(f.sp.WriteStatements(ctx, []Statement{
		{Time: t0, Writer: "w1", PID: 1, Tenant: "acme", Query: "SELECT 1"},
		{Time: t0, Writer: "w1", PID: 2, Tenant: "beta", Query: "SELECT 2"},
	}))
	must(f.sp.WriteAudit(ctx, []Audit{{Time: t0, Who: "admin", Action: "add", PolicyVersion: 1, Rule: `{"tenant":"acme"}`}}))
	f.sp.Close() // the spool is closed while erasing (the data dir lock)
	corrupt := filepath.Join(dir, "00000000000000000099.spool.corrupt")
	must(os.WriteFile(corrupt, []byte("junk"), 0o600))
	before, _ := os.ReadDir(dir)

	got, err := EraseSpooled(dir, "acme")
	must(err)
	if want := (Erased{Rollups: 7, HotKeys: 1, Statements: 1}); got.Erased != want {
		t.Errorf("erased %+v, want %+v", got.Erased, want)
	}
	if got.Files != 4 || !slices.Equal(got.Undecodable, []string{corrupt}) {
		t.Errorf("files %d, undecodable %v; want 4 and the corrupt file", got.Files, got.Undecodable)
	}
	after, _ := os.ReadDir(dir)
	if len(after) != len(before)-1 {
		t.Errorf("%d files after, %d before: want the acme-only batch removed", len(after), len(before))
	}
	again, err := EraseSpooled(dir, "acme")
	must(err)
	if again.Total() != 0 || again.Files != 0 {
		t.Errorf("a second erasure found %+v", again)
	}

	mem := newMemStore()
	g := newFixtureOn(t, mem, dir)
	defer g.sp.Close()
	must(g.sp.Flush(ctx))
	if c := mem.counts(); c["acme"] != 0 || c["beta"] != 2 {
		t.Errorf("replayed counts %v, want beta=2 and no acme", c)
	}
	if len(mem.hot) != 1 || len(mem.stmts) != 1 || mem.stmts[0].Tenant != "beta" || len(mem.audit) != 1 {
		t.Errorf("replayed %d hot keys, statements %+v, %d audit rows; want beta's and the audit", len(mem.hot), mem.stmts, len(mem.audit))
	}
	for _, h := range mem.hot {
		if h.Tenant != "beta" {
			t.Errorf("replayed hot key %+v", h)
		}
	}
	if got, err := EraseSpooled(filepath.Join(dir, "missing"), "acme"); err != nil || got.Total() != 0 {
		t.Errorf("missing dir: %+v, %v", got, err)
	}
}

// TestEraseSpooledDeadLetters: a dead-letter file is erased like a
// spooled batch.
func TestEraseSpooledDeadLetters(t *testing.T) {
	dir := t.TempDir()
	data, err := encodeBatch(&batch{kind: kindRollups, rollups: append(batchOf("acme", 2), batchOf("beta", 1)...)})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "00000000000000000007.spool"+DeadLetterSuffix)
	if err := WriteFileAtomic(path, data); err != nil {
		t.Fatal(err)
	}
	got, err := EraseSpooled(dir, "acme")
	if err != nil || got.Rollups != 2 || got.Files != 1 {
		t.Fatalf("erased %+v (%v), want 2 rollups from 1 file", got, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	left, err := decodeBatch(b)
	if err != nil || len(left.rollups) != 1 || left.rollups[0].Tenant != "beta" {
		t.Fatalf("dead letter after erasure: %+v (%v)", left, err)
	}
}

// retainMem is a memStore that can remove old rows.
type retainMem struct {
	*memStore
	before time.Time
}

func (r *retainMem) Retain(_ context.Context, before time.Time) (RetainResult, error) {
	r.before = before
	return RetainResult{Rows: 3}, nil
}

// TestSpoolRetainPassesOn: the Spool passes Retain on to its store, and
// says so when that store cannot.
func TestSpoolRetainPassesOn(t *testing.T) {
	rm := &retainMem{memStore: newMemStore()}
	f := newFixtureOn(t, rm.memStore, t.TempDir())
	defer f.sp.Close()
	f.sp.next = rm
	got, err := f.sp.Retain(context.Background(), t0)
	if err != nil || got.Rows != 3 || !rm.before.Equal(t0) {
		t.Fatalf("Retain = %+v, %v (store saw %v)", got, err, rm.before)
	}
	f.sp.next = rm.memStore
	if _, err := f.sp.Retain(context.Background(), t0); err == nil || !strings.Contains(err.Error(), "cannot remove old rows") {
		t.Fatalf("Retain over a store without it: %v", err)
	}
}
