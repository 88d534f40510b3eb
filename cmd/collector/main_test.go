package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/internal/collector"
	"github.com/qtop-dev/qtop/meter"
	wire "github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/tenant"
)

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"help"}, {"serve", "--help"}, {"report", "--help"}, {"help", "report"}} {
		var out, errb bytes.Buffer
		code := run(args, &out, &errb)
		text := out.String() + errb.String()
		if code != 0 || !strings.Contains(text, "Example") {
			t.Errorf("%v: exit %d, want 0 and examples:\n%s", args, code, text)
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"serve", "--help"}, &out, &errb); code != 0 {
		t.Fatal(code)
	}
	for _, env := range []string{"QTOP_LISTEN", "QTOP_STORE", "QTOP_CLUSTER", "QTOP_POSTGRES", "QTOP_TOKEN", "QTOP_DEMO", "QTOP_DATA_DIR"} {
		if !strings.Contains(errb.String(), "$"+env) {
			t.Errorf("serve --help does not name %s", env)
		}
	}
}

func TestBadArguments(t *testing.T) {
	cases := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"frobnicate"}, nil, "unknown command"},
		{[]string{"serve", "--grace", "soon"}, nil, "--grace"},
		{[]string{"serve", "--refusal-delay", "-1s"}, nil, "--refusal-delay"},
		{[]string{"serve", "--pprof", "0.0.0.0:6060"}, nil, "loopback address only"},
		{[]string{"serve", "--pprof", "6060"}, nil, "want host:port"},
		{[]string{"serve", "--log-format", "xml"}, nil, "log format"},
		{[]string{"serve"}, map[string]string{"QTOP_DEMO": "maybe"}, "QTOP_DEMO"},
		{[]string{"report", "--measure", "vibes"}, nil, "measure"},
		{[]string{"report", "--from", "yesterday-ish"}, nil, "time"},
		{[]string{"report", "--format", "xlsx"}, nil, "format"},
		{[]string{"report", "--by", "route"}, nil, "by"},
		{[]string{"report", "--collector", "127.0.0.1:1", "--store", "bogus://x"}, nil, "--store and --collector: give one"},
		{[]string{"audit", "--from", "foo"}, nil, "collector audit: --from: time"},
		{[]string{"audit", "--from", "2h", "--to", "3h"}, nil, "is not before --to"},
	}
	for _, c := range cases {
		for k, v := range c.env {
			t.Setenv(k, v)
		}
		var out, errb bytes.Buffer
		if code := run(c.args, &out, &errb); code != 2 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 mentioning %q", c.args, code, errb.String(), c.want)
		}
	}
}

func TestEnvironmentSetsFlags(t *testing.T) {
	t.Setenv("QTOP_LISTEN", "not-an-address")
	t.Setenv("QTOP_STORE", "none")
	t.Setenv("QTOP_DATA_DIR", t.TempDir())
	var out, errb bytes.Buffer
	// The listen address from the environment reaches the server, which
	// refuses it.
	if code := run([]string{"serve"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "not-an-address") {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
}

func TestReportCommand(t *testing.T) {
	dir := t.TempDir()
	storeURL := "duckdb://" + filepath.Join(dir, "q.duckdb")
	at := time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)
	now := at
	s, err := collector.New(collector.Config{Store: storeURL, DataDir: filepath.Join(dir, "data"), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	consume(t, s, &now,
		meter.Record{Tags: tenant.Tags{Tenant: "acme", Route: "GET /x"}, Kind: wire.KindRequest, RU: 30},
		meter.Record{Tags: tenant.Tags{Tenant: "bigcorp", Route: "POST /import"}, Kind: wire.KindJob, RU: 70},
		meter.Record{Kind: wire.KindRequest, RU: 5})
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := run([]string{"report", "--store", storeURL, "--from", "2026-02-01", "--to", "2026-03-05",
		"--by", "tenant,route", "--cost", "1050", "--format", "csv"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	// 32 days: long enough for a progress bar, but stderr is not a
	// terminal here, so it stays empty.
	if errb.Len() != 0 {
		t.Fatalf("stderr not empty without a terminal: %q", errb.String())
	}
	want := []string{"bigcorp,POST /import,1,0,0.000,70.000,0,0.666667,700.00", "acme,GET /x,1,0,0.000,30.000,0,0.285714,300.00", "(unattributed),,1,0,0.000,5.000,0,0.047619,50.00"}
	for _, w := range want {
		if !strings.Contains(out.String(), w) {
			t.Fatalf("csv lacks %q:\n%s", w, out.String())
		}
	}
}

// TestParseBytes: size flags take the units their help writes sizes in
// (a trial's --disk-reserve 64MiB was refused as not a number).
func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "268435456": 268435456, "256MiB": 256 << 20, "64 mib": 64 << 20,
		"1TB": 1e12, "2GiB": 2 << 30, "512KB": 512e3, "10B": 10, " 7 ": 7} {
		if got, err := parseBytes("x", in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "1.5GiB", "1x", "MiB", "9223372036854775807KiB", "1e9"} {
		if _, err := parseBytes("x", in); err == nil || !strings.Contains(err.Error(), "--x") {
			t.Errorf("parseBytes(%q) = %v, want an error naming the flag", in, err)
		}
	}
}
