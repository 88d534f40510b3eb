package duckstore

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/store/storetest"
)

// TestLoadEqualsWrites: a history loaded with Load answers Usage (ranges
// of every shape, by tenant and by route) and History as the same rows
// written through WriteRollups do, and holds the same rows.
func TestLoadEqualsWrites(t *testing.T) {
	ctx := context.Background()
	h := storetest.History{Tenants: 30, From: storetest.T0.Truncate(24 * time.Hour).Add(-7 * time.Hour),
		Minutes: 1440 + 9*60 + 17, Active: 0.2, Seed: 3}
	written, err := Open(filepath.Join(t.TempDir(), "w.duckdb"), func(c *config) { c.compactRows = 512 })
	if err != nil {
		t.Fatal(err)
	}
	defer written.Close()
	if err := h.Generate(2000, func(rows []store.Rollup) error { return written.WriteRollups(ctx, rows) }); err != nil {
		t.Fatal(err)
	}
	loaded, err := Open(filepath.Join(t.TempDir(), "l.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	defer loaded.Close()
	fill := func(add func([]store.Rollup) error) error { return h.Generate(3000, add) }
	if err := loaded.Load(ctx, fill); err != nil {
		t.Fatal(err)
	}
	if err := loaded.Load(ctx, fill); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("a second load: %v, want ErrNotEmpty", err)
	}
	if !loaded.horizon.Equal(written.horizon) {
		t.Fatalf("horizon %v, written %v", loaded.horizon, written.horizon)
	}
	n := func(s *Store) int { return s.tableRows(t, "rollups") + s.tableRows(t, "rollups_cold") }
	if a, b := n(loaded), n(written); a != b || a < 10_000 {
		t.Fatalf("loaded %d rows, written %d", a, b)
	}
	if loaded.tableRows(t, "rollups") == 0 {
		t.Fatal("the last ten minutes are not in the hot table")
	}
	from, to := h.From, h.From.Add(time.Duration(h.Minutes)*time.Minute)
	for _, r := range [][2]time.Time{
		{from, to}, {from.Add(37 * time.Minute), to.Add(-23 * time.Minute)},
		{from.Add(7 * time.Hour), from.Add(31 * time.Hour)}, {from.Add(3 * time.Minute), from.Add(50 * time.Minute)},
		{to.Add(-15 * time.Minute), to},
	} {
		for _, byRoute := range []bool{false, true} {
			want, err := written.Usage(ctx, r[0], r[1], byRoute)
			if err != nil {
				t.Fatal(err)
			}
			got, err := loaded.Usage(ctx, r[0], r[1], byRoute)
			if err != nil {
				t.Fatal(err)
			}
			storetest.CheckUsage(t, got, want)
		}
	}
	for i := range h.Tenants {
		name := fmt.Sprintf("tenant-%05d", i)
		want, err := written.History(ctx, name, from, to)
		if err != nil {
			t.Fatal(err)
		}
		got, err := loaded.History(ctx, name, from, to)
		if err != nil {
			t.Fatal(err)
		}
		storetest.CheckHistory(t, got, want)
	}
}

// TestLoadOutOfOrder: a batch that does not come after the previous one
// is refused.
func TestLoadOutOfOrder(t *testing.T) {
	s, err := Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.Load(context.Background(), func(add func([]store.Rollup) error) error {
		if err := add([]store.Rollup{storetest.Row(5, "w", "acme", "/", 1)}); err != nil {
			return err
		}
		return add([]store.Rollup{storetest.Row(5, "w", "zeta", "/", 1)})
	})
	if err == nil {
		t.Fatal("a batch of the same minute as the previous one was loaded")
	}
}
