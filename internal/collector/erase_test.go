package collector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/meter"
	"github.com/qtop-dev/qtop/quota"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/store/chstore"
	"github.com/qtop-dev/qtop/tenant"
)

// TestEraseTenant runs a collector on a DuckDB file with two tenants,
// stops it with their reports still in the write-ahead log, spools more
// of their rows as for an unreachable store, erases one tenant, and
// checks it is gone from the log, the spool and the store — and stays
// gone after a collector replays that log and spool — while the other
// tenant is whole, and that the erasure is in the audit log.
func TestEraseTenant(t *testing.T) {
	eraseEndToEnd(t, "duckdb://"+filepath.Join(t.TempDir(), "qtop.duckdb"))
}

// TestEraseTenantClickHouse is TestEraseTenant on ClickHouse (18.16: the
// erasure is a mutation the store waits for).
func TestEraseTenantClickHouse(t *testing.T) {
	addr := testsvc.ClickHouse(t)
	waitClickHouse(t, addr)
	db := fmt.Sprintf("qtop_col_erase_%d", time.Now().UnixNano())
	t.Cleanup(func() {
		conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}})
		if err == nil {
			conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db)
			conn.Close()
		}
	})
	eraseEndToEnd(t, "clickhouse://"+addr+"/"+db)
}

func eraseEndToEnd(t *testing.T, url string) {
	f := newFixture(t, func(c *Config) { c.Store, c.OpenStore = url, nil })
	ctx := context.Background()
	p := newProcess(f.clk, "api", "p1")
	f.clk.Add(time.Second)
	for _, tn := range []string{"acme", "beta"} {
		if f.ingest(p.report(t, tn, 10, tn+":cart")) != 200 {
			t.Fatal("refused")
		}
	}
	f.s.Tick(ctx, f.clk.Add(time.Minute)) // 09:00 written to the store
	if f.ingest(p.report(t, "acme", 5, "acme:cart")) != 200 || f.ingest(p.report(t, "beta", 5, "beta:cart")) != 200 {
		t.Fatal("refused")
	}
	cfg := EraseConfig{Tenant: "acme", Store: url, DataDir: f.dir, Who: "erase:dpo", Now: func() time.Time { return t0.Add(time.Hour) }}
	if _, err := EraseTenant(ctx, cfg); !errors.Is(err, ErrDataDirLocked) {
		t.Fatalf("erase while the collector runs: %v, want ErrDataDirLocked", err)
	}
	f.stop() // writes 09:00 again; its log stays (late reports may still come)
	spoolRows(t, f.dir)

	er, err := EraseTenant(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Both reports of each tenant fall in 09:00 (the second one's window
	// is centred there): one minute's log, one row of each in the store.
	if er.WAL.Files != 1 || er.WAL.Rows != 2 || er.WAL.Keys != 2 || er.WAL.Reports != 2 {
		t.Errorf("wal: %+v, want 1 file, 2 reports, 2 rows, 2 keys", er.WAL)
	}
	if want := (store.Erased{Rollups: 1, HotKeys: 1, Statements: 1}); er.Spool.Erased != want {
		t.Errorf("spool: %+v, want %+v", er.Spool.Erased, want)
	}
	// DuckDB keeps one row per key; ClickHouse counts each version
	// written until its merges replace it (09:00 was written twice).
	if er.Store == nil || er.Store.Rollups < 1 || er.Store.Rollups > 2 || er.Store.HotKeys < 1 || er.Store.HotKeys > 2 {
		t.Errorf("store: %+v, want 1 or 2 rollups and hot keys", er.Store)
	}
	checkWAL(t, filepath.Join(f.dir, "wal"))

	// A collector on the erased folder replays the log and the spool.
	f.start(func(c *Config) { c.Store, c.OpenStore = url, nil })
	f.s.Tick(ctx, f.clk.Add(time.Minute))
	f.stop()
	st, err := OpenStore(ctx, url, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	u, err := st.Usage(ctx, t0.Add(-time.Hour), t0.Add(time.Hour), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(u) != 1 || u[0].Tenant != "beta" || u[0].Requests != 15+3 {
		t.Errorf("usage after erasure and replay: %+v, want beta's 15 requests and 3 spooled", u)
	}
	checkEraseAudit(t, st, er)
	if again, err := EraseTenant(ctx, cfg); err != nil || again.WAL.Rows+again.WAL.Keys != 0 || again.Spool.Total() != 0 || again.Store.Total() != 0 {
		t.Errorf("a second erasure found %+v (%v)", again, err)
	}
}

// spoolRows leaves a batch of each table, both tenants, in dir's spool,
// as an unreachable store would.
func spoolRows(t *testing.T, dir string) {
	t.Helper()
	sp, err := store.NewSpool(&memStore{fail: errors.New("down")}, filepath.Join(dir, "spool"), store.WithCloseTimeout(0))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	m := t0.Truncate(time.Minute).Add(-10 * time.Minute)
	var rs []store.Rollup
	var hs []store.HotKey
	var ss []store.Statement
	for i, tn := range []string{"acme", "beta"} {
		rs = append(rs, store.Rollup{Minute: m, Writer: "w1", Version: 1, Service: "api", Tenant: tn, Route: "GET /x",
			Tier: tenant.T2, Kind: store.KindRequest, Count: 3})
		hs = append(hs, store.HotKey{Minute: m, Writer: "w1", Version: 1, Key: tn + ":old", Tenant: tn, Count: 3})
		ss = append(ss, store.Statement{Time: m, Writer: "w1", PID: int32(i + 1), Tenant: tn, Query: "SELECT 1"})
	}
	for _, err := range []error{sp.WriteRollups(ctx, rs), sp.WriteHotKeys(ctx, hs), sp.WriteStatements(ctx, ss)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if rows, _ := sp.Pending(); rows != 6 {
		t.Fatalf("spooled %d rows, want 6", rows)
	}
	sp.Close()
}

// checkWAL decodes every record of the log: none of acme's data is left,
// beta's is.
func checkWAL(t *testing.T, dir string) {
	t.Helper()
	mins, err := walMinutes(dir)
	if err != nil || len(mins) == 0 {
		t.Fatalf("wal minutes %v (%v), want some", mins, err)
	}
	beta := 0
	for _, mt := range mins {
		_, err := readWAL(walPath(dir, mt), func(body []byte) error {
			rep, err := reports.Decode(body)
			if err != nil {
				t.Fatalf("a rewritten record does not decode: %v", err)
			}
			for _, r := range rep.Rows {
				if r.Tenant == "acme" {
					t.Errorf("wal %v still holds an acme row", mt)
				}
				if r.Tenant == "beta" {
					beta++
				}
			}
			for k, tn := range rep.KeyTenants {
				if tn == "acme" {
					t.Errorf("wal %v still attributes key %q to acme", mt, k)
				}
			}
			if rep.Keys != nil {
				if _, _, ok := rep.Keys.Estimate("acme:cart"); ok {
					t.Errorf("wal %v: the key sketch still monitors acme's key", mt)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if beta != 2 {
		t.Errorf("wal holds %d rows of beta, want 2", beta)
	}
}

// checkEraseAudit finds the erasure's record in the store's audit log.
func checkEraseAudit(t *testing.T, st store.Store, er Erasure) {
	t.Helper()
	rows, err := ReadAudit(context.Background(), st, t0, t0.Add(2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Action != ActionErase || rows[0].Who != "erase:dpo" || !rows[0].Time.Equal(t0.Add(time.Hour)) {
		t.Fatalf("audit: %+v, want one erasure by erase:dpo at %v", rows, t0.Add(time.Hour))
	}
	var got Erasure
	if err := json.Unmarshal(rows[0].Rule, &got); err != nil {
		t.Fatal(err)
	}
	if got.Tenant != "acme" || got.WAL != er.WAL || got.Spool.Erased != er.Spool.Erased || got.Store == nil || *got.Store != *er.Store {
		t.Errorf("audit record %+v, want %+v", got, er)
	}
}

// TestEraseFromReport: a report's pool waits and quota usage of the
// tenant go too, and a section left empty is dropped.
func TestEraseFromReport(t *testing.T) {
	rep := &report.Report{
		Start: t0, End: t0.Add(time.Second),
		Rows:       []report.Row{{Tenant: "acme", Kind: report.KindRequest, Count: 1}, {Tenant: "beta", Kind: report.KindRequest, Count: 2}},
		KeyTenants: map[string]string{"k1": "acme", "k2": "beta"},
	}
	rep.SetSection(report.EnforcementDetail{PoolWait: []report.PoolWait{{Tenant: "acme", Count: 1}, {Tenant: "beta", Count: 2}}})
	rep.SetSection(quota.Usages{{Tenant: "acme", Admitted: 1}})
	var res WALErased
	if !eraseFromReport(rep, "acme", &res) {
		t.Fatal("nothing erased")
	}
	if res.Rows != 1 || res.Keys != 1 || res.Other != 2 {
		t.Errorf("erased %+v, want 1 row, 1 key, 2 others", res)
	}
	if _, ok := report.SectionOf[quota.Usages](rep); ok {
		t.Error("the emptied quota section is still there")
	}
	d, _ := report.SectionOf[report.EnforcementDetail](rep)
	if len(d.PoolWait) != 1 || d.PoolWait[0].Tenant != "beta" || len(rep.Rows) != 1 || rep.KeyTenants["k2"] != "beta" || len(rep.KeyTenants) != 1 {
		t.Errorf("left %+v", rep)
	}
	b, err := rep.MarshalBinary()
	if err == nil {
		_, err = reports.Decode(b)
	}
	if err != nil {
		t.Fatal(err)
	}
	if eraseFromReport(rep, "acme", &res) {
		t.Error("a second erasure found something")
	}
}

func TestEraseTenantRefuses(t *testing.T) {
	ctx := context.Background()
	for _, c := range []EraseConfig{
		{Tenant: "", DataDir: t.TempDir()},
		{Tenant: "(untagged)", DataDir: t.TempDir()},
		{Tenant: "acme", DataDir: filepath.Join(t.TempDir(), "missing")},
	} {
		if _, err := EraseTenant(ctx, c); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v, want ErrConfig", c, err)
		}
	}
	_, err := EraseTenant(ctx, EraseConfig{Tenant: "acme", DataDir: t.TempDir(), Store: "duckdb://x.duckdb",
		OpenStore: func(context.Context, string) (store.Store, error) { return newMemStore(), nil }})
	if !errors.Is(err, ErrNoErase) {
		t.Errorf("a store that cannot erase: %v, want ErrNoErase", err)
	}
}

// TestEraseTenantNamedOther: erasing tenant "other" erases that tenant,
// stored under its stand-in, never the overflow row of that name.
func TestEraseTenantNamedOther(t *testing.T) {
	er, _ := EraseTenant(context.Background(), EraseConfig{Tenant: tenant.Other, DataDir: t.TempDir(), Store: "duckdb://x.duckdb",
		OpenStore: func(context.Context, string) (store.Store, error) { return newMemStore(), nil }})
	if want := tenant.Escape(tenant.Other); er.Tenant != want {
		t.Errorf("erased %q, want %q", er.Tenant, want)
	}
}

// TestEraseDropsBufferedReports: a process goes on while the collector
// is stopped for an erasure and sends what it buffered when the
// collector is back. Its reports of windows begun before the erasure
// lose the erased tenant's rows (the other tenants' rows count); its
// later reports count whole; the erasure is kept across a restart and
// ends after ErasedKeep.
func TestEraseDropsBufferedReports(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	p := newProcess(f.clk, "api", "p1")
	cut := func(at time.Time, n map[string]int) []byte {
		f.clk.Set(at)
		for _, name := range []string{"acme", "beta"} {
			for range n[name] {
				p.rec.Record(meter.Record{Tags: tenant.Tags{Tenant: name, Route: "GET /x", Tier: tenant.T2, Key: name + ":cart"},
					Kind: report.KindRequest, Duration: 10 * time.Millisecond, RU: 1, Bytes: 100})
			}
		}
		b, err := p.rec.Cut(at).MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	f.stop() // (this test's store is in memory: the erasure leaves it)
	erasedAt := t0.Add(time.Minute)
	if _, err := EraseTenant(ctx, EraseConfig{Tenant: "acme", Store: StoreNone, DataDir: f.dir, Now: func() time.Time { return erasedAt }}); err != nil {
		t.Fatal(err)
	}
	// Cut while the collector was down: the first window began before
	// the erasure, the second after it.
	before := cut(erasedAt.Add(10*time.Second), map[string]int{"acme": 7, "beta": 2})
	after := cut(erasedAt.Add(20*time.Second), map[string]int{"acme": 3, "beta": 4})

	f.clk.Set(erasedAt.Add(30 * time.Second))
	f.start()
	if f.ingest(before) != 200 || f.ingest(after) != 200 {
		t.Fatal("a buffered report was refused: the other tenants' rows would be lost")
	}
	if got := testutil.ToFloat64(f.s.in.erased.dropped); got != 2 { // acme's row and its hot key
		t.Errorf("dropped %v items, want 2", got)
	}
	f.s.Tick(ctx, f.clk.Add(5*time.Minute))
	f.stop()
	if got := f.mem.sum("acme", "request", count); got != 3 {
		t.Errorf("acme: %v requests stored, want the 3 of the window after the erasure", got)
	}
	if got := f.mem.sum("beta", "request", count); got != 2+4 {
		t.Errorf("beta: %v requests stored after the restart, want 6", got)
	}

	// Past ErasedKeep the file no longer drops anything.
	f.clk.Set(erasedAt.Add(ErasedKeep + time.Minute))
	f.start()
	defer f.stop()
	if len(f.s.in.erased.at) != 0 {
		t.Errorf("erasures still in force after ErasedKeep: %v", f.s.in.erased.at)
	}
}

// TestErasedFileUnreadable: a collector does not start on an erasure
// list it cannot read (it would bring erased rows back), and says which
// file to fix.
func TestErasedFileUnreadable(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, erasedFile), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := New(Config{Store: StoreNone, DataDir: dir, Registerer: prometheus.NewRegistry()})
	if err == nil || !strings.Contains(err.Error(), erasedFile) || !strings.Contains(err.Error(), "fix or remove it") {
		t.Fatalf("New on a broken %s: %v", erasedFile, err)
	}
}

// TestOpenExistingStore: the commands that read or erase (report, audit,
// erase) open only a store that is there: a misspelt DuckDB file or
// ClickHouse database is an error naming it, and nothing is created
// (before, each made an empty store — a new database with qtop's schema on
// the server — and the report printed an empty bill).
func TestOpenExistingStore(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "typo.duckdb")
	if _, err := OpenExistingStore(ctx, "duckdb://"+path, Config{}); err == nil || !strings.Contains(err.Error(), "no store at "+path) {
		t.Fatalf("missing DuckDB file: %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the DuckDB file was made: %v", err)
	}
	addr := testsvc.ClickHouse(t)
	waitClickHouse(t, addr)
	db := fmt.Sprintf("qtop_col_typo_%d", time.Now().UnixNano())
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Cleanup(func() { conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db) })
	if _, err := OpenExistingStore(ctx, "clickhouse://"+addr+"/"+db, Config{}); !errors.Is(err, chstore.ErrNoDatabase) || !strings.Contains(err.Error(), db) {
		t.Fatalf("missing ClickHouse database: %v", err)
	}
	var n uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM system.databases WHERE name = ?", db).Scan(&n); err != nil || n != 0 {
		t.Fatalf("database %s made (%d, %v)", db, n, err)
	}
	// Once a collector made it, it opens.
	st, err := OpenStore(ctx, "clickhouse://"+addr+"/"+db, Config{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	st, err = OpenExistingStore(ctx, "clickhouse://"+addr+"/"+db, Config{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
}

// TestEraseMisnamedStoreTouchesNothing: an erase whose store cannot be
// the one meant (a misspelt database) fails before it changes the data
// dir: the tenant's minutes stay in the write-ahead log and no erasure
// is recorded there.
func TestEraseMisnamedStoreTouchesNothing(t *testing.T) {
	addr := testsvc.ClickHouse(t)
	f := newFixture(t)
	p := newProcess(f.clk, "api", "p1")
	f.clk.Add(time.Second)
	if f.ingest(p.report(t, "acme", 10, "")) != 200 {
		t.Fatal("refused")
	}
	f.stop()
	ctx := context.Background()
	misspelt := fmt.Sprintf("clickhouse://%s/qtop_no_such_db_%d", addr, time.Now().UnixNano())
	_, err := EraseTenant(ctx, EraseConfig{Tenant: "acme", Store: misspelt, DataDir: f.dir, Who: "test"})
	if !errors.Is(err, chstore.ErrNoDatabase) {
		t.Fatalf("a misspelt database: %v, want chstore.ErrNoDatabase", err)
	}
	if _, err := os.Stat(filepath.Join(f.dir, erasedFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("an erasure was recorded in the data dir (%v)", err)
	}
	er, err := EraseTenant(ctx, EraseConfig{Tenant: "acme", Store: StoreNone, DataDir: f.dir, Who: "test"})
	if err != nil || er.WAL.Rows == 0 {
		t.Fatalf("the tenant's log after the failed erase: %+v (%v), want its rows still there", er.WAL, err)
	}
}
