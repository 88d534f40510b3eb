package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// refuses is a store that answers Ping but refuses every rollup batch of
// tenant "poison" with an error that is not ErrInvalid, as DuckDB does
// with "NOT NULL constraint failed".
type refuses struct{ *memStore }

func (r refuses) WriteRollups(ctx context.Context, rows []Rollup) error {
	for _, row := range rows {
		if row.Tenant == "poison" {
			return errors.New("duckdb: Constraint Error: NOT NULL constraint failed")
		}
	}
	return r.memStore.WriteRollups(ctx, rows)
}

// A poison batch at the head of the spool goes to a dead-letter file after
// DeadLetterAfter refusals, and the batches behind it are written.
func TestSpoolPoisonBatchDeadLettered(t *testing.T) {
	mem := newMemStore()
	f := &fixture{mem: mem}
	dir := t.TempDir()
	sp, err := NewSpool(refuses{mem}, dir, func(c *spoolConfig) { c.manual = true }, WithCloseTimeout(0))
	if err != nil {
		t.Fatal(err)
	}
	f.sp = sp
	defer sp.Close()
	ctx := context.Background()
	mem.down.Store(true)
	sp.WriteRollups(ctx, batchOf("poison", 2))
	sp.WriteRollups(ctx, batchOf("good", 3))
	mem.down.Store(false)
	for i := range DeadLetterAfter {
		err := sp.Flush(ctx)
		if i < DeadLetterAfter-1 && err == nil {
			t.Fatalf("flush %d: poison batch written?", i)
		}
		if i == DeadLetterAfter-1 && err != nil {
			t.Fatalf("flush %d: %v (the poison batch still blocks the queue)", i, err)
		}
	}
	if got := mem.counts()["good"]; got != 3 {
		t.Fatalf("good rows written %v, want 3 (all counts %v)", got, mem.counts())
	}
	st := sp.Stats()
	if st.DeadLetters != 1 || st.PendingRows != 0 {
		t.Fatalf("stats %+v, want 1 dead letter, nothing pending", st)
	}
	names, _ := filepath.Glob(filepath.Join(dir, "*"+DeadLetterSuffix))
	if len(names) != 1 {
		t.Fatalf("dead-letter files %v, want 1", names)
	}
	b, err := os.ReadFile(names[0])
	if err != nil {
		t.Fatal(err)
	}
	bt, err := decodeBatch(b)
	if err != nil || len(bt.rollups) != 2 || bt.rollups[0].Tenant != "poison" {
		t.Fatalf("dead-letter file does not hold the poison batch: %v %+v", err, bt)
	}
}

// A store that is down is not a poison batch: nothing is dead-lettered
// while Ping fails.
func TestSpoolDownIsNotPoison(t *testing.T) {
	f := newFixture(t, t.TempDir())
	defer f.sp.Close()
	ctx := context.Background()
	f.mem.down.Store(true)
	f.sp.WriteRollups(ctx, batchOf("a", 2))
	for range 2 * DeadLetterAfter {
		if f.sp.Flush(ctx) == nil {
			t.Fatal("flush succeeded with the store down")
		}
	}
	if st := f.sp.Stats(); st.DeadLetters != 0 || st.PendingRows != 2 || st.Oldest.IsZero() {
		t.Fatalf("stats %+v, want 2 rows pending, no dead letter", st)
	}
}

func TestValidateRefusesInvalidUTF8(t *testing.T) {
	r := batchOf("a", 1)
	r[0].Service = "api\xff"
	if err := ValidateRollups(r); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "UTF-8") {
		t.Fatalf("rollup: %v", err)
	}
	if err := ValidateHotKeys([]HotKey{{Minute: t0, Key: "k\xff", Count: 1}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("hot key: %v", err)
	}
	if err := ValidateAudit([]Audit{{Time: t0, Who: "\xfe", Action: "add"}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("audit: %v", err)
	}
}
