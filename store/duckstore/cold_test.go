package duckstore

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/store/storetest"
)

func (s *Store) tableRows(t *testing.T, table string) int {
	t.Helper()
	var n int
	if err := s.db.QueryRow("SELECT count(*) FROM " + table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func checkReads(t *testing.T, s *Store, written []store.Rollup) {
	t.Helper()
	ctx := context.Background()
	from, to := storetest.T0, storetest.T0.Add(time.Hour)
	for _, byRoute := range []bool{false, true} {
		u, err := s.Usage(ctx, from, to, byRoute)
		if err != nil {
			t.Fatal(err)
		}
		storetest.CheckUsage(t, u, storetest.ExpectUsage(written, from, to, byRoute))
	}
	for _, name := range []string{"acme", "zeta"} {
		h, err := s.History(ctx, name, from, to)
		if err != nil {
			t.Fatal(err)
		}
		storetest.CheckHistory(t, h, storetest.ExpectHistory(written, name, from, to))
	}
}

// TestColdRows: rows older than the last minutes move to the cold table
// once there are enough of them; a late row replaces its cold copy when
// its version is the same or newer and is dropped when older; reads see
// each row once; erasure and retention clear both tables.
func TestColdRows(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "q.duckdb"), func(c *config) { c.compactRows = 4 })
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	var written []store.Rollup
	for m := range 20 {
		a, z := storetest.Row(m, "w1", "acme", "/a", 10), storetest.Row(m, "w1", "zeta", "/z", 3)
		a.Version, z.Version = 5, 5
		written = append(written, a, z)
	}
	if err := s.WriteRollups(ctx, written); err != nil {
		t.Fatal(err)
	}
	// Newest minute 19, cutoff 9: 18 rows before it, 16 moved.
	if hot, cold := s.tableRows(t, "rollups"), s.tableRows(t, "rollups_cold"); hot != 24 || cold != 16 {
		t.Fatalf("hot %d, cold %d rows; want 24, 16", hot, cold)
	}
	if want := storetest.T0.Add(9 * time.Minute); !s.horizon.Equal(want) {
		t.Fatalf("horizon %v, want %v", s.horizon, want)
	}
	checkReads(t, s, written)

	newer := storetest.Row(2, "w1", "acme", "/a", 100) // cold, replaced
	newer.Version = 6
	same := storetest.Row(3, "w1", "zeta", "/z", 7) // cold, same version: replaced
	same.Version = 5
	older := storetest.Row(4, "w1", "acme", "/a", 1000) // cold, older: dropped
	older.Version = 4
	fresh := storetest.Row(5, "w2", "acme", "/a", 9) // before the horizon, no copy anywhere
	late := []store.Rollup{newer, same, older, fresh}
	if err := s.WriteRollups(ctx, late); err != nil {
		t.Fatal(err)
	}
	written = append(written, late...)
	checkReads(t, s, written)
	if err := s.WriteRollups(ctx, late); err != nil { // a retry changes nothing
		t.Fatal(err)
	}
	checkReads(t, s, written)

	e, err := s.EraseTenant(ctx, "zeta")
	if err != nil || e.Rollups != 20 {
		t.Fatalf("erased %+v, %v; want 20 rollups", e, err)
	}
	r, err := s.Retain(ctx, storetest.T0.Add(10*time.Minute))
	if err != nil || r.Rows != 11 { // acme's minutes 0–9, and w2's minute 5
		t.Fatalf("retained %+v, %v; want 11 rows removed", r, err)
	}
	var kept []store.Rollup
	for _, w := range storetest.Latest(written) {
		if w.Tenant == "acme" && !w.Minute.Before(storetest.T0.Add(10*time.Minute)) {
			kept = append(kept, w)
		}
	}
	checkReads(t, s, kept)
}

// TestColdMigration: a file of schema 2 with rows gets the cold table and
// the hot table's tenant key (filled for the rows it holds: History
// filters on it); the first write moves its older rows, and reads still
// see them all.
func TestColdMigration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.duckdb")
	ctx := context.Background()
	s, err := Open(path, func(c *config) { c.maxMigration = 2 })
	if err != nil {
		t.Fatal(err)
	}
	var written []store.Rollup
	for m := range 30 {
		written = append(written, storetest.Row(m, "w1", "acme", "/a", uint64(m+1)))
	}
	for _, r := range written[:20] { // as schema 2's upsert wrote them
		if _, err := s.db.Exec(`INSERT INTO rollups (`+rollupColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.Minute, r.Writer, r.Version, r.Service, r.Tenant, r.Route, uint8(r.Tier), r.Kind, r.Count, r.Errors,
			r.DurationSeconds, r.RU, r.Bytes, r.Rows, r.ActiveSessionSeconds, encodeLatency(&r.Latency)); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	s, err = Open(path, func(c *config) { c.compactRows = 8 })
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkReads(t, s, written[:20])
	if err := s.WriteRollups(ctx, written[20:]); err != nil {
		t.Fatal(err)
	}
	// Newest minute 29, cutoff 19: 19 rows before it, 16 moved.
	if cold := s.tableRows(t, "rollups_cold"); cold != 16 {
		t.Fatalf("cold %d rows, want 16", cold)
	}
	checkReads(t, s, written)
}

// TestColdSums: Usage over ranges of every shape (inside an hour, whole
// hours, whole days with partial edges) reads the hourly and daily sums
// and the minutes at the edges, and equals the sum of the rows, after
// moves, late replacements and Retain.
func TestColdSums(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "q.duckdb"), func(c *config) { c.compactRows = 16 })
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	var written []store.Rollup
	for m := 0; m < 3*1440; m += 37 {
		for i, name := range []string{"acme", "zeta", "mu"} {
			r := storetest.Row(m+i, "w1", name, "/r"+name[:1], uint64(m%50+1))
			r.Kind = []string{store.KindRequest, store.KindDB, store.KindJob}[m%3]
			written = append(written, r)
		}
	}
	for i := 0; i < len(written); i += 200 { // batches, as a collector writes
		if err := s.WriteRollups(ctx, written[i:min(i+200, len(written))]); err != nil {
			t.Fatal(err)
		}
	}
	var late []store.Rollup
	for i := 0; i < len(written)/2; i += 7 {
		r := written[i]
		r.Version, r.Count, r.RU = 2, r.Count*3, r.RU+1
		late = append(late, r)
	}
	if err := s.WriteRollups(ctx, late); err != nil {
		t.Fatal(err)
	}
	written = append(written, late...)
	if s.tableRows(t, "rollups_cold") == 0 || s.tableRows(t, "rollups_sums_hour") == 0 || s.tableRows(t, "rollups_sums_day") == 0 {
		t.Fatal("nothing moved to the cold table")
	}
	t0 := storetest.T0.Truncate(24 * time.Hour)
	check := func() {
		t.Helper()
		for _, name := range []string{"acme", "zeta", "mu"} {
			h, err := s.History(ctx, name, t0, t0.Add(72*time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			storetest.CheckHistory(t, h, storetest.ExpectHistory(written, name, t0, t0.Add(72*time.Hour)))
		}
		for _, r := range [][2]time.Duration{
			{9*time.Hour + 3*time.Minute, 9*time.Hour + 50*time.Minute}, // inside an hour
			{9*time.Hour + 3*time.Minute, 13*time.Hour + 7*time.Minute}, // whole hours, no day
			{0, 72 * time.Hour}, // whole days
			{5*time.Hour + 59*time.Minute, 50*time.Hour + time.Minute}, // a day, hours and minutes on both sides
			{24 * time.Hour, 48 * time.Hour},
			{33 * time.Minute, 71*time.Hour + 13*time.Minute}, // edge days as the day less what is outside
			{24*time.Hour + 33*time.Minute, 47*time.Hour + 13*time.Minute},
			{24*time.Hour + 33*time.Minute, 24*time.Hour + 33*time.Minute + 12*time.Hour},
			{22*time.Hour + 33*time.Minute, 47*time.Hour + 13*time.Minute},
			{-time.Hour, 100 * time.Hour},
		} {
			from, to := t0.Add(r[0]), t0.Add(r[1])
			for _, byRoute := range []bool{false, true} {
				u, err := s.Usage(ctx, from, to, byRoute)
				if err != nil {
					t.Fatal(err)
				}
				storetest.CheckUsage(t, u, storetest.ExpectUsage(written, from, to, byRoute))
			}
		}
	}
	check()
	before := storetest.T0.Add(25*time.Hour + 17*time.Minute)
	if _, err := s.Retain(ctx, before); err != nil {
		t.Fatal(err)
	}
	var kept []store.Rollup
	for _, w := range written {
		if !w.Minute.Before(before) {
			kept = append(kept, w)
		}
	}
	written = kept
	check()
	if _, err := s.EraseTenant(ctx, "zeta"); err != nil {
		t.Fatal(err)
	}
	kept = kept[:0:0]
	for _, w := range written {
		if w.Tenant != "zeta" {
			kept = append(kept, w)
		}
	}
	written = kept
	check()
}

// coldDescents counts the cold rows of [from, to) that come, in storage
// order, after a row of a greater (tkey, minute): the sorted runs there
// less one. (A struct compared with NULLs sorts them last: the first
// row's lag is left out.)
func (s *Store) coldDescents(t *testing.T, from, to time.Time) (descents, rows int) {
	t.Helper()
	if err := s.db.QueryRow(`SELECT count(*) FILTER (WHERE pk IS NOT NULL AND (tkey, minute) < (pk, pm)), count(*) FROM (
    SELECT tkey, minute, lag(tkey) OVER (ORDER BY rowid) AS pk, lag(minute) OVER (ORDER BY rowid) AS pm
    FROM rollups_cold WHERE minute >= ? AND minute < ?)`, from, to).Scan(&descents, &rows); err != nil {
		t.Fatal(err)
	}
	return descents, rows
}

// TestColdRuns: when the horizon passes the end of a day (or of four
// hours), that span's cold rows are rewritten as one run sorted by tenant
// (less the few rows still hot then, which move later as a run of their
// own), and reads see the same rows.
func TestColdRuns(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "q.duckdb"), func(c *config) { c.compactRows = 4 })
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	t0 := storetest.T0.Truncate(24 * time.Hour)
	var written []store.Rollup
	for m := 0; m < 1800; m += 13 { // about a minute's batch of rows at a time
		var batch []store.Rollup
		for _, name := range []string{"acme", "zeta", "mu"} {
			batch = append(batch, storetest.Row(int(t0.Sub(storetest.T0)/time.Minute)+m, "w1", name, "/"+name, uint64(m%50+1)))
		}
		if err := s.WriteRollups(ctx, batch); err != nil {
			t.Fatal(err)
		}
		written = append(written, batch...)
	}
	if d, n := s.coldDescents(t, t0, t0.Add(24*time.Hour)); d > 1 || n < 300 {
		t.Fatalf("the first day's cold rows: %d descents in %d rows, want one run (and a fragment)", d, n)
	}
	if d, n := s.coldDescents(t, t0.Add(24*time.Hour), t0.Add(28*time.Hour)); d > 1 || n < 50 {
		t.Fatalf("the next four hours' cold rows: %d descents in %d rows, want one run (and a fragment)", d, n)
	}
	for _, name := range []string{"acme", "zeta", "mu"} {
		h, err := s.History(ctx, name, t0, t0.Add(48*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		storetest.CheckHistory(t, h, storetest.ExpectHistory(written, name, t0, t0.Add(48*time.Hour)))
	}
	u, err := s.Usage(ctx, t0.Add(3*time.Minute), t0.Add(29*time.Hour), true)
	if err != nil {
		t.Fatal(err)
	}
	storetest.CheckUsage(t, u, storetest.ExpectUsage(written, t0.Add(3*time.Minute), t0.Add(29*time.Hour), true))
}

// TestSumsMigration: a file of schema 4, its sums in one table with a
// grain column, gets a table per grain, and Usage reads the same sums.
func TestSumsMigration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.duckdb")
	ctx := context.Background()
	s, err := Open(path, func(c *config) { c.maxMigration = 4 })
	if err != nil {
		t.Fatal(err)
	}
	var written []store.Rollup
	for m := 0; m < 3*60; m += 7 {
		written = append(written, storetest.Row(m, "w1", "acme", "/a", uint64(m+1)), storetest.Row(m, "w1", "zeta", "/z", 2))
	}
	for _, r := range written { // as schema 4's moves left them
		if _, err := s.db.Exec(`INSERT INTO rollups_cold (tkey, `+rollupColumns+`) VALUES (md5_number_upper(?), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.Tenant, r.Minute, r.Writer, r.Version, r.Service, r.Tenant, r.Route, uint8(r.Tier), r.Kind, r.Count, r.Errors,
			r.DurationSeconds, r.RU, r.Bytes, r.Rows, r.ActiveSessionSeconds, encodeLatency(&r.Latency)); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []string{`INSERT INTO rollups_sums
SELECT g.grain, date_trunc(g.grain, minute), tenant, route, kind, count(*), sum(count), sum(errors), sum(duration_seconds),
    sum(coalesce(active_session_seconds, 0)), sum(ru), sum(bytes)
FROM rollups_cold, (VALUES ('hour'), ('day')) g(grain) GROUP BY ALL`,
		`UPDATE rollups_horizon SET horizon = TIMESTAMP '2030-01-01'`} {
		if _, err := s.db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.tableRows(t, "rollups_sums_hour") == 0 || s.tableRows(t, "rollups_sums_day") == 0 {
		t.Fatal("the sums were not moved")
	}
	t0 := storetest.T0.Truncate(24 * time.Hour)
	for _, r := range [][2]time.Time{{storetest.T0, storetest.T0.Add(3 * time.Hour)}, {t0, t0.Add(24 * time.Hour)}} {
		u, err := s.Usage(ctx, r[0], r[1], true)
		if err != nil {
			t.Fatal(err)
		}
		storetest.CheckUsage(t, u, storetest.ExpectUsage(written, r[0], r[1], true))
	}
}

// TestTenantKey: the key History computes is DuckDB's md5_number_upper.
func TestTenantKey(t *testing.T) {
	s, err := Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, name := range []string{"", "acme", "tenant-05000", "Ünïcødé 租户", "a'b"} {
		var want uint64
		if err := s.db.QueryRow("SELECT md5_number_upper(?)", name).Scan(&want); err != nil {
			t.Fatal(err)
		}
		if got := tenantKey(name); got != want {
			t.Fatalf("tenantKey(%q) = %d, want %d", name, got, want)
		}
	}
}
