package store

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/qtop-dev/qtop/histogram"
	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/tenant"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

// batchOf returns n rollups of tenant name with Count 1 each, in distinct minutes.
func batchOf(name string, n int) []Rollup {
	rows := make([]Rollup, n)
	for i := range rows {
		rows[i] = Rollup{
			Minute: t0.Add(time.Duration(i) * time.Minute), Writer: "w1", Version: 1,
			Service: "api", Tenant: name, Route: "GET /x", Tier: tenant.T2, Kind: KindRequest,
			Count: 1, DurationSeconds: 0.25, RU: 2,
		}
	}
	return rows
}

type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type fixture struct {
	mem  *memStore
	sp   *Spool
	reg  *prometheus.Registry
	logs *logBuf
	dir  string
}

func newFixture(t *testing.T, dir string, opts ...SpoolOption) *fixture {
	t.Helper()
	return newFixtureOn(t, newMemStore(), dir, opts...)
}

func newFixtureOn(t *testing.T, mem *memStore, dir string, opts ...SpoolOption) *fixture {
	t.Helper()
	f := &fixture{mem: mem, reg: prometheus.NewRegistry(), logs: &logBuf{}, dir: dir}
	opts = append([]SpoolOption{
		WithRegisterer(f.reg),
		WithLogger(slog.New(slog.NewTextHandler(f.logs, nil))),
		func(c *spoolConfig) { c.manual = true }, // replays only when the test flushes
		WithCloseTimeout(0),
	}, opts...)
	sp, err := NewSpool(f.mem, dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	f.sp = sp
	return f
}

func (f *fixture) dropped(reason string) float64 {
	return testutil.ToFloat64(f.sp.dropped.WithLabelValues(reason))
}

func TestSpoolReplaysWhenStoreReturns(t *testing.T) {
	f := newFixture(t, t.TempDir())
	ctx := context.Background()
	if err := f.sp.WriteRollups(ctx, batchOf("a", 3)); err != nil {
		t.Fatal(err)
	}
	f.mem.down.Store(true)
	for _, name := range []string{"b", "c"} {
		if err := f.sp.WriteRollups(ctx, batchOf(name, 5)); err != nil {
			t.Fatalf("a write while the store is down must spool, got %v", err)
		}
	}
	if err := f.sp.WriteHotKeys(ctx, []HotKey{{Minute: t0, Writer: "w1", Key: "k", Tenant: "b", Count: 9, Err: 1}}); err != nil {
		t.Fatal(err)
	}
	if rows, _ := f.sp.Pending(); rows != 11 {
		t.Fatalf("pending rows = %d, want 11", rows)
	}
	if err := f.sp.Flush(ctx); err == nil {
		t.Fatal("Flush with the store down must say the spool is not empty")
	}
	if !f.sp.Stats().Failing {
		t.Fatal("Stats: not failing while writes fail")
	}
	f.mem.down.Store(false)
	if err := f.sp.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if f.sp.Stats().Failing {
		t.Fatal("Stats: failing after the spool drained")
	}
	got := f.mem.counts()
	if got["a"] != 3 || got["b"] != 5 || got["c"] != 5 || len(f.mem.hot) != 1 {
		t.Fatalf("after replay counts %v, hot keys %d; want a=3 b=5 c=5 and 1 hot key", got, len(f.mem.hot))
	}
	if rows, b := f.sp.Pending(); rows != 0 || b != 0 {
		t.Fatalf("pending after flush = %d rows, %d bytes", rows, b)
	}
	if v := testutil.ToFloat64(f.sp.size); v != 0 {
		t.Fatalf("qtop_collector_spool_bytes = %v after drain", v)
	}
	if v := testutil.ToFloat64(f.sp.replayed); v != 11 {
		t.Fatalf("replayed rows = %v, want 11", v)
	}
	if !strings.Contains(f.logs.String(), "spooling until it answers") {
		t.Fatalf("spooling was not logged:\n%s", f.logs)
	}
	if err := f.sp.Close(); err != nil {
		t.Fatal(err)
	}
	if !f.mem.closed {
		t.Fatal("Close must close the next store")
	}
	if err := f.sp.WriteRollups(ctx, batchOf("d", 1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("write after Close = %v, want ErrClosed", err)
	}
	if err := f.sp.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close = %v, want ErrClosed", err)
	}
}

func TestSpoolBackgroundReplay(t *testing.T) {
	f := newFixture(t, t.TempDir(), WithRetry(time.Millisecond, 10*time.Millisecond), func(c *spoolConfig) { c.manual = false })
	defer f.sp.Close()
	f.mem.down.Store(true)
	if err := f.sp.WriteRollups(context.Background(), batchOf("a", 4)); err != nil {
		t.Fatal(err)
	}
	f.mem.down.Store(false)
	testsvc.Eventually(t, 20*time.Second, "the background replay draining the spool", func() bool {
		rows, _ := f.sp.Pending()
		return rows == 0
	})
	if got := f.mem.counts()["a"]; got != 4 {
		t.Fatalf("count = %d, want 4", got)
	}
}

func TestSpoolOverflowDropsOldest(t *testing.T) {
	dir := t.TempDir()
	one, err := encodeBatch(&batch{kind: kindRollups, rollups: batchOf("x00", 10)})
	if err != nil {
		t.Fatal(err)
	}
	// Room for three batches of this size (names are the same length).
	f := newFixture(t, dir, WithMaxBytes(int64(3*len(one)+len(one)/2)))
	f.mem.down.Store(true)
	ctx := context.Background()
	for i := range 5 {
		if err := f.sp.WriteRollups(ctx, batchOf(fmt.Sprintf("x%02d", i), 10)); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.dropped(DropSpoolFull); got != 20 {
		t.Fatalf("dropped rows = %v, want 20 (the two oldest batches)", got)
	}
	if n := strings.Count(f.logs.String(), "spool: full, oldest batch dropped"); n != 2 {
		t.Fatalf("logged %d drops, want 2:\n%s", n, f.logs)
	}
	// A batch bigger than the whole spool is dropped and counted too.
	if err := f.sp.WriteRollups(ctx, batchOf("huge", 1000)); err != nil {
		t.Fatal(err)
	}
	if got := f.dropped(DropSpoolFull); got != 1020 {
		t.Fatalf("dropped rows = %v, want 1020", got)
	}
	f.mem.down.Store(false)
	if err := f.sp.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(f.mem.tenants(), ","); got != "x02,x03,x04" {
		t.Fatalf("kept tenants %s, want the newest three x02,x03,x04", got)
	}
	if problems, err := testutil.GatherAndLint(f.reg); err != nil || len(problems) > 0 {
		t.Fatal(problems, err)
	}
	f.sp.Close()
}

func TestSpoolSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t, dir)
	f.mem.down.Store(true)
	ctx := context.Background()
	if err := f.sp.WriteRollups(ctx, batchOf("a", 7)); err != nil {
		t.Fatal(err)
	}
	if err := f.sp.WriteAudit(ctx, []Audit{{Time: t0, Who: "ops", Action: "set", PolicyVersion: 3, Rule: `{"tenant":"a"}`}}); err != nil {
		t.Fatal(err)
	}
	if err := f.sp.WriteStatements(ctx, []Statement{{Time: t0, Writer: "w1", PID: 42, Tenant: "a", Query: "select 1", Duration: time.Second}}); err != nil {
		t.Fatal(err)
	}
	f.sp.Close() // the store is down: the batches stay on disk
	// A half-written file from a crash is not a batch.
	os.WriteFile(filepath.Join(dir, "00000000000000000099.spool.tmp"), []byte("QSPL"), 0o600)

	down := newMemStore()
	down.down.Store(true) // so the reopened spool cannot replay before we look
	g := newFixtureOn(t, down, dir)
	defer g.sp.Close()
	if rows, _ := g.sp.Pending(); rows != 9 {
		t.Fatalf("reopened spool holds %d rows, want 9", rows)
	}
	g.mem.down.Store(false)
	if err := g.sp.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := g.mem.counts()["a"]; got != 7 || len(g.mem.audit) != 1 || len(g.mem.stmts) != 1 {
		t.Fatalf("after restart count=%d audit=%d statements=%d; want 7, 1, 1", got, len(g.mem.audit), len(g.mem.stmts))
	}
	if g.mem.stmts[0].Duration != time.Second || g.mem.audit[0].Rule != `{"tenant":"a"}` {
		t.Fatalf("replayed rows differ: %+v %+v", g.mem.stmts[0], g.mem.audit[0])
	}
	if _, err := os.Stat(filepath.Join(dir, "00000000000000000099.spool.tmp")); !os.IsNotExist(err) {
		t.Fatal("a leftover temporary file was not removed")
	}
	// New batches number after the old ones.
	g.mem.down.Store(true)
	g.sp.WriteRollups(ctx, batchOf("b", 1))
	if g.sp.files[0].seq <= 3 {
		t.Fatalf("new batch got sequence %d, not after the reopened ones", g.sp.files[0].seq)
	}
}

func TestSpoolCorruptFileSkipped(t *testing.T) {
	ctx := context.Background()
	for _, damage := range []struct {
		name string
		fn   func([]byte) []byte
	}{
		{"flipped byte", func(b []byte) []byte { b[len(b)-3] ^= 0xff; return b }},
		{"truncated", func(b []byte) []byte { return b[:len(b)/2] }},
		{"bad magic", func(b []byte) []byte { copy(b, "JUNK"); return b }},
		{"empty", func([]byte) []byte { return nil }},
	} {
		t.Run(damage.name, func(t *testing.T) {
			dir := t.TempDir()
			f := newFixture(t, dir)
			f.mem.down.Store(true)
			for _, name := range []string{"a", "b", "c"} {
				f.sp.WriteRollups(ctx, batchOf(name, 2))
			}
			f.sp.Close()
			path := filepath.Join(dir, "00000000000000000002.spool")
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(path, damage.fn(data), 0o600)

			g := newFixture(t, dir)
			defer g.sp.Close()
			if err := g.sp.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(g.mem.tenants(), ","); got != "a,c" {
				t.Fatalf("replayed tenants %s, want a,c", got)
			}
			if _, err := os.Stat(path + ".corrupt"); err != nil {
				t.Fatalf("corrupt file not kept aside: %v", err)
			}
			if !strings.Contains(g.logs.String(), "spool: corrupt file skipped") {
				t.Fatalf("corrupt file not reported:\n%s", g.logs)
			}
		})
	}
}

func TestSpoolCorruptAtReplay(t *testing.T) {
	// A file damaged after it was listed is found at replay, counted, skipped.
	dir := t.TempDir()
	f := newFixture(t, dir)
	defer f.sp.Close()
	f.mem.down.Store(true)
	ctx := context.Background()
	f.sp.WriteRollups(ctx, batchOf("a", 2))
	f.sp.WriteRollups(ctx, batchOf("b", 3))
	path := filepath.Join(dir, "00000000000000000001.spool")
	data, _ := os.ReadFile(path)
	data[headerLen+1] ^= 0x55
	os.WriteFile(path, data, 0o600)
	f.mem.down.Store(false)
	if err := f.sp.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(f.mem.tenants(), ","); got != "b" {
		t.Fatalf("replayed %s, want b", got)
	}
	if got := f.dropped(DropSpoolCorrupt); got != 2 {
		t.Fatalf("corrupt rows counted %v, want 2", got)
	}
}

func TestSpoolRejectsInvalidWithoutSpooling(t *testing.T) {
	f := newFixture(t, t.TempDir())
	defer f.sp.Close()
	ctx := context.Background()
	bad := batchOf("a", 2)
	bad[1].Minute = bad[1].Minute.Add(time.Second)
	cases := map[string]error{
		"rollup":    f.sp.WriteRollups(ctx, bad),
		"kind":      f.sp.WriteRollups(ctx, []Rollup{{Minute: t0, Kind: "bogus"}}),
		"tier":      f.sp.WriteRollups(ctx, []Rollup{{Minute: t0, Kind: KindDB, Tier: 9}}),
		"negative":  f.sp.WriteRollups(ctx, []Rollup{{Minute: t0, Kind: KindDB, RU: -1}}),
		"hot key":   f.sp.WriteHotKeys(ctx, []HotKey{{Minute: t0, Key: "k", Count: 1, Err: 2}}),
		"statement": f.sp.WriteStatements(ctx, []Statement{{}}),
		"audit":     f.sp.WriteAudit(ctx, []Audit{{Time: t0}}),
	}
	for name, err := range cases {
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
	// The store itself rejecting a batch is not a reason to spool it.
	f.mem.reject.Store(true)
	if err := f.sp.WriteRollups(ctx, batchOf("a", 1)); !errors.Is(err, ErrInvalid) {
		t.Errorf("store-rejected write = %v, want ErrInvalid", err)
	}
	if rows, _ := f.sp.Pending(); rows != 0 {
		t.Fatalf("invalid rows were spooled: %d", rows)
	}
	if len(f.mem.counts()) != 0 {
		t.Fatal("part of an invalid batch was written")
	}
}

func TestSpoolReplayRejectedIsDropped(t *testing.T) {
	f := newFixture(t, t.TempDir())
	defer f.sp.Close()
	ctx := context.Background()
	f.mem.down.Store(true)
	f.sp.WriteRollups(ctx, batchOf("a", 4))
	f.mem.down.Store(false)
	f.mem.reject.Store(true)
	if err := f.sp.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := f.dropped(DropRejected); got != 4 {
		t.Fatalf("rejected rows counted %v, want 4", got)
	}
}

func TestSpoolMetricsShareDroppedFamily(t *testing.T) {
	reg := prometheus.NewRegistry()
	mine := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "qtop_collector_dropped_rows_total", Help: "Rows the collector dropped instead of storing, by reason."}, []string{"reason"})
	reg.MustRegister(mine)
	sp, err := NewSpool(newMemStore(), t.TempDir(), WithRegisterer(reg), WithMaxBytes(1))
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	// Every reason's series is there at 0 before any drop.
	if n := testutil.CollectAndCount(mine); n != 3 {
		t.Fatalf("%d series of qtop_collector_dropped_rows_total before any drop, want one per reason (3)", n)
	}
	sp.next.(*memStore).down.Store(true)
	sp.WriteRollups(context.Background(), batchOf("a", 2))
	if got := testutil.ToFloat64(mine.WithLabelValues(DropSpoolFull)); got != 2 {
		t.Fatalf("drops on the collector's family = %v, want 2", got)
	}
	if st := sp.Stats(); st.DroppedRows != 2 || st.PendingRows != 0 {
		t.Fatalf("Stats = %+v, want 2 dropped, 0 pending", st)
	}
	const want = `
# HELP qtop_collector_spool_bytes Bytes waiting in the on-disk spool.
# TYPE qtop_collector_spool_bytes gauge
qtop_collector_spool_bytes 0
`
	if err := testutil.CollectAndCompare(sp.size, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}

func TestNewSpoolOptions(t *testing.T) {
	for name, opts := range map[string][]SpoolOption{
		"zero cap":      {WithMaxBytes(0)},
		"retry order":   {WithRetry(time.Second, time.Millisecond)},
		"write timeout": {WithWriteTimeout(0)},
	} {
		if _, err := NewSpool(newMemStore(), t.TempDir(), opts...); err == nil {
			t.Errorf("%s: NewSpool accepted a bad option", name)
		}
	}
	if _, err := NewSpool(nil, t.TempDir()); err == nil {
		t.Error("NewSpool accepted a nil store")
	}
}

func TestCodecRoundTrip(t *testing.T) {
	var lat histogram.Sparse
	lat.Add(3, 5)
	lat.Add(histogram.NumBuckets-1, 7)
	in := batchOf("a", 3)
	in[0].Latency = lat
	in[1].Latency.Add(9, 1)
	in[1].Latency.Reset() // emptied: memory but no bucket, as none
	in[2].ActiveSessionSeconds, in[2].Bytes, in[2].Rows, in[2].Errors = 1.5, 7, 8, 1
	data, err := encodeBatch(&batch{kind: kindRollups, rollups: in})
	if err != nil {
		t.Fatal(err)
	}
	b, err := decodeBatch(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.rollups) != 3 {
		t.Fatalf("%d rollups, want 3", len(b.rollups))
	}
	for i := range in {
		if g, w := b.rollups[i], in[i]; !g.Latency.Equal(&w.Latency) || !sameRollup(g, w) {
			t.Fatalf("rollup %d: round trip gave %+v, want %+v", i, g, w)
		}
	}
	if b.rollups[1].Latency.Len() != 0 || b.rollups[0].Latency.Count() != 12 {
		t.Fatal("latencies changed")
	}
}

// sameRollup compares every field but Latency.
func sameRollup(a, b Rollup) bool {
	a.Latency, b.Latency = histogram.Sparse{}, histogram.Sparse{}
	a.Minute, b.Minute = a.Minute.UTC(), b.Minute.UTC()
	return reflect.DeepEqual(a, b)
}

// TestSpoolRowHasEveryField: the spool keeps every field of a Rollup (a
// field added to Rollup and not to spoolRow would be lost in a restart).
func TestSpoolRowHasEveryField(t *testing.T) {
	rt, st := reflect.TypeFor[Rollup](), reflect.TypeFor[spoolRow]()
	if rt.NumField() != st.NumField() {
		t.Fatalf("Rollup has %d fields, spoolRow %d", rt.NumField(), st.NumField())
	}
	for i := range rt.NumField() {
		f := rt.Field(i)
		g, ok := st.FieldByName(f.Name)
		if !ok || (f.Name != "Latency" && g.Type != f.Type) {
			t.Errorf("field %s %v: spoolRow has %v", f.Name, f.Type, g.Type)
		}
	}
}

// TestSpoolFormat1Golden: a spool file of rollups written before rollups
// held a ratio.Sparse (Latency a dense []uint64; one row with buckets, one
// with a present but empty histogram, one with none) still reads back,
// the empty histogram as none.
func TestSpoolFormat1Golden(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("testdata", "spool-rollups-format1.hex"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := hex.DecodeString(strings.ReplaceAll(string(text), "\n", ""))
	if err != nil {
		t.Fatal(err)
	}
	b, err := decodeBatch(data)
	if err != nil {
		t.Fatal(err)
	}
	m := time.Date(2026, 3, 1, 12, 34, 0, 0, time.UTC)
	var lat histogram.Sparse
	lat.Add(3, 5)
	lat.Add(400, 2)
	lat.Add(histogram.NumBuckets-1, 7)
	want := []Rollup{
		{Minute: m, Writer: "w1", Version: 3, Service: "api", Tenant: "acme", Route: "GET /a", Tier: tenant.T2, Kind: KindRequest,
			Count: 14, Errors: 1, DurationSeconds: 0.5, RU: 21, Bytes: 1400, Rows: 42, Latency: lat},
		{Minute: m, Writer: "w1", Version: 3, Service: "api", Tenant: "acme", Route: "GET /b", Tier: tenant.T1, Kind: KindDB,
			Count: 2, DurationSeconds: 0.25},
		{Minute: m, Writer: "w1", Version: 1, Tenant: "acme", Kind: KindPG, Count: 60, ActiveSessionSeconds: 12.5},
	}
	if len(b.rollups) != len(want) {
		t.Fatalf("%d rollups, want %d", len(b.rollups), len(want))
	}
	for i := range want {
		if g := b.rollups[i]; !g.Latency.Equal(&want[i].Latency) || !sameRollup(g, want[i]) {
			t.Errorf("rollup %d: %+v, want %+v", i, g, want[i])
		}
	}
	// And the same rows written today read back the same.
	again, err := encodeBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	if b2, err := decodeBatch(again); err != nil || len(b2.rollups) != 3 || !b2.rollups[0].Latency.Equal(&lat) {
		t.Fatalf("re-encoded: %v", err)
	}
}

func FuzzDecodeBatch(f *testing.F) {
	for _, b := range []*batch{
		{kind: kindRollups, rollups: batchOf("a", 2)},
		{kind: kindHotKeys, hotKeys: []HotKey{{Minute: t0, Key: "k", Count: 3}}},
		{kind: kindStatements, statements: []Statement{{Time: t0, Query: "select 1"}}},
		{kind: kindAudit, audit: []Audit{{Time: t0, Who: "a", Action: "b"}}},
	} {
		data, err := encodeBatch(b)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("QSPL"))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := decodeBatch(data)
		if err != nil {
			if !errors.Is(err, ErrSpoolCorrupt) {
				t.Fatalf("error %v is not ErrSpoolCorrupt", err)
			}
			return
		}
		again, err := encodeBatch(b)
		if err != nil {
			t.Fatal(err)
		}
		b2, err := decodeBatch(again)
		if err != nil || b2.rows() != b.rows() || b2.kind != b.kind {
			t.Fatalf("re-encoded batch does not decode the same: %v", err)
		}
	})
}

// TestSpoolConcurrentWriters: writers race each other, the background
// replay and a store that goes down and up; every row arrives once.
func TestSpoolConcurrentWriters(t *testing.T) {
	f := newFixture(t, t.TempDir(), WithRetry(time.Millisecond, 5*time.Millisecond), func(c *spoolConfig) { c.manual = false })
	ctx := context.Background()
	stop := make(chan struct{})
	var flip sync.WaitGroup
	flip.Add(1)
	go func() {
		defer flip.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				f.mem.down.Store(false)
				return
			case <-time.After(time.Millisecond):
				f.mem.down.Store(i%3 == 0)
			}
		}
	}()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				if err := f.sp.WriteRollups(ctx, batchOf(fmt.Sprintf("w%d-%02d", w, i), 3)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	flip.Wait()
	if err := f.sp.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got := f.mem.counts()
	if len(got) != 200 {
		t.Fatalf("%d tenants stored, want 200", len(got))
	}
	for name, c := range got {
		if c != 3 {
			t.Fatalf("tenant %s has count %d, want 3", name, c)
		}
	}
	if err := f.sp.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestSpoolReplaysInOrderAndCloseDrains(t *testing.T) {
	f := newFixture(t, t.TempDir(), WithCloseTimeout(time.Minute))
	ctx := context.Background()
	f.mem.down.Store(true)
	for i := range 5 {
		if err := f.sp.WriteRollups(ctx, batchOf(fmt.Sprintf("b%d", i), 2)); err != nil {
			t.Fatal(err)
		}
	}
	f.mem.down.Store(false)
	if err := f.sp.Close(); err != nil { // Close drains what it can
		t.Fatal(err)
	}
	if got := strings.Join(f.mem.order, ","); got != "b0,b1,b2,b3,b4" {
		t.Fatalf("replay order %s, want b0,b1,b2,b3,b4", got)
	}
	entries, _ := os.ReadDir(f.dir)
	if len(entries) != 0 {
		t.Fatalf("%d files left after a successful drain", len(entries))
	}
}

// hang is a store whose writes block until their context ends.
type hang struct{ *memStore }

func (h hang) WriteRollups(ctx context.Context, _ []Rollup) error {
	<-ctx.Done()
	return ctx.Err()
}

func TestSpoolHungStoreIsDown(t *testing.T) {
	sp, err := NewSpool(hang{newMemStore()}, t.TempDir(), WithWriteTimeout(20*time.Millisecond), func(c *spoolConfig) { c.manual = true })
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	if err := sp.WriteRollups(context.Background(), batchOf("a", 3)); err != nil {
		t.Fatal(err)
	}
	if rows, _ := sp.Pending(); rows != 3 {
		t.Fatalf("a write to a hung store was not spooled (pending %d)", rows)
	}
}
