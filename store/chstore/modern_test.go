package chstore

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/store/storetest"
	"github.com/qtop-dev/qtop/tenant"
)

// The modern engine: ClickHouse's own engine as a library (the npm package
// chdb, pinned by testdata/chdb/package-lock.json, installed by
// scripts/test with npm ci), driven by testdata/chdb/run.js. It proves the
// SQL on a current release — the schema rendered for it and every read
// the collector and collector report issue — not the native protocol,
// replication or ON CLUSTER: it has no server and no Keeper.

const chdbDir = "testdata/chdb"

// modernEngine returns the command that runs run.js, or fails (CI,
// QTOP_REQUIRE_SERVICES) or skips the test when Node.js or chdb is missing.
func modernEngine(t *testing.T) func(args ...string) []byte {
	t.Helper()
	missing := func(what string) {
		msg := what + " is not installed; run (cd store/chstore/testdata/chdb && npm ci) — scripts/test does"
		if testsvc.Required() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("Node.js")
	}
	if _, err := os.Stat(filepath.Join(chdbDir, "node_modules", "chdb", "package.json")); err != nil {
		missing("the npm package chdb")
	}
	return func(args ...string) []byte {
		t.Helper()
		cmd := exec.Command(node, append([]string{"run.js"}, args...)...)
		cmd.Dir = chdbDir
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("node run.js %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
		}
		return out
	}
}

// recordingConn passes every query on and records it, so the test runs
// exactly the SQL the store's read methods issue.
type recordingConn struct {
	driver.Conn
	mu      sync.Mutex
	queries []string
}

func (c *recordingConn) record(q string, args []any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queries = append(c.queries, bindArgs(q, args))
}

func (c *recordingConn) Query(ctx context.Context, q string, args ...any) (driver.Rows, error) {
	c.record(q, args)
	return c.Conn.Query(ctx, q, args...)
}

func (c *recordingConn) QueryRow(ctx context.Context, q string, args ...any) driver.Row {
	c.record(q, args)
	return c.Conn.QueryRow(ctx, q, args...)
}

func (c *recordingConn) Select(ctx context.Context, dest any, q string, args ...any) error {
	c.record(q, args)
	return c.Conn.Select(ctx, dest, q, args...)
}

func (c *recordingConn) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.queries
	c.queries = nil
	return q
}

// bindArgs splices positional arguments into q as clickhouse-go does.
func bindArgs(q string, args []any) string {
	for _, a := range args {
		var lit string
		switch a := a.(type) {
		case string:
			lit = quoteString(a)
		default:
			lit = fmt.Sprint(a)
		}
		q = strings.Replace(q, "?", lit, 1)
	}
	return q
}

// modernData writes a day's worth of qtop data through the store: two
// writers, re-emitted rows at higher versions, retried batches, every
// kind, histograms, hot keys, statements and audit rows.
func modernData(t *testing.T, s *Store, base time.Time) {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(31, 1))
	var rollups []store.Rollup
	kinds := []string{store.KindRequest, store.KindDB, store.KindJob, store.KindPG}
	for m := range 30 {
		for _, w := range []string{"c1", "c2"} {
			for _, tn := range []string{"acme", "globex", "", "o'hare\\x"} {
				k := kinds[rng.IntN(len(kinds))]
				r := store.Rollup{Minute: base.Add(time.Duration(m) * time.Minute), Writer: w, Version: 1, Service: "api",
					Tenant: tn, Route: fmt.Sprintf("/r%d", rng.IntN(3)), Tier: tenant.Tier(rng.IntN(3)), Kind: k,
					Count: uint64(1 + rng.IntN(1000)), Errors: uint64(rng.IntN(5)), DurationSeconds: rng.Float64() * 100,
					RU: rng.Float64() * 10, Bytes: uint64(rng.IntN(1 << 20)), Rows: uint64(rng.IntN(1000))}
				if k == store.KindPG {
					r.Service, r.ActiveSessionSeconds = "", rng.Float64()*60
					r.DurationSeconds = r.ActiveSessionSeconds / 4 // the part statement rows count
				}
				r.Latency = storetest.Latency(uint64(rng.IntN(40)), uint64(1+rng.IntN(50)), uint64(40+rng.IntN(40)), uint64(1+rng.IntN(50)))
				rollups = append(rollups, r)
			}
		}
	}
	for _, batch := range [][]store.Rollup{rollups[:100], rollups[100:], rollups[:50]} { // the last one a retry
		if err := s.WriteRollups(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	late := make([]store.Rollup, 20) // re-emitted at a higher version: these replace the first
	for i := range late {
		late[i] = rollups[i*3]
		late[i].Version, late[i].Count, late[i].Latency = 2, late[i].Count+7, storetest.Latency(5, 3)
	}
	if err := s.WriteRollups(ctx, late); err != nil {
		t.Fatal(err)
	}
	hot := []store.HotKey{{Minute: base, Writer: "c1", Version: 1, Key: "k1", Tenant: "acme", Count: 9, Err: 1},
		{Minute: base, Writer: "c1", Version: 2, Key: "k1", Tenant: "acme", Count: 11, Err: 1}}
	if err := s.WriteHotKeys(ctx, hot); err != nil {
		t.Fatal(err)
	}
	st := []store.Statement{{Time: base.Add(1500 * time.Millisecond), Writer: "c1", PID: 7, Tenant: "acme", Route: "/r1",
		Application: "api", Query: "SELECT 1", State: "active", WaitEventType: "IO", WaitEvent: "DataFileRead", Duration: 2 * time.Second}}
	if err := s.WriteStatements(ctx, st); err != nil {
		t.Fatal(err)
	}
	var audit []store.Audit
	for i := range 12 {
		audit = append(audit, store.Audit{Time: base.Add(time.Duration(i)*time.Minute + 123456789), Who: "ops", Action: "set",
			PolicyVersion: uint64(i + 1), Rule: fmt.Sprintf(`{"tenant":"acme","n":%d}`, i)})
	}
	for range 2 { // a retried write
		if err := s.WriteAudit(ctx, audit); err != nil {
			t.Fatal(err)
		}
	}
}

// readQueries calls every read the collector and collector report make
// (store.Store's Usage per tenant and per route, over whole hours and
// over one that starts and ends inside hours, History, ReadAudit and
// AuditLog) and returns the SQL each issued, named after the call (with
// #N where a call issues several: Usage reads the marks of the sums of
// closed hours, the sums, and the rollups of the other minutes).
func readQueries(t *testing.T, s *Store, rec *recordingConn, base time.Time) map[string]string {
	t.Helper()
	ctx := context.Background()
	from, to := base.Add(-time.Hour), base.Add(2*time.Hour)
	calls := map[string]func() error{
		"usage":          func() error { _, err := s.Usage(ctx, from, to, false); return err },
		"usage_by_route": func() error { _, err := s.Usage(ctx, from, to, true); return err },
		"usage_in_hours": func() error {
			_, err := s.Usage(ctx, base.Add(10*time.Minute), base.Add(80*time.Minute), true)
			return err
		},
		"history_acme":  func() error { _, err := s.History(ctx, "acme", from, to); return err },
		"history_quote": func() error { _, err := s.History(ctx, "o'hare\\x", from, to); return err },
		"history_none":  func() error { _, err := s.History(ctx, "", from, to); return err },
		"read_audit":    func() error { _, err := s.ReadAudit(ctx, from, to); return err },
		"audit_log":     func() error { _, err := s.AuditLog(ctx); return err },
	}
	out := map[string]string{}
	for name, call := range calls {
		rec.take()
		if err := call(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		qs := rec.take()
		if len(qs) == 0 || len(qs) > 1 && !strings.HasPrefix(name, "usage") {
			t.Fatalf("%s issued %d queries, want 1: %q", name, len(qs), qs)
		}
		if len(qs) == 1 {
			out[name] = qs[0]
			continue
		}
		for i, q := range qs {
			out[fmt.Sprintf("%s#%d", name, i+1)] = q
		}
	}
	return out
}

// sumQueries sums the closed hours of modernData (on a clock an hour
// ahead), then writes a row into the next hour, so reads meet summed hours
// and rollups; it returns the SELECT that computed the sums, ordered.
func sumQueries(t *testing.T, s *Store, rec *recordingConn, base time.Time) map[string]string {
	t.Helper()
	s.cfg.now = func() time.Time { return time.Now().Add(time.Hour) }
	rec.take()
	if n, err := s.SumHours(context.Background()); err != nil || n != 1 {
		t.Fatalf("SumHours = %d, %v; want the hour of modernData", n, err)
	}
	out := map[string]string{}
	for _, q := range rec.take() {
		if strings.Contains(q, "argMax") {
			out["sum_hours"] = "SELECT * FROM (" + q + ") ORDER BY minute, tenant, route"
		}
	}
	late := storetest.Row(0, "c1", "globex", "/r1", 5)
	late.Minute = base.Add(70 * time.Minute)
	if err := s.WriteRollups(context.Background(), []store.Rollup{late}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestModernEngine writes data through the store to the 18.16 server,
// copies it into the modern engine under the schema rendered for that
// engine's version (LowCardinality, codecs, TTL), runs there the exact
// SQL of every read the store makes, and compares the results with the
// 18.16 server's. It then erases a tenant on both — 18.16 through
// DeleteTenant (an ALTER … DELETE mutation), the modern engine with the
// rendered lightweight DELETE — and compares again. The copy is inserted
// with the settings a modern cluster's writes send (async inserts on).
func TestModernEngine(t *testing.T) {
	run := modernEngine(t)
	modern := parseVersion(t, strings.TrimSpace(string(run("version"))))
	s, _, db := openTest(t)
	rec := &recordingConn{Conn: s.conn}
	s.conn = rec
	base := time.Now().UTC().Truncate(time.Hour).Add(-3 * time.Hour)
	modernData(t, s, base)
	sums := sumQueries(t, s, rec, base)
	reads := readQueries(t, s, rec, base)
	maps.Copy(reads, sums)

	sc := Schema{Database: db, Version: modern, Retention: 90 * 24 * time.Hour}
	cloud := sc
	cloud.Mode = ModeCloud
	if sc.DDL() != cloud.DDL() {
		t.Fatalf("cloud DDL differs from the single server's; the test runs only the latter:\n%s", cloud.DDL())
	}
	for _, want := range []string{"LowCardinality(String)", "CODEC(DoubleDelta, LZ4)", "TTL minute + INTERVAL", "ADD COLUMN IF NOT EXISTS"} {
		if !strings.Contains(sc.DDL(), want) {
			t.Fatalf("the DDL for %v lacks %s", modern, want)
		}
	}
	var steps []map[string]string
	add := func(name, sql string) { steps = append(steps, map[string]string{"name": name, "sql": sql}) }
	for _, q := range sc.statements() {
		add("", q)
	}
	// The copy goes in with the settings a modern cluster's collector
	// sends with async inserts on: the engine must know their names.
	set := Schema{Database: db, Version: modern, Cluster: "c"}.InsertSettings(true)
	var names []string
	for k, v := range set {
		names = append(names, fmt.Sprintf("%s = %v", k, v))
	}
	slices.Sort(names)
	if want := "async_insert = 1, distributed_foreground_insert = 1, wait_for_async_insert = 1"; strings.Join(names, ", ") != want {
		t.Fatalf("insert settings for %v: %s, want %s", modern, strings.Join(names, ", "), want)
	}
	for _, table := range []string{TableRollups, TableHotKeys, TableStatements, TableAudit, TableSums} {
		add("", "INSERT INTO "+db+"."+table+" SETTINGS "+strings.Join(names, ", ")+" FORMAT JSONEachRow\n"+exportTable(t, s, db, table))
	}
	for name, q := range reads {
		add(name, q)
	}
	for _, table := range append(slices.Clip(TenantTables), TableSums) {
		add("", sc.DeleteTenantSQL(table, "acme"))
	}
	// The sums and rollups Usage read (not its marks: DeleteTenant marks
	// the tenant's hours on 18.16, so that they are summed again).
	after := afterDelete(reads)
	for name, q := range after {
		add(name, q)
	}
	add("hot_keys_after_delete", "SELECT count() FROM "+db+"."+TableHotKeys)

	got := runModern(t, run, steps)
	old := map[string][][]any{}
	for name, q := range reads {
		old[name] = queryRows(t, s, q)
	}
	if err := s.DeleteTenant(context.Background(), "acme"); err != nil {
		t.Fatal(err)
	}
	for name, q := range after {
		old[name] = queryRows(t, s, q)
	}
	old["hot_keys_after_delete"] = queryRows(t, s, "SELECT count() FROM "+db+"."+TableHotKeys)
	for name := range old {
		if strings.HasPrefix(name, "usage") { // unordered: Usage sorts the lines it adds up
			sortRows(old[name])
			sortRows(got[name])
		}
	}
	for name, want := range old {
		if len(want) == 0 && !strings.HasPrefix(name, "hot_keys") {
			t.Errorf("%s: no rows on 18.16; the data does not exercise it", name)
		}
		if err := sameRows(want, got[name]); err != nil {
			t.Errorf("%s: modern engine %v differs from 18.16: %v\nSQL: %s", name, modern, err, reads[name])
		}
	}
	if n := old["hot_keys_after_delete"]; len(n) != 1 || fmt.Sprint(n[0][0]) != "0" {
		t.Errorf("hot keys after deleting the only tenant: %v", n)
	}
	t.Logf("modern engine %v: %d statements of DDL, %d reads and the erasure agree with 18.16", modern, len(sc.statements()), len(reads))
}

// sortRows sorts rows by their first two columns (tenant and route).
func sortRows(rows [][]any) {
	slices.SortFunc(rows, func(a, b []any) int {
		return strings.Compare(fmt.Sprint(a[:min(2, len(a))]...), fmt.Sprint(b[:min(2, len(b))]...))
	})
}

// afterDelete names the Usage queries of reads that read sums or rollups
// for the comparison after an erasure.
func afterDelete(reads map[string]string) map[string]string {
	out := map[string]string{}
	for name, q := range reads {
		if strings.HasPrefix(name, "usage#") && !strings.Contains(q, "maxIf") {
			out[strings.Replace(name, "usage", "usage_after_delete", 1)] = q
		}
	}
	return out
}

func parseVersion(t *testing.T, v string) Version {
	t.Helper()
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		t.Fatalf("version %q", v)
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		t.Fatalf("version %q", v)
	}
	return Version{major, minor}
}

// statements are the schema's DDL statements in the order Open runs them.
func (s Schema) statements() []string {
	out := []string{s.CreateDatabase(), s.CreateMigrations()}
	for _, m := range s.Migrations() {
		for _, st := range m.Steps {
			out = append(out, st.SQL)
		}
	}
	return out
}

func runModern(t *testing.T, run func(...string) []byte, steps []map[string]string) map[string][][]any {
	t.Helper()
	req, err := json.Marshal(map[string]any{"steps": steps})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "request.json")
	if err := os.WriteFile(path, req, 0o644); err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	var reply struct {
		Results map[string][][]any
		Error   string
	}
	dec := json.NewDecoder(strings.NewReader(string(run(abs))))
	dec.UseNumber()
	if err := dec.Decode(&reply); err != nil || reply.Error != "" {
		t.Fatalf("modern engine: %v %s", err, reply.Error)
	}
	return reply.Results
}

// exportTable is every row of a table on the 18.16 server as JSONEachRow
// (DateTime as Unix seconds, floats in their shortest exact form).
func exportTable(t *testing.T, s *Store, db, table string) string {
	t.Helper()
	rows, err := s.conn.Query(context.Background(), fmt.Sprintf("SELECT * FROM %s.%s", db, table))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols := rows.Columns()
	var b strings.Builder
	for rows.Next() {
		vals := scanRow(t, rows)
		obj := make(map[string]any, len(cols))
		for i, c := range cols {
			obj[c] = jsonValue(vals[i])
		}
		line, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func jsonValue(v any) any {
	if tm, ok := v.(time.Time); ok {
		return tm.Unix()
	}
	return v
}

func scanRow(t *testing.T, rows driver.Rows) []any {
	t.Helper()
	types := rows.ColumnTypes()
	ptrs := make([]any, len(types))
	for i, ct := range types {
		ptrs[i] = reflect.New(ct.ScanType()).Interface()
	}
	if err := rows.Scan(ptrs...); err != nil {
		t.Fatal(err)
	}
	vals := make([]any, len(ptrs))
	for i, p := range ptrs {
		vals[i] = reflect.ValueOf(p).Elem().Interface()
	}
	return vals
}

// queryRows runs q on the 18.16 server and returns its rows.
func queryRows(t *testing.T, s *Store, q string) [][]any {
	t.Helper()
	rows, err := s.conn.Query(context.Background(), q)
	if err != nil {
		t.Fatalf("%v\nSQL: %s", err, q)
	}
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		out = append(out, scanRow(t, rows))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// sameRows compares the 18.16 server's rows (Go values) with the modern
// engine's (JSON: 64-bit integers as strings, DateTime as Unix seconds).
// Integers, strings and times must be equal; floats agree to a relative
// 1e-12 (the engines may sum in a different order).
func sameRows(want [][]any, got [][]any) error {
	if len(want) != len(got) {
		return fmt.Errorf("%d rows, want %d", len(got), len(want))
	}
	for i := range want {
		if len(want[i]) != len(got[i]) {
			return fmt.Errorf("row %d: %d columns, want %d", i, len(got[i]), len(want[i]))
		}
		for j := range want[i] {
			if err := sameValue(want[i][j], got[i][j]); err != nil {
				return fmt.Errorf("row %d column %d: %w (row %v vs %v)", i, j, err, want[i], got[i])
			}
		}
	}
	return nil
}

func sameValue(want, got any) error {
	wv := reflect.ValueOf(want)
	switch {
	case wv.Kind() == reflect.Slice:
		g, ok := got.([]any)
		if !ok || len(g) != wv.Len() {
			return fmt.Errorf("%v, want %v", got, want)
		}
		for k := range g {
			if err := sameValue(wv.Index(k).Interface(), g[k]); err != nil {
				return err
			}
		}
		return nil
	case wv.Kind() == reflect.Float32 || wv.Kind() == reflect.Float64:
		gs := fmt.Sprint(got)
		g, err := strconv.ParseFloat(gs, 64)
		w := wv.Float()
		if err != nil || math.Abs(g-w) > 1e-12*math.Max(1, math.Abs(w)) {
			return fmt.Errorf("%s, want %v", gs, w)
		}
		return nil
	}
	w := fmt.Sprint(want)
	if tm, ok := want.(time.Time); ok {
		w = strconv.FormatInt(tm.Unix(), 10)
	}
	if g := fmt.Sprint(got); g != w {
		return fmt.Errorf("%s, want %s", g, w)
	}
	return nil
}

// TestModernEngineCoversEveryRead keeps readQueries whole: a new method
// of Store must be named here, its reads added to readQueries when it
// reads.
func TestModernEngineCoversEveryRead(t *testing.T) {
	known := map[string]bool{
		// reads, run on both engines by TestModernEngine
		"Usage": true, "History": true, "ReadAudit": true, "AuditLog": true,
		// writes, the erasure (compared there too), and the rest
		"WriteRollups": true, "WriteHotKeys": true, "WriteStatements": true, "WriteAudit": true,
		"DeleteTenant": true, "Ping": true, "Close": true, "Schema": true,
		// Retain's system.parts query and drop run on the modern engine in
		// TestModernEngineRetention; EraseTenant counts with a plain
		// count() per table, then calls DeleteTenant.
		"Retain": true, "EraseTenant": true,
		// SumHours: its computation is run on both engines by
		// TestModernEngine (sumQueries); its marks query is Usage's kind.
		"SumHours": true,
		// NodesWithoutSchema reads system.clusters (the node walk of
		// Retain and DeleteTenant) and system.tables' database and name,
		// columns of every release; chdb has no cluster to walk.
		"NodesWithoutSchema": true,
	}
	typ := reflect.TypeFor[*Store]()
	for i := range typ.NumMethod() {
		if name := typ.Method(i).Name; !known[name] {
			t.Errorf("Store.%s is new: if it reads, add it to readQueries (modern_test.go); name it here", name)
		}
	}
}
