package duckstore

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/qtop-dev/qtop/histogram"
	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := Open(filepath.Join(t.TempDir(), "qtop.duckdb"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestConformanceInMemory(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := Open(":memory:")
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestMemoryLimit: WithMemoryLimit is DuckDB's memory_limit; a size DuckDB
// does not take fails Open.
func TestMemoryLimit(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "qtop.duckdb"), WithMemoryLimit("300MiB"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var got string
	if err := s.db.QueryRow("SELECT current_setting('memory_limit')").Scan(&got); err != nil || got != "300.0 MiB" {
		t.Errorf("memory_limit %q, %v; want 300.0 MiB", got, err)
	}
	if s, err := Open(":memory:", WithMemoryLimit("lots")); err == nil {
		s.Close()
		t.Error("memory_limit lots was taken")
	}
}

// TestConformanceCold runs the suite with rows moved to the cold table
// three at a time, so most rows the suite reads, retries and replaces
// late are cold ones.
func TestConformanceCold(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := Open(filepath.Join(t.TempDir(), "qtop.duckdb"), func(c *config) { c.compactRows = 3 })
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestReopenKeepsDataAndMigratesOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.duckdb")
	ctx := context.Background()
	s, err := Open(path, func(c *config) { c.maxMigration = 1 })
	if err != nil {
		t.Fatal(err)
	}
	old := storetest.Row(0, "w1", "acme", "/", 10)
	if err := s.WriteHotKeys(ctx, []store.HotKey{{Minute: storetest.T0, Writer: "w", Key: "k", Count: 1}}); err != nil {
		t.Fatal(err)
	}
	// Written at schema version 1, before active_session_seconds existed.
	if _, err := s.db.Exec(`INSERT INTO rollups (minute, writer, version, service, tenant, route, tier, kind, count, errors,
    duration_seconds, ru, bytes, "rows") VALUES (?, 'w1', 1, 'api', 'acme', '/', 3, 'request', 10, 1, 0.1, 15, 1000, 30)`, old.Minute); err != nil {
		t.Fatal(err)
	}
	s.Close()

	for range 2 { // the second open finds nothing to do
		s, err = Open(path)
		if err != nil {
			t.Fatal(err)
		}
		var n int
		if err := s.db.QueryRow("SELECT count(*) FROM schema_migrations").Scan(&n); err != nil || n != len(migrations) {
			t.Fatalf("migrations recorded = %d, %v; want %d", n, err, len(migrations))
		}
		pg := store.Rollup{Minute: storetest.T0, Writer: "w1", Tenant: "acme", Kind: store.KindPG, ActiveSessionSeconds: 30}
		if err := s.WriteRollups(ctx, []store.Rollup{pg}); err != nil {
			t.Fatal(err)
		}
		u, err := s.Usage(ctx, storetest.T0, storetest.T0.Add(time.Hour), false)
		if err != nil {
			t.Fatal(err)
		}
		storetest.CheckUsage(t, u, storetest.ExpectUsage([]store.Rollup{old, pg}, storetest.T0, storetest.T0.Add(time.Hour), false))
		s.Close()
	}
}

func TestOpenBadPath(t *testing.T) {
	_, err := Open(filepath.Join(t.TempDir(), "missing-dir", "x", "q.duckdb"))
	if err == nil {
		t.Fatal("Open in a missing directory succeeded")
	}
}

func TestCorruptLatencyReported(t *testing.T) {
	s, err := Open(":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.db.Exec(`INSERT INTO rollups VALUES (?, 'w', 1, '', 'acme', '/', 0, 'request', 1, 0, 0, 0, 0, 0, '\xFF\xFF\xFF'::BLOB, 0, md5_number_upper('acme'))`, storetest.T0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.History(context.Background(), "acme", storetest.T0, storetest.T0.Add(time.Hour)); err == nil {
		t.Fatal("a corrupt latency blob was read without an error")
	}
	if err := s.Close(); err != nil || !errors.Is(s.Close(), store.ErrClosed) {
		t.Fatal("Close twice")
	}
}

func FuzzAddLatency(f *testing.F) {
	l := storetest.Latency(3, 7, histogram.NumBuckets-1, 1)
	f.Add(encodeLatency(&l))
	f.Add([]byte{0xff})
	f.Add([]byte{5, 0, 5, 1}) // a zero count, the same bucket twice
	f.Fuzz(func(t *testing.T, b []byte) {
		var lat histogram.Sparse
		if err := addLatency(&lat, b); err != nil {
			return
		}
		enc := encodeLatency(&lat)
		if (enc == nil) != (lat.Len() == 0) {
			t.Fatalf("%d buckets encoded as %x", lat.Len(), enc)
		}
		var again histogram.Sparse
		if err := addLatency(&again, enc); err != nil || !again.Equal(&lat) {
			t.Fatalf("re-read: %v, %v, want %v", err, storetest.Pairs(&again), storetest.Pairs(&lat))
		}
	})
}

// The blob a histogram is stored as is the one written before rollups
// held a ratio.Sparse (pairs of uvarints, increasing), so existing
// databases read the same.
func TestLatencyBlobFormat(t *testing.T) {
	l := storetest.Latency(3, 7, 300, 1, histogram.NumBuckets-1, 200)
	want := []byte{3, 7, 0xac, 0x02, 1, 0x81, 0x09, 0xc8, 0x01}
	if got := encodeLatency(&l); !bytes.Equal(got, want) {
		t.Fatalf("encoded %x, want %x", got, want)
	}
	if empty := (histogram.Sparse{}); encodeLatency(&empty) != nil {
		t.Fatal("an empty histogram is not NULL")
	}
}
