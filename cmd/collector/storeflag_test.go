package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/internal/collector"
	"github.com/qtop-dev/qtop/meter"
	wire "github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/tenant"
)

// Without --store, serve keeps DuckDB in --data-dir, and report, audit
// and erase read it there; where --data-dir has none they say what to
// pass instead of making an empty store.
func TestStoreDefaultsToDataDir(t *testing.T) {
	t.Setenv("QTOP_STORE", "")
	t.Setenv("QTOP_DATA_DIR", "")
	t.Chdir(t.TempDir())
	dataDir := filepath.Join(t.TempDir(), "data")
	now := time.Now().UTC().Add(-time.Hour)
	s, err := collector.New(collector.Config{DataDir: dataDir, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	consume(t, s, &now, meter.Record{Tags: tenant.Tags{Tenant: "acme", Route: "GET /x"}, Kind: wire.KindRequest, RU: 30})
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	var out, errb bytes.Buffer
	if code := run([]string{"report", "--data-dir", dataDir, "--from", "2h", "--format", "csv"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "acme,") {
		t.Fatalf("report from --data-dir's store: exit %d: %s%s", code, out.String(), errb.String())
	}

	empty := t.TempDir()
	for _, args := range [][]string{
		{"report", "--data-dir", empty},
		{"audit", "--data-dir", empty},
		{"erase", "--tenant", "acme", "--data-dir", empty, "--yes"},
	} {
		out.Reset()
		errb.Reset()
		code := run(args, &out, &errb)
		if code == 0 || !strings.Contains(errb.String(), "no store at "+filepath.Join(empty, collector.DefaultStoreFile)) || !strings.Contains(errb.String(), "--store") {
			t.Errorf("%s with no store in --data-dir: exit %d: %s", args[0], code, errb.String())
		}
		if _, err := os.Stat(filepath.Join(empty, collector.DefaultStoreFile)); err == nil {
			t.Errorf("%s made an empty store", args[0])
		}
	}

	// The old default, qtop.duckdb in the working directory, is still read, with a note.
	if err := os.Rename(filepath.Join(dataDir, collector.DefaultStoreFile), collector.DefaultStoreFile); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errb.Reset()
	if code := run([]string{"report", "--data-dir", empty, "--from", "2h", "--format", "csv"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "acme,") || !strings.Contains(errb.String(), "where collectors kept it before") {
		t.Fatalf("report from the working directory's store: exit %d: %s%s", code, out.String(), errb.String())
	}
}
