package chstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/store/storetest"
)

// stepClock is the store's clock in these tests: each reading is one
// second after the last, so writes, generations and "closed" are exact.
type stepClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stepClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Second)
	return c.t
}

// withSumClock runs the store's sums on c, with no margin and a round
// after every write: an hour is summed by the first write after it closed
// (c's time) and was last written before.
func withSumClock(c *stepClock) Option {
	return func(cf *config) { cf.now, cf.sumMargin, cf.sumEvery = c.now, 0, 0 }
}

// TestConformanceSums runs the conformance suite with sums computed after
// every write (the suite's hours are long closed on the clock), so its
// reads mix summed hours, stale ones (late rows, replays) and rollups.
func TestConformanceSums(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, _, _ := openTest(t, withSumClock(&stepClock{t: time.Now()}))
		return s
	})
}

// TestLiveClusterConformanceSums is TestConformanceSums on the replicated
// cluster.
func TestLiveClusterConformanceSums(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		t.Parallel()
		c := newLiveCluster(t)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		s, err := Open(ctx, strings.Join(c.addrs, ","), c.db, WithCluster(c.name), WithReplicated(), withSumClock(&stepClock{t: time.Now()}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// sumsFixture is a store on a step clock six hours after storetest.T0,
// its queries recorded, and the rows written to it.
type sumsFixture struct {
	t    *testing.T
	s    *Store
	rec  *recordingConn
	db   string
	rows []store.Rollup
}

func newSumsFixture(t *testing.T, opts ...Option) *sumsFixture {
	s, _, db := openTest(t, append(opts, withSumClock(&stepClock{t: storetest.T0.Add(6 * time.Hour)}))...)
	return fixtureOf(t, s, db)
}

// newClusterSumsFixture is newSumsFixture on the replicated cluster.
func newClusterSumsFixture(t *testing.T) *sumsFixture {
	c := newLiveCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := Open(ctx, strings.Join(c.addrs, ","), c.db, WithCluster(c.name), WithReplicated(),
		withSumClock(&stepClock{t: storetest.T0.Add(6 * time.Hour)}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return fixtureOf(t, s, c.db)
}

func fixtureOf(t *testing.T, s *Store, db string) *sumsFixture {
	s.cfg.sumEvery, s.lastSum = time.Hour, storetest.T0.Add(6*time.Hour) // summed when the test says
	rec := &recordingConn{Conn: s.conn}
	s.conn = rec
	return &sumsFixture{t: t, s: s, rec: rec, db: db}
}

// write writes rows every 7 minutes from T0−30m to T0+3h30m: three
// tenants, two routes, two writers, every kind.
func (f *sumsFixture) writeHistory() {
	var rows []store.Rollup
	kinds := []string{store.KindRequest, store.KindDB, store.KindJob, store.KindPG}
	for m := -30; m < 210; m += 7 {
		for i, tn := range []string{"a", "b", "c"} {
			r := storetest.Row(m, fmt.Sprintf("w%d", i%2+1), tn, fmt.Sprintf("/r%d", m%2), uint64(10+m+i))
			r.Kind = kinds[((m+30)/7+i)%len(kinds)]
			r.ActiveSessionSeconds = float64((m+30)%5) + 0.5
			if r.Kind == store.KindPG { // the part statement rows count, as the collector writes it
				r.DurationSeconds = r.ActiveSessionSeconds / 4
			}
			rows = append(rows, r)
		}
	}
	f.write(rows...)
}

func (f *sumsFixture) write(rows ...store.Rollup) {
	f.t.Helper()
	write := f.s.WriteRollups
	if f.rec == nil { // a store before the sums: rows only
		write = func(ctx context.Context, rows []store.Rollup) error { return insertRollups(ctx, f.s, rows) }
	}
	if err := write(context.Background(), rows); err != nil {
		f.t.Fatal(err)
	}
	f.rows = append(f.rows, rows...)
}

func (f *sumsFixture) sum(want int) {
	f.t.Helper()
	n, err := f.s.SumHours(context.Background())
	if err != nil || n != want {
		f.t.Fatalf("SumHours = %d, %v; want %d hours", n, err, want)
	}
}

var sumRanges = [][2]time.Duration{
	{-time.Hour, 4 * time.Hour},                       // every hour whole
	{7 * time.Minute, 173 * time.Minute},              // starts and ends inside hours
	{10 * time.Minute, 20 * time.Minute},              // inside one hour
	{59 * time.Minute, 61 * time.Minute},              // across an hour's end
	{-72 * time.Hour, 200 * time.Minute},              // days before
	{-33 * time.Hour, 4 * time.Hour},                  // the day before whole
	{150*time.Minute + 30*time.Second, 3 * time.Hour}, // seconds in the bounds
}

// check reads every range both ways and compares with the reference; with
// summed, the range of whole hours must read no rollups.
func (f *sumsFixture) check(summed bool) {
	f.t.Helper()
	ctx := context.Background()
	for i, r := range sumRanges {
		from, to := storetest.T0.Add(r[0]), storetest.T0.Add(r[1])
		for _, byRoute := range []bool{false, true} {
			f.rec.take()
			got, err := f.s.Usage(ctx, from, to, byRoute)
			if err != nil {
				f.t.Fatal(err)
			}
			storetest.CheckUsage(f.t, got, storetest.ExpectUsage(f.rows, from, to, byRoute))
			if i == 0 && summed {
				for _, q := range f.rec.take() {
					if strings.Contains(q, "argMax") {
						f.t.Fatalf("a range of summed hours read the rollups:\n%s", q)
					}
				}
			}
		}
	}
}

// stale reports whether reading hour h (from T0) reads its rollups.
func (f *sumsFixture) stale(h int) bool {
	f.t.Helper()
	from := storetest.T0.Add(time.Duration(h) * time.Hour)
	f.rec.take()
	if _, err := f.s.Usage(context.Background(), from, from.Add(time.Hour), false); err != nil {
		f.t.Fatal(err)
	}
	for _, q := range f.rec.take() {
		if strings.Contains(q, "argMax") {
			return true
		}
	}
	return false
}

// TestSumsLateRows: sums of closed hours give the reads' figures; a late
// row (newer version) and a replay (older version) into a summed hour make
// that hour read from the rollups until it is summed again, never counted
// twice or lost.
func TestSumsLateRows(t *testing.T) { sumsLateRows(t, newSumsFixture(t)) }

// TestLiveClusterSumsLateRows is TestSumsLateRows on the replicated cluster.
func TestLiveClusterSumsLateRows(t *testing.T) { sumsLateRows(t, newClusterSumsFixture(t)) }

func sumsLateRows(t *testing.T, f *sumsFixture) {
	f.writeHistory()
	f.check(false)
	f.sum(5) // T0−1h … T0+3h, one day
	f.check(true)
	f.sum(0)

	late := f.rows[20]
	late.Version, late.Count, late.RU = 5, late.Count+100, 99
	f.write(late)
	if !f.stale(int(late.Minute.Sub(storetest.T0).Hours())) {
		t.Fatal("an hour written after its sums does not read its rollups")
	}
	f.check(false)
	f.sum(1)
	f.check(true)

	old := f.rows[20] // the old version again: it must not win
	f.write(old)
	f.check(false)
	f.sum(1)
	f.check(true)
	if f.stale(0) {
		t.Fatal("hour T0 reads its rollups after it was summed again")
	}
}

// TestSumsNotClosed: an hour is summed only once it ended sumGrace ago on
// the store's clock.
func TestSumsNotClosed(t *testing.T) {
	f := newSumsFixture(t)
	f.s.cfg.now = (&stepClock{t: storetest.T0.Add(3*time.Hour + time.Minute)}).now
	f.writeHistory()
	f.sum(3) // T0−1h, T0, T0+1h; T0+2h ended a minute ago, T0+3h is on
	f.check(false)
}

// TestSumsErase: erasing a tenant removes it from the sums at once (no
// figure of it is read, no row of it left) and its hours are summed again.
func TestSumsErase(t *testing.T) { sumsErase(t, newSumsFixture(t)) }

// TestLiveClusterSumsErase is TestSumsErase on the replicated cluster.
func TestLiveClusterSumsErase(t *testing.T) { sumsErase(t, newClusterSumsFixture(t)) }

func sumsErase(t *testing.T, f *sumsFixture) {
	f.writeHistory()
	f.sum(5)
	got, err := f.s.EraseTenant(context.Background(), "b")
	if err != nil {
		t.Fatal(err)
	}
	var left []store.Rollup
	for _, r := range f.rows {
		if r.Tenant != "b" {
			left = append(left, r)
		}
	}
	if got.Rollups != uint64(len(f.rows)-len(left)) {
		t.Fatalf("erased %+v, want %d rollups", got, len(f.rows)-len(left))
	}
	f.rows = left
	f.check(false)
	if n := f.count("tenant = 'b'"); n != 0 {
		t.Fatalf("%d sums rows of the erased tenant left", n)
	}
	f.sum(5)
	f.check(true)
}

// count counts the sums rows that match where.
func (f *sumsFixture) count(where string) uint64 {
	f.t.Helper()
	var n uint64
	q := fmt.Sprintf("SELECT count() FROM %s WHERE %s", f.s.schema.target(TableSums), where)
	if err := f.s.conn.QueryRow(context.Background(), q).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n
}

// TestSumsRetain: Retain drops the sums of the days it dropped, and when
// it drops the rollups of its own day before it, those hours are summed
// again from what is left.
func TestSumsRetain(t *testing.T) { sumsRetain(t, newSumsFixture(t)) }

// TestLiveClusterSumsRetain is TestSumsRetain on the replicated cluster.
func TestLiveClusterSumsRetain(t *testing.T) { sumsRetain(t, newClusterSumsFixture(t)) }

func sumsRetain(t *testing.T, f *sumsFixture) {
	f.writeHistory()
	day := storetest.T0.Truncate(24 * time.Hour)
	var old []store.Rollup
	for _, m := range []time.Time{day.Add(-47 * time.Hour), day.Add(-20 * time.Hour), day.Add(-18 * time.Hour)} {
		r := storetest.Row(0, "w1", "a", "/old", 7)
		r.Minute = m
		old = append(old, r)
	}
	f.write(old...)
	f.sum(8) // T0's day, the day before, two days before: a round each
	if n := f.count(fmt.Sprintf("kind = %d", sumDay)); n != 2 {
		t.Fatalf("%d daily sums rows, want the 2 days ended", n)
	}
	f.check(true)
	late := old[1] // a newer version into a summed day: the day is stale
	late.Version, late.Count = 3, 70
	f.write(late)
	f.check(false)
	f.sum(1) // the hour, then the day again
	f.check(true)
	if n := f.count(fmt.Sprintf("kind = %d", sumDay)); n != 3 {
		t.Fatalf("%d daily sums rows, want the day before summed again", n)
	}
	before := day.Add(-17 * time.Hour) // inside the day before: all its rows are older
	if _, err := f.s.Retain(context.Background(), before); err != nil {
		t.Fatal(err)
	}
	f.rows = slices.DeleteFunc(f.rows, func(r store.Rollup) bool { return r.Minute.Before(day) })
	f.check(true)
	if n := f.count(fmt.Sprintf("hour < toDateTime(%d)", day.Add(-24*time.Hour).Unix())); n != 0 {
		t.Fatalf("%d sums rows of the dropped day two days before", n)
	}
	from, to := day.Add(-24*time.Hour), day
	u, err := f.s.Usage(context.Background(), from, to, false)
	if err != nil || len(u) != 0 {
		t.Fatalf("usage of the day Retain dropped = %+v, %v; want none", u, err)
	}
	f.sum(7) // the day before's hours until before, again
	if u, err := f.s.Usage(context.Background(), from, to, false); err != nil || len(u) != 0 {
		t.Fatalf("usage of the day Retain dropped, summed again = %+v, %v; want none", u, err)
	}
}

// TestSumsUpgrade: a database written before the sums existed (schema 2)
// has every hour of its rollups summed once the store is upgraded.
func TestSumsUpgrade(t *testing.T) {
	addr := testsvcClickHouse(t)
	db := testDB(t, addr)
	ctx := context.Background()
	v2, err := Open(ctx, addr, db, func(c *config) { c.maxMigration = 2 })
	if err != nil {
		t.Fatal(err)
	}
	f := &sumsFixture{t: t, s: v2}
	f.writeHistory()
	v2.Close()
	s, err := Open(ctx, addr, db, withSumClock(&stepClock{t: storetest.T0.Add(6 * time.Hour)}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f.rec = &recordingConn{Conn: s.conn}
	s.conn, f.s = f.rec, s
	f.check(false)
	f.sum(5)
	f.check(true)
}

// TestSumsMarkWritten: rows inserted beside the store (insertRollups, as
// an INSERT … SELECT of a bulk load is) mark no hour, so nothing sums
// them; MarkWritten marks the hours of a range, which SumHours then sums,
// and the reads give the same figures from the sums.
func TestSumsMarkWritten(t *testing.T) {
	f := newSumsFixture(t)
	var rows []store.Rollup
	for m := 0; m < 120; m += 7 {
		rows = append(rows, storetest.Row(m, "w1", "a", "/r", uint64(10+m)))
	}
	if err := insertRollups(context.Background(), f.s, rows); err != nil {
		t.Fatal(err)
	}
	f.rows = append(f.rows, rows...)
	f.sum(0)
	if err := MarkWritten(context.Background(), f.s, storetest.T0, storetest.T0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	f.sum(2)
	if f.stale(0) || f.stale(1) {
		t.Fatal("a marked hour reads its rollups after SumHours")
	}
	f.check(false)
}
