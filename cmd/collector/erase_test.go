package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/internal/collector"
	"github.com/qtop-dev/qtop/meter"
	wire "github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/tenant"
)

func TestParseRetention(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"0": 0, "": 0, "0s": 0, "1h": time.Hour, "36h": 36 * time.Hour, "90d": 90 * 24 * time.Hour,
		"1d12h": 36 * time.Hour, "1.5d": 36 * time.Hour, "2160h": 90 * 24 * time.Hour,
	} {
		if got, err := parseRetention(in); err != nil || got != want {
			t.Errorf("parseRetention(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"30m", "59m59s", "-1h", "-2d", "ninety days", "d", "1dd", "90x"} {
		if _, err := parseRetention(in); err == nil || !strings.Contains(err.Error(), "at least 1h such") {
			t.Errorf("parseRetention(%q) = %v, want an error naming the minimum", in, err)
		}
	}
}

func TestEraseCommandRefuses(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"erase", "--yes"}, "--tenant NAME is required"},
		{[]string{"erase", "--tenant", "acme"}, "run again with --yes"},
		{[]string{"erase", "--tenant", "acme", "--yes", "--format", "xml"}, "--format"},
		{[]string{"serve", "--retention", "10m"}, "--retention"},
	} {
		var out, errb bytes.Buffer
		if code := run(c.args, &out, &errb); code != 2 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 mentioning %q", c.args, code, errb.String(), c.want)
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"erase", "--help"}, &out, &errb); code != 0 || !strings.Contains(errb.String(), "Examples:") || !strings.Contains(errb.String(), "--yes") {
		t.Errorf("erase --help: exit %d:\n%s", code, errb.String())
	}
}

// TestEraseCommand erases a tenant from a stopped collector's DuckDB
// store and data dir, refuses while the collector runs, and shows the
// erasure in collector audit.
func TestEraseCommand(t *testing.T) {
	dir := t.TempDir()
	storeURL := "duckdb://" + filepath.Join(dir, "q.duckdb")
	dataDir := filepath.Join(dir, "data")
	now := time.Now().UTC().Add(-time.Hour)
	s, err := collector.New(collector.Config{Store: storeURL, DataDir: dataDir, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	consume(t, s, &now,
		meter.Record{Tags: tenant.Tags{Tenant: "acme", Route: "GET /x"}, Kind: wire.KindRequest, RU: 30},
		meter.Record{Tags: tenant.Tags{Tenant: "beta", Route: "GET /x"}, Kind: wire.KindRequest, RU: 70})
	args := []string{"erase", "--tenant", "acme", "--store", storeURL, "--data-dir", dataDir, "--by", "dpo", "--yes"}
	var out, errb bytes.Buffer
	if code := run(args, &out, &errb); code != 1 || !strings.Contains(errb.String(), "stop it first") {
		t.Fatalf("erase while running: exit %d: %s", code, errb.String())
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errb.Reset()
	if code := run(args, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{`tenant "acme" erased`, "write-ahead log: 1 report rows", "baselines:", "store:           1 rollups", "audit:           recorded"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if code := run([]string{"audit", "--store", storeURL, "--from", "1h"}, &out, &errb); code != 0 {
		t.Fatalf("audit: exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "erase:dpo") || !strings.Contains(out.String(), "acme") || !strings.Contains(out.String(), "store 1 rollups") {
		t.Errorf("collector audit does not show the erasure:\n%s", out.String())
	}
	out.Reset()
	if code := run([]string{"report", "--store", storeURL, "--from", "3h", "--format", "csv"}, &out, &errb); code != 0 || strings.Contains(out.String(), "acme") || !strings.Contains(out.String(), "beta") {
		t.Errorf("report after erasure: exit %d\n%s", code, out.String())
	}
	if strings.Contains(errb.String(), "nothing of tenant") {
		t.Errorf("an erasure that found the tenant warned: %s", errb.String())
	}
	// A misspelt name finds nothing anywhere, and says so.
	errb.Reset()
	if code := run([]string{"erase", "--tenant", "ACME", "--store", storeURL, "--data-dir", dataDir, "--by", "dpo", "--yes"}, &out, &errb); code != 0 ||
		!strings.Contains(errb.String(), `nothing of tenant "ACME" was found anywhere (tenant names are case-sensitive)`) {
		t.Errorf("erase of a tenant that is not there: exit %d: %s", code, errb.String())
	}
}

// TestReportTenant: collector report --tenant prints that tenant's line
// alone, with its share of every tenant's total, read from the store.
func TestReportTenant(t *testing.T) {
	dir := t.TempDir()
	storeURL := "duckdb://" + filepath.Join(dir, "q.duckdb")
	now := time.Now().UTC().Add(-time.Hour)
	s, err := collector.New(collector.Config{Store: storeURL, DataDir: filepath.Join(dir, "data"), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	consume(t, s, &now,
		meter.Record{Tags: tenant.Tags{Tenant: "acme", Route: "GET /x"}, Kind: wire.KindRequest, RU: 30},
		meter.Record{Tags: tenant.Tags{Tenant: "beta", Route: "GET /x"}, Kind: wire.KindRequest, RU: 70})
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"report", "--store", storeURL, "--from", "3h", "--cost", "100", "--tenant", "beta", "--format", "csv"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	recs, err := csv.NewReader(&out).ReadAll()
	if err != nil || len(recs) != 3 || recs[1][0] != "beta" || recs[2][0] != collector.TotalLine {
		t.Fatalf("csv %v %v: want beta's line and the total", recs, err)
	}
	if line, total := strings.Join(recs[1], ","), strings.Join(recs[2], ","); !strings.Contains(line, ",0.7") || !strings.Contains(line, ",70") || !strings.Contains(total, ",70") {
		t.Errorf("beta %q, total %q: want 0.7 of the RU and 70 of the cost", line, total)
	}
	errb.Reset()
	if code := run([]string{"report", "--store", storeURL, "--tenant", "(total)"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "reserved") {
		t.Errorf("a reserved name: exit %d: %s", code, errb.String())
	}
}
