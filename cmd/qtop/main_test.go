package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/internal/collector"
	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/internal/tui"
	"github.com/qtop-dev/qtop/sqlcomment"
)

func runQtop(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

func TestHelpHasAnExampleOfEveryForm(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"help"}, {"demo", "--help"}} {
		code, out, errOut := runQtop(args...)
		text := out + errOut
		if code != 0 {
			t.Fatalf("%v: exit %d", args, code)
		}
		for _, want := range []string{"qtop demo\n", "qtop --collector http://", "qtop --postgres '", "--once --format json", "--once --format table",
			"qtop demo --once", "temporary folder", "-once", "Keys:"} {
			if !strings.Contains(text, want) {
				t.Errorf("%v: help lacks %q", args, want)
			}
		}
	}
}

func TestBadArgumentsSayWhy(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--format", "xml", "--once"}, `--format "xml": want table or json`},
		{[]string{"--sort", "size"}, `--sort "size": want ru, db, req, err or p95`},
		{[]string{"--top", "0"}, "--top 0: want 1…1000"},
		{[]string{"dmeo"}, "did you mean `qtop demo`"},
		{[]string{"--nope"}, "flag provided but not defined: -nope"},
		{[]string{"--postgres", "postgres://x@127.0.0.1/db", "--interval", "1ms"}, "--interval 1ms: want at least 100ms"},
		{[]string{"demo", "--postgres", "x"}, "flag provided but not defined: -postgres"},
	}
	for _, c := range cases {
		code, _, errOut := runQtop(c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errOut, c.want)
		}
	}
}

func TestOnceWithoutCollectorSaysHowToStartOne(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	code, out, errOut := runQtop("--collector", addr, "--once")
	if code != 1 || out != "" {
		t.Fatalf("exit %d, stdout %q", code, out)
	}
	for _, want := range []string{"no collector answers at http://" + addr, "qtop demo", "collector serve"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q: %s", want, errOut)
		}
	}
	if code, _, errOut := runQtop("--collector", "ftp://x", "--once"); code != 1 || !strings.Contains(errOut, "want http://host:port") {
		t.Errorf("bad collector URL: exit %d %q", code, errOut)
	}
}

func TestOnceFromCollector(t *testing.T) {
	srv, err := collector.New(collector.Config{Store: collector.StoreNone, DataDir: t.TempDir(), Demo: true})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv.Handler()}
	go hs.Serve(ln)
	defer hs.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv.Run(ctx)
	defer srv.Shutdown(context.Background())
	var s api.Snapshot
	testsvc.Eventually(t, 20*time.Second, "a tenant from qtop --once", func() bool {
		code, out, errOut := runQtop("--collector", ln.Addr().String(), "--once", "--format", "json", "--sort", "req", "--top", "3")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		s = api.Snapshot{}
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			t.Fatalf("not the snapshot JSON: %v\n%s", err, out)
		}
		return len(s.Tenants) > 0
	})
	if s.Measure != api.MeasureReq || len(s.Tenants) > 4 {
		t.Fatalf("measure %q, %d rows (want top 3 + other)", s.Measure, len(s.Tenants))
	}
	code, out, _ := runQtop("--collector", ln.Addr().String(), "--once")
	if code != 0 || !strings.Contains(out, "TENANT") || !strings.Contains(out, "source demo") {
		t.Fatalf("table: exit %d\n%s", code, out)
	}
}

func TestDemoOnce(t *testing.T) {
	start := time.Now()
	code, out, errOut := runQtop("demo", "--once", "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var s api.Snapshot
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatal(err)
	}
	if s.Source != api.SourceDemo || len(s.Tenants) == 0 || len(s.Services) == 0 {
		t.Fatalf("demo snapshot: source %q, %d tenants, %d services", s.Source, len(s.Tenants), len(s.Services))
	}
	t.Logf("qtop demo --once took %s", time.Since(start))
}

// TestDemoOnceRecorded: --record does not hide the demo's wait for its
// first reports from --once: the snapshot printed, and the one recorded,
// hold the fleet rather than the empty view of the demo's first instant.
func TestDemoOnceRecorded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "once.qtop")
	code, out, errOut := runQtop("demo", "--once", "--format", "json", "--record", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var s api.Snapshot
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Tenants) == 0 || len(s.Services) == 0 {
		t.Fatalf("printed: %d tenants, %d services", len(s.Tenants), len(s.Services))
	}
	r, err := tui.OpenReplay(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	last, err := r.Last()
	if err != nil || len(last.Tenants) != len(s.Tenants) {
		t.Fatalf("recorded: %d tenants (printed %d), %v", len(last.Tenants), len(s.Tenants), err)
	}
}

// TestOncePostgres: tagged pg_sleep sessions of two tenants on the real
// PostgreSQL show up grouped by tenant in qtop --postgres --once --format json.
func TestOncePostgres(t *testing.T) {
	dsn := testsvc.Postgres(t)
	var b [4]byte
	rand.Read(b[:])
	sfx := hex.EncodeToString(b[:])
	a, c := "once-a-"+sfx, "once-b-"+sfx
	for _, name := range []string{a, a, c} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		conn, err := pgx.Connect(ctx, dsn)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		q := sqlcomment.Append("SELECT pg_sleep(60)", map[string]string{sqlcomment.KeyTenant: name, sqlcomment.KeyRoute: "GET /slow"})
		done := make(chan struct{})
		go func() {
			defer close(done)
			conn.Exec(context.Background(), q)
		}()
		t.Cleanup(func() {
			conn.PgConn().CancelRequest(context.Background())
			<-done
			conn.Close(context.Background())
		})
	}
	load, stmts := map[string]float64{}, map[string]int{}
	if !testsvc.PollEvery(20*time.Second, 100*time.Millisecond, func() bool {
		s := postgresOnce(t, dsn)
		load, stmts = map[string]float64{}, map[string]int{}
		for _, r := range s.Tenants {
			load[r.Tenant] = r.DBLoad
		}
		for _, st := range s.Statements {
			stmts[st.Tenant]++
		}
		return s.Source == api.SourcePostgres && load[a] == 2 && load[c] == 1 && stmts[a] == 2 && stmts[c] == 1
	}) {
		t.Fatalf("want %s with 2 sessions and %s with 1: load %v statements %v", a, c, load, stmts)
	}
	code, _, errOut := runQtop("--postgres", "postgres://nobody@127.0.0.1:1/x?connect_timeout=2", "--once")
	if code != 1 || !strings.Contains(errOut, "cannot connect to postgres nobody@127.0.0.1:1/x") {
		t.Fatalf("unreachable PostgreSQL: exit %d %q", code, errOut)
	}
}

// TestReplayOnce prints the last snapshot of the recorded incident of the
// repository's testdata folder; bad invocations say what to do.
func TestReplayOnce(t *testing.T) {
	var out, errb strings.Builder
	if code := run([]string{"replay", "../../testdata/incident/demo.qtop.gz", "--once", "--format", "table"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "bigcorp") || !strings.Contains(out.String(), "source demo") {
		t.Fatalf("output:\n%s", out.String())
	}
	errb.Reset()
	if code := run([]string{"replay"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "qtop replay FILE") {
		t.Fatalf("no file: %d %s", code, errb.String())
	}
	errb.Reset()
	if code := run([]string{"replay", "main.go", "--once"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "recording") {
		t.Fatalf("not a recording: %d %s", code, errb.String())
	}
	errb.Reset()
	if code := run([]string{"--group-by", "application", "--once"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "needs --postgres") {
		t.Fatalf("group-by without --postgres: %d %s", code, errb.String())
	}
}

// postgresOnce is qtop --postgres dsn --once --format json --top 1000,
// its snapshot decoded.
func postgresOnce(t *testing.T, dsn string) api.Snapshot {
	t.Helper()
	code, out, errOut := runQtop("--postgres", dsn, "--once", "--format", "json", "--top", "1000")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var s api.Snapshot
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatal(err)
	}
	return s
}
