package tui

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/teatest"
	"github.com/jackc/pgx/v5"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/pgactivity"
	"github.com/qtop-dev/qtop/sqlcomment"
)

// TestPGServerRates: the header's rates and the top SQL's deltas per
// second between two reads, exactly; the entries of two roles of one
// fingerprint in one database are summed; one in another database is
// its own row; an entry without a previous read has no delta.
func TestPGServerRates(t *testing.T) {
	var p pgServer
	st := pgactivity.ServerStats{Time: t0, Xacts: 1000, BlksHit: 900, BlksRead: 100, SizeBytes: 1 << 20, Database: "shop", Active: 3}
	if r := p.server(st); r.TPS != 0 || r.CacheHitRatio != -1 || r.Active != 3 {
		t.Fatalf("first read: %+v", r)
	}
	st2 := pgactivity.ServerStats{Time: t0.Add(2 * time.Second), Xacts: 1400, BlksHit: 1890, BlksRead: 110, SizeBytes: 1<<20 + 4096, Database: "shop"}
	r := p.server(st2)
	if r.TPS != 200 || r.CacheHitRatio != 0.99 || r.GrowthBytesPerSec != 2048 {
		t.Fatalf("second read: %+v", r)
	}
	if got := serverLine(r); got != "pg 200 TPS · 0 active 0 idle-in-tx 0 waiting 0 idle · hit 99.0% · shop 1.0 MB +2.0 kB/s" {
		t.Fatalf("header %q", got)
	}

	x := func(id int64) pgactivity.Extras { return pgactivity.Extras{QueryID: id} }
	p.see([]pgactivity.Backend{{Extras: x(7), Tenant: "acme"}, {Extras: x(7), Tenant: "bigcorp"}, {Extras: x(9), Tenant: ""}})
	read1 := []pgactivity.StatementStats{
		{QueryID: 7, Database: "shop", Query: "UPDATE stock SET n = n - $1", Calls: 10, TotalMs: 100, Rows: 10},
		{QueryID: 7, Database: "shop", Query: "UPDATE stock SET n = n - $1", Calls: 5, TotalMs: 50, Rows: 5}, // another role
		{QueryID: 7, Database: "shop_eu", Query: "UPDATE stock SET n = n - $1", Calls: 1, TotalMs: 1},
	}
	if rows := p.topSQL(read1, t0); rows != nil {
		t.Fatalf("first read: %+v", rows)
	}
	read2 := []pgactivity.StatementStats{
		{QueryID: 7, Database: "shop", Query: "UPDATE stock SET n = n - $1", Calls: 30, TotalMs: 500, Rows: 30, SharedHit: 40},
		{QueryID: 7, Database: "shop", Query: "UPDATE stock SET n = n - $1", Calls: 5, TotalMs: 50, Rows: 5},
		{QueryID: 7, Database: "shop_eu", Query: "UPDATE stock SET n = n - $1", Calls: 3, TotalMs: 5},
		{QueryID: 8, Database: "shop", Query: "SELECT 1", Calls: 99, TotalMs: 99},
	}
	rows := p.topSQL(read2, t0.Add(2*time.Second))
	want := []api.TopSQLRow{
		{QueryID: 7, Database: "shop", Query: "UPDATE stock SET n = n - $1", CallsPerSec: 10, TimeMsPerSec: 200, MeanMs: 20, RowsPerSec: 10,
			SharedHitPerSec: 20, Tenants: []string{"acme", "bigcorp"}},
		{QueryID: 7, Database: "shop_eu", Query: "UPDATE stock SET n = n - $1", CallsPerSec: 1, TimeMsPerSec: 2, MeanMs: 2, Tenants: []string{"acme", "bigcorp"}},
	}
	if fmt.Sprintf("%+v", rows) != fmt.Sprintf("%+v", want) {
		t.Fatalf("top SQL:\n got %+v\nwant %+v", rows, want)
	}
}

// TestTopSQLOnTheRealServer: qtop --postgres with pgbench as noise and a
// tenant's statement (tagged with sqlcommenter) running in a loop: the
// header has the server's figures, the top SQL has the tenant's
// fingerprint with calls per second and the tenant seen running it.
func TestTopSQLOnTheRealServer(t *testing.T) {
	dsn := testsvc.Postgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sfx := suffix(t)
	table, ten := "qtop_topsql_"+strings.ReplaceAll(sfx, "-", "_"), "tui-topsql-"+sfx
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE TABLE "+table+" (n int)"); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(context.Background(), "DROP TABLE "+table)
	// pgbench: the noise, select-only on its own tables, for the test's length.
	noise := exec.CommandContext(ctx, "pgbench", "-n", "-c", "2", "-T", "30", "-f", "/dev/stdin", dsn)
	noise.Stdin = strings.NewReader("SELECT count(*) FROM pg_class;\n")
	if err := noise.Start(); err != nil {
		t.Fatalf("pgbench: %v", err)
	}
	defer func() { noise.Process.Kill(); noise.Wait() }()
	loop, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	loopCtx, stopLoop := context.WithCancel(ctx)
	loopDone := make(chan struct{})
	defer func() { // the loop ends before its connection closes
		stopLoop()
		<-loopDone
		loop.Close(context.Background())
	}()
	q := sqlcomment.Append("SELECT count(*), pg_sleep(0.05) FROM "+table, map[string]string{"tenant": ten, "route": "GET /topsql"})
	go func() {
		defer close(loopDone)
		for loopCtx.Err() == nil {
			loop.Exec(loopCtx, q)
		}
	}()

	src, err := NewPostgres(ctx, dsn, WithInterval(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for deadline := time.Now().Add(30 * time.Second); ; {
		s, err := src.Next(ctx, Query{Top: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if s.TopSQLError != "" {
			t.Fatalf("top SQL: %s", s.TopSQLError)
		}
		for _, r := range s.TopSQL {
			// pg_stat_database is flushed about once a second: TPS
			// may be 0 over one 200 ms interval. The loop's statement
			// may be between two runs at the sample's instant (a loaded
			// machine): the header counts it active in a later one.
			if strings.Contains(r.Query, table) && r.CallsPerSec > 0 && strings.Join(r.Tenants, ",") == ten && s.Server != nil && s.Server.TPS > 0 && s.Server.Active >= 1 {
				if s.Server.SizeBytes <= 0 || s.Server.CacheHitRatio < 0 {
					t.Fatalf("header %+v", s.Server)
				}
				t.Logf("%s · top SQL row %+v", serverLine(s.Server), r)
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no top SQL row for %s run by %s with the loop active; last %+v, header %+v", table, ten, s.TopSQL, s.Server)
		}
	}
}

// withServer is the incident as qtop --postgres shows it: the header and
// the top SQL, one fingerprint in two databases.
func withServer(s api.Snapshot) api.Snapshot {
	s.Server = &api.ServerRow{TPS: 1840, Active: 12, Idle: 40, IdleInTx: 2, Waiting: 3, CacheHitRatio: 0.972, Database: "shop",
		SizeBytes: 12 << 30, GrowthBytesPerSec: 3 << 20}
	s.TopSQL = []api.TopSQLRow{
		{QueryID: 1, Database: "shop", Query: "INSERT INTO products SELECT * FROM staging", CallsPerSec: 0.5, TimeMsPerSec: 910, MeanMs: 1820,
			RowsPerSec: 5000, SharedHitPerSec: 120000, SharedReadPerSec: 8800, Tenants: []string{"bigcorp"}},
		{QueryID: 2, Database: "shop", Query: "UPDATE stock SET n = n - $1 WHERE sku = $2", CallsPerSec: 210, TimeMsPerSec: 420, MeanMs: 2,
			RowsPerSec: 210, SharedHitPerSec: 900, Tenants: []string{"acme", "bigcorp", "globex"}},
		{QueryID: 2, Database: "shop_eu", Query: "UPDATE stock SET n = n - $1 WHERE sku = $2", CallsPerSec: 40, TimeMsPerSec: 60, MeanMs: 1.5,
			RowsPerSec: 40, SharedHitPerSec: 160},
	}
	return s
}

// TestGoldenTopSQL: the header and the Top SQL page (key 9) at 80×24 and
// 200×50.
func TestGoldenTopSQL(t *testing.T) {
	for _, size := range [][2]int{{80, 24}, {200, 50}} {
		t.Run(fmt.Sprintf("%dx%d", size[0], size[1]), func(t *testing.T) {
			src := newFake(Features{Signal: true, Group: true})
			defer src.Close()
			src.snaps <- withServer(incident())
			m := New(src, WithRenderer(asciiRenderer()), WithClock(func() time.Time { return t0 }), WithLocation(time.UTC), WithUser("alice"))
			tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(size[0], size[1]))
			teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte("bigcorp")) },
				teatest.WithDuration(10*time.Second), teatest.WithCheckInterval(10*time.Millisecond))
			tm.Send(keyOf("9"))
			tm.Send(tea.QuitMsg{})
			fm := tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).(*Model)
			teatest.RequireEqualOutput(t, []byte(fm.View()+"\n"))
		})
	}
}
