package collector

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// A collector given no store keeps DuckDB in its data dir; one whose
// history is still in the working directory, where the default was
// before, keeps reading it there and says how to move it.
func TestDefaultStoreURL(t *testing.T) {
	t.Chdir(t.TempDir())
	if u, legacy := DefaultStoreURL("data"); u != "duckdb://data/qtop.duckdb" || legacy {
		t.Fatalf("no file anywhere: %q, %v; want DuckDB in the data dir", u, legacy)
	}
	abs := t.TempDir()
	if u, _ := DefaultStoreURL(abs); u != "duckdb://"+filepath.Join(abs, DefaultStoreFile) {
		t.Fatalf("absolute data dir: %q", u)
	}
	if err := os.WriteFile(DefaultStoreFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if u, legacy := DefaultStoreURL("data"); u != "duckdb://qtop.duckdb" || !legacy {
		t.Fatalf("history in the working directory: %q, %v; want that file, legacy", u, legacy)
	}
	if err := os.Mkdir("data", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("data", DefaultStoreFile), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if u, legacy := DefaultStoreURL("data"); u != "duckdb://data/qtop.duckdb" || legacy {
		t.Fatalf("moved to the data dir: %q, %v; want the data dir's", u, legacy)
	}
}

func TestNewStoresInDataDirByDefault(t *testing.T) {
	t.Chdir(t.TempDir())
	dir := filepath.Join(t.TempDir(), "data")
	var logs bytes.Buffer
	s, err := New(Config{DataDir: dir, Writer: "w1", Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, DefaultStoreFile)); err != nil {
		t.Fatalf("no DuckDB file in the data dir: %v", err)
	}
	if _, err := os.Stat(DefaultStoreFile); err == nil {
		t.Fatal("a DuckDB file was made in the working directory")
	}
	if strings.Contains(logs.String(), "working directory") {
		t.Fatalf("a note on the old default with no old file:\n%s", logs.String())
	}

	// The old default's file in the working directory: read there, and said.
	if err := os.Rename(filepath.Join(dir, DefaultStoreFile), DefaultStoreFile); err != nil {
		t.Fatal(err)
	}
	logs.Reset()
	s, err = New(Config{DataDir: dir, Writer: "w1", Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "the history stays in qtop.duckdb in the working directory") || !strings.Contains(logs.String(), "move_to="+filepath.Join(dir, DefaultStoreFile)) {
		t.Fatalf("no note on where the history is:\n%s", logs.String())
	}
	if _, err := os.Stat(filepath.Join(dir, DefaultStoreFile)); err == nil {
		t.Fatal("a new, empty store was made in the data dir beside the old one")
	}
}
