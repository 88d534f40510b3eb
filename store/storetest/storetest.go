// Package storetest is the conformance suite every store.Store passes: the
// same writes give the same Usage and History on each, retried writes never
// double a figure, and the newest version of a row wins.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/histogram"
	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/tenant"
)

// Opener returns a fresh, empty store for one test; the suite closes it.
type Opener func(t *testing.T) store.Store

// T0 is the first minute the suite writes.
var T0 = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

// Run runs the whole suite against the stores open returns.
func Run(t *testing.T, open Opener) {
	for _, c := range []struct {
		name string
		fn   func(*testing.T, store.Store)
	}{
		{"RetriedBatchNeverDoubles", retriedBatch},
		{"LatestVersionWins", latestVersion},
		{"SumsAcrossWriters", acrossWriters},
		{"UsageKindsAndRoutes", usageKinds},
		{"RangeIsHalfOpen", halfOpen},
		{"History", history},
		{"RandomRetriesMatchReference", randomRetries},
		{"ConcurrentWriters", concurrent},
		{"OtherTablesIdempotent", otherTables},
		{"OddNames", oddNames},
		{"InvalidRowsRejected", invalidRows},
		{"Closed", closed},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := open(t)
			defer s.Close()
			c.fn(t, s)
		})
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Row builds a request rollup.
func Row(minute int, writer, tenantName, route string, count uint64) store.Rollup {
	return store.Rollup{
		Minute: T0.Add(time.Duration(minute) * time.Minute), Writer: writer, Version: 1, Service: "api",
		Tenant: tenantName, Route: route, Tier: tenant.T2, Kind: store.KindRequest,
		Count: count, Errors: count / 10, DurationSeconds: float64(count) * 0.01, RU: float64(count) * 1.5,
		Bytes: count * 100, Rows: count * 3,
	}
}

// ExpectUsage folds rows the way every store must: the newest version of
// each key, then summed.
func ExpectUsage(rows []store.Rollup, from, to time.Time, byRoute bool) []store.Usage {
	type k struct{ tenant, route string }
	acc := map[k]*store.Usage{}
	for _, r := range Latest(rows) {
		if r.Minute.Before(from) || !r.Minute.Before(to) {
			continue
		}
		key := k{r.Tenant, ""}
		if byRoute {
			key.route = r.Route
		}
		u := acc[key]
		if u == nil {
			u = &store.Usage{Tenant: key.tenant, Route: key.route}
			acc[key] = u
		}
		switch r.Kind {
		case store.KindRequest, store.KindJob:
			u.Requests += r.Count
			u.Errors += r.Errors
			u.DurationSeconds += r.DurationSeconds
		case store.KindDB:
			u.DBSeconds += r.DurationSeconds
		case store.KindPG:
			u.DBSeconds += r.ActiveSessionSeconds - r.DurationSeconds
		}
		u.RU += r.RU
		u.Bytes += r.Bytes
	}
	out := make([]store.Usage, 0, len(acc))
	for _, u := range acc {
		out = append(out, *u)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Tenant != out[j].Tenant {
			return out[i].Tenant < out[j].Tenant
		}
		return out[i].Route < out[j].Route
	})
	return out
}

// ExpectHistory folds rows into History's per-minute rows for one tenant.
func ExpectHistory(rows []store.Rollup, tenantName string, from, to time.Time) []store.Rollup {
	acc := map[int64]*store.Rollup{}
	for _, r := range Latest(rows) {
		if r.Tenant != tenantName || r.Minute.Before(from) || !r.Minute.Before(to) {
			continue
		}
		h := acc[r.Minute.Unix()]
		if h == nil {
			h = &store.Rollup{Minute: r.Minute.UTC(), Tenant: tenantName}
			acc[r.Minute.Unix()] = h
		}
		h.Tier = max(h.Tier, r.Tier)
		if r.Kind == store.KindRequest || r.Kind == store.KindJob {
			h.Count += r.Count
			h.Errors += r.Errors
		}
		switch r.Kind { // the minute's database time, as Usage's DBSeconds
		case store.KindDB:
			h.DurationSeconds += r.DurationSeconds
		case store.KindPG:
			h.DurationSeconds += r.ActiveSessionSeconds - r.DurationSeconds
		}
		h.RU += r.RU
		h.Bytes += r.Bytes
		h.Rows += r.Rows
		h.ActiveSessionSeconds += r.ActiveSessionSeconds
		if r.Kind == store.KindRequest || r.Kind == store.KindJob {
			h.Latency.Merge(&r.Latency)
		}
	}
	out := make([]store.Rollup, 0, len(acc))
	for _, h := range acc {
		out = append(out, *h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Minute.Before(out[j].Minute) })
	return out
}

// Latest keeps the newest version of each rollup key.
func Latest(rows []store.Rollup) []store.Rollup {
	type k struct {
		m                                    int64
		writer, service, tenant, route, kind string
	}
	at := map[k]int{}
	var out []store.Rollup
	for _, r := range rows {
		key := k{r.Minute.Unix(), r.Writer, r.Service, r.Tenant, r.Route, r.Kind}
		if i, ok := at[key]; ok {
			if r.Version >= out[i].Version {
				out[i] = r
			}
			continue
		}
		at[key] = len(out)
		out = append(out, r)
	}
	return out
}

func near(a, b float64) bool {
	return math.Abs(a-b) <= 1e-9*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

// CheckUsage fails t unless got equals want (floats to 1e-9 relative).
func CheckUsage(t *testing.T, got, want []store.Usage) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("usage has %d rows, want %d:\n got %+v\nwant %+v", len(got), len(want), got, want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Tenant != w.Tenant || g.Route != w.Route || g.Requests != w.Requests || g.Errors != w.Errors || g.Bytes != w.Bytes ||
			!near(g.DurationSeconds, w.DurationSeconds) || !near(g.DBSeconds, w.DBSeconds) || !near(g.RU, w.RU) {
			t.Fatalf("usage row %d:\n got %+v\nwant %+v", i, g, w)
		}
	}
}

// CheckHistory fails t unless got equals want.
func CheckHistory(t *testing.T, got, want []store.Rollup) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("history has %d minutes, want %d:\n got %+v\nwant %+v", len(got), len(want), got, want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if !g.Minute.Equal(w.Minute) || g.Tenant != w.Tenant || g.Tier != w.Tier || g.Count != w.Count || g.Errors != w.Errors ||
			g.Bytes != w.Bytes || g.Rows != w.Rows || g.Writer != "" || g.Kind != "" || g.Route != "" || g.Version != 0 ||
			!near(g.DurationSeconds, w.DurationSeconds) || !near(g.RU, w.RU) || !near(g.ActiveSessionSeconds, w.ActiveSessionSeconds) {
			t.Fatalf("history minute %d:\n got %+v\nwant %+v", i, strip(g), strip(w))
		}
		if !g.Latency.Equal(&w.Latency) {
			t.Fatalf("history minute %d: latency %v, want %v", i, Pairs(&g.Latency), Pairs(&w.Latency))
		}
	}
}

func strip(r store.Rollup) store.Rollup { r.Latency = histogram.Sparse{}; return r }

// Pairs lists the non-empty buckets of a histogram as [index, count].
func Pairs(s *histogram.Sparse) [][2]uint64 {
	var out [][2]uint64
	s.Buckets(func(i int, c uint64) { out = append(out, [2]uint64{uint64(i), c}) })
	return out
}

func checkAll(t *testing.T, s store.Store, written []store.Rollup) {
	t.Helper()
	from, to := T0.Add(-24*time.Hour), T0.Add(24*time.Hour)
	for _, byRoute := range []bool{false, true} {
		got, err := s.Usage(ctx(t), from, to, byRoute)
		must(t, err)
		CheckUsage(t, got, ExpectUsage(written, from, to, byRoute))
	}
	tenants := map[string]bool{}
	for _, r := range written {
		tenants[r.Tenant] = true
	}
	for name := range tenants {
		got, err := s.History(ctx(t), name, from, to)
		must(t, err)
		CheckHistory(t, got, ExpectHistory(written, name, from, to))
	}
}

func retriedBatch(t *testing.T, s store.Store) {
	batch := []store.Rollup{Row(0, "w1", "acme", "GET /a", 10), Row(0, "w1", "acme", "GET /b", 5), Row(1, "w1", "zeta", "GET /a", 7)}
	for range 3 {
		must(t, s.WriteRollups(ctx(t), batch))
	}
	got, err := s.Usage(ctx(t), T0, T0.Add(time.Hour), false)
	must(t, err)
	CheckUsage(t, got, []store.Usage{
		{Tenant: "acme", Requests: 15, Errors: 1, DurationSeconds: 0.15, RU: 22.5, Bytes: 1500},
		{Tenant: "zeta", Requests: 7, DurationSeconds: 0.07, RU: 10.5, Bytes: 700},
	})
	// A batch that carries the same row twice counts it once too.
	must(t, s.WriteRollups(ctx(t), []store.Rollup{Row(5, "w1", "dup", "/", 4), Row(5, "w1", "dup", "/", 4)}))
	checkAll(t, s, append(batch, Row(5, "w1", "dup", "/", 4)))
}

func latestVersion(t *testing.T, s store.Store) {
	v1 := Row(0, "w1", "acme", "/", 10)
	v2 := v1
	v2.Version, v2.Count, v2.RU = 2, 25, 99
	must(t, s.WriteRollups(ctx(t), []store.Rollup{v1}))
	must(t, s.WriteRollups(ctx(t), []store.Rollup{v2}))
	must(t, s.WriteRollups(ctx(t), []store.Rollup{v1})) // a late replay of the old version
	got, err := s.Usage(ctx(t), T0, T0.Add(time.Minute), false)
	must(t, err)
	if len(got) != 1 || got[0].Requests != 25 || got[0].RU != 99 {
		t.Fatalf("usage %+v, want the version-2 figures (25 requests, 99 RU)", got)
	}
	// Both versions in one batch: the newer wins whatever the order.
	a, b := Row(3, "w1", "beta", "/", 1), Row(3, "w1", "beta", "/", 2)
	b.Version = 7
	must(t, s.WriteRollups(ctx(t), []store.Rollup{b, a}))
	checkAll(t, s, []store.Rollup{v1, v2, v1, b, a})
}

func acrossWriters(t *testing.T, s store.Store) {
	rows := []store.Rollup{Row(0, "w1", "acme", "/", 10), Row(0, "w2", "acme", "/", 20), Row(0, "w3", "acme", "/", 30)}
	other := Row(0, "w1", "acme", "/", 10)
	other.Service = "worker" // another service of the same writer is another row
	rows = append(rows, other)
	must(t, s.WriteRollups(ctx(t), rows))
	must(t, s.WriteRollups(ctx(t), rows[1:2]))
	got, err := s.Usage(ctx(t), T0, T0.Add(time.Minute), false)
	must(t, err)
	if len(got) != 1 || got[0].Requests != 70 {
		t.Fatalf("usage %+v, want 70 requests summed over 3 writers and 2 services", got)
	}
	checkAll(t, s, rows)
}

func usageKinds(t *testing.T, s store.Store) {
	req := Row(0, "w1", "acme", "GET /a", 10)
	job := Row(0, "w1", "acme", "job:import", 2)
	job.Kind, job.DurationSeconds = store.KindJob, 30
	db := Row(0, "w1", "acme", "GET /a", 40)
	db.Kind, db.DurationSeconds = store.KindDB, 1.25
	// The sampler's sessions, 1.25 s of which the statement row counts.
	pg := store.Rollup{Minute: T0, Writer: "w1", Tenant: "acme", Route: "GET /a", Kind: store.KindPG, Count: 60,
		ActiveSessionSeconds: 45, DurationSeconds: 1.25}
	untagged := Row(0, "w1", "", "", 3)
	rows := []store.Rollup{req, job, db, pg, untagged}
	must(t, s.WriteRollups(ctx(t), rows))
	got, err := s.Usage(ctx(t), T0, T0.Add(time.Minute), false)
	must(t, err)
	CheckUsage(t, got, []store.Usage{
		{Tenant: "", Requests: 3, DurationSeconds: 0.03, RU: 4.5, Bytes: 300},
		{Tenant: "acme", Requests: 12, Errors: 1, DurationSeconds: 30.1, DBSeconds: 45, RU: 78, Bytes: 5200},
	})
	checkAll(t, s, rows)
}

func halfOpen(t *testing.T, s store.Store) {
	rows := []store.Rollup{Row(-1, "w1", "a", "/", 1), Row(0, "w1", "a", "/", 2), Row(9, "w1", "a", "/", 4), Row(10, "w1", "a", "/", 8)}
	must(t, s.WriteRollups(ctx(t), rows))
	got, err := s.Usage(ctx(t), T0, T0.Add(10*time.Minute), false)
	must(t, err)
	if len(got) != 1 || got[0].Requests != 6 {
		t.Fatalf("usage of [T0, T0+10m) = %+v, want 6 requests (minutes 0 and 9)", got)
	}
	h, err := s.History(ctx(t), "a", T0, T0.Add(10*time.Minute))
	must(t, err)
	CheckHistory(t, h, ExpectHistory(rows, "a", T0, T0.Add(10*time.Minute)))
	if u, err := s.Usage(ctx(t), T0.Add(time.Hour), T0.Add(2*time.Hour), true); err != nil || len(u) != 0 {
		t.Fatalf("usage of an empty range = %+v, %v", u, err)
	}
	if h, err := s.History(ctx(t), "nobody", T0, T0.Add(time.Hour)); err != nil || len(h) != 0 {
		t.Fatalf("history of an unknown tenant = %+v, %v", h, err)
	}
}

// Latency is a histogram of count pairs[i+1] in bucket pairs[i].
func Latency(pairs ...uint64) histogram.Sparse {
	var l histogram.Sparse
	for i := 0; i+1 < len(pairs); i += 2 {
		l.Add(int(pairs[i]), pairs[i+1])
	}
	return l
}

func history(t *testing.T, s store.Store) {
	a := Row(0, "w1", "acme", "/a", 10)
	a.Latency = Latency(3, 5, 700, 2)
	b := Row(0, "w2", "acme", "/b", 4)
	b.Latency, b.Tier = Latency(3, 1, histogram.NumBuckets-1, 9), tenant.T3
	c := Row(1, "w1", "acme", "/a", 6)
	c.Latency = Latency(8, 1)
	c.Latency.Reset() // emptied, with its memory: no latency
	d := store.Rollup{Minute: T0.Add(time.Minute), Writer: "w1", Tenant: "acme", Kind: store.KindPG, Count: 60, ActiveSessionSeconds: 12.5}
	e := Row(0, "w1", "other", "/a", 100)
	// Statements are not requests: their count and errors stay out of
	// History's, as out of Usage's.
	f := store.Rollup{Minute: T0, Writer: "w1", Tenant: "acme", Route: "/a", Kind: store.KindDB, Count: 7, Errors: 2, DurationSeconds: 0.5}
	rows := []store.Rollup{a, b, c, d, e, f}
	must(t, s.WriteRollups(ctx(t), rows))
	must(t, s.WriteRollups(ctx(t), rows[:2]))
	got, err := s.History(ctx(t), "acme", T0, T0.Add(time.Hour))
	must(t, err)
	want := ExpectHistory(rows, "acme", T0, T0.Add(time.Hour))
	CheckHistory(t, got, want)
	sum := Latency(3, 6, 700, 2, histogram.NumBuckets-1, 9)
	if len(got) != 2 || got[0].Count != 14 || !got[0].Latency.Equal(&sum) || got[0].Tier != tenant.T3 || got[1].Latency.Len() != 0 || got[1].ActiveSessionSeconds != 12.5 {
		t.Fatalf("history %+v %+v", strip(got[0]), strip(got[1]))
	}
}

// randomRetries writes a random workload the way an at-least-once writer
// does (re-sent batches, newer versions of rows already written, old
// batches replayed late) and compares every read with the reference fold.
// A key's version only grows, so the same key at the same version is
// always the same row, as the contract requires.
func randomRetries(t *testing.T, s store.Store) {
	rng := rand.New(rand.NewPCG(1, 2))
	type key struct {
		minute                int
		writer, tenant, route string
		kind                  string
	}
	versions := map[key]uint64{}
	var written []store.Rollup
	var batches [][]store.Rollup
	kinds := []string{store.KindRequest, store.KindDB, store.KindJob, store.KindPG}
	for range 30 {
		n := 1 + rng.IntN(60)
		batch := make([]store.Rollup, 0, n)
		seen := map[key]bool{}
		for range n {
			k := key{rng.IntN(20), fmt.Sprintf("w%d", rng.IntN(3)), fmt.Sprintf("t%02d", rng.IntN(12)), fmt.Sprintf("/r%d", rng.IntN(4)), kinds[rng.IntN(len(kinds))]}
			if seen[k] {
				continue
			}
			seen[k] = true
			versions[k]++
			r := Row(k.minute, k.writer, k.tenant, k.route, uint64(rng.IntN(1000)))
			r.Kind, r.Version = k.kind, versions[k]
			r.Tier = tenant.Tier(rng.IntN(5))
			r.ActiveSessionSeconds = float64(rng.IntN(600)) / 8
			if r.Kind == store.KindPG { // the part statement rows count: at most the sessions' time
				r.DurationSeconds = min(r.DurationSeconds, r.ActiveSessionSeconds)
			}
			if rng.IntN(3) == 0 {
				r.Latency = Latency(uint64(rng.IntN(histogram.NumBuckets)), uint64(1+rng.IntN(50)), uint64(rng.IntN(histogram.NumBuckets)), uint64(1+rng.IntN(50)))
			}
			batch = append(batch, r)
		}
		must(t, s.WriteRollups(ctx(t), batch))
		written = append(written, batch...)
		batches = append(batches, batch)
		switch rng.IntN(4) {
		case 0: // the same batch retried
			must(t, s.WriteRollups(ctx(t), batch))
		case 1: // an old batch replayed late
			must(t, s.WriteRollups(ctx(t), batches[rng.IntN(len(batches))]))
		}
	}
	checkAll(t, s, written)
}

func concurrent(t *testing.T, s store.Store) {
	var wg sync.WaitGroup
	var all []store.Rollup
	var mu sync.Mutex
	errs := make(chan error, 8)
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				batch := []store.Rollup{Row(i, fmt.Sprintf("w%d", w), "acme", "/", uint64(w+1)), Row(i, fmt.Sprintf("w%d", w), "beta", "/", 2)}
				if err := s.WriteRollups(context.Background(), batch); err != nil {
					errs <- err
					return
				}
				if _, err := s.Usage(context.Background(), T0, T0.Add(time.Hour), false); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				all = append(all, batch...)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	checkAll(t, s, all)
}

func otherTables(t *testing.T, s store.Store) {
	hk := []store.HotKey{{Minute: T0, Writer: "w1", Version: 1, Key: "acme:sku-1", Tenant: "acme", Count: 900, Err: 12}}
	st := []store.Statement{{Time: T0.Add(1500 * time.Millisecond), Writer: "w1", PID: 4242, Tenant: "acme", Route: "GET /a",
		Application: "api", Query: "SELECT 1 /*tenant='acme'*/", State: "active", WaitEventType: "Lock", WaitEvent: "relation", Duration: 3 * time.Second}}
	au := []store.Audit{{Time: T0, Who: "ops@example.com", Action: "set", PolicyVersion: 4, Rule: `{"tenant":"acme","throttle":0.5}`}}
	for range 2 {
		must(t, s.WriteHotKeys(ctx(t), hk))
		must(t, s.WriteStatements(ctx(t), st))
		must(t, s.WriteAudit(ctx(t), au))
	}
	for _, err := range []error{s.WriteHotKeys(ctx(t), nil), s.WriteStatements(ctx(t), nil), s.WriteAudit(ctx(t), nil), s.WriteRollups(ctx(t), nil)} {
		must(t, err)
	}
	must(t, s.Ping(ctx(t)))
}

// oddNames: tenant and route values are data, never SQL.
func oddNames(t *testing.T, s store.Store) {
	names := []string{`it's`, `back\slash`, `"quoted"`, "ünïcødé 租户", "semi;colon --", "nul\x00byte", "new\nline"}
	var rows []store.Rollup
	for i, n := range names {
		rows = append(rows, Row(i, "w'1", n, "GET /a?b='c'", uint64(i+1)))
	}
	must(t, s.WriteRollups(ctx(t), rows))
	must(t, s.WriteHotKeys(ctx(t), []store.HotKey{{Minute: T0, Writer: "w'1", Key: `k'; DROP TABLE x; --`, Tenant: `it's`, Count: 2}}))
	checkAll(t, s, rows)
}

func invalidRows(t *testing.T, s store.Store) {
	good := Row(0, "w1", "acme", "/", 1)
	bad := Row(1, "w1", "acme", "/", 1)
	bad.Tier = 9
	for name, err := range map[string]error{
		"one bad row":    s.WriteRollups(ctx(t), []store.Rollup{good, bad}),
		"kind":           s.WriteRollups(ctx(t), []store.Rollup{{Minute: T0, Kind: "nope"}}),
		"minute":         s.WriteRollups(ctx(t), []store.Rollup{{Minute: T0.Add(time.Second), Kind: store.KindDB}}),
		"hot key bound":  s.WriteHotKeys(ctx(t), []store.HotKey{{Minute: T0, Key: "k", Count: 1, Err: 5}}),
		"statement time": s.WriteStatements(ctx(t), []store.Statement{{}}),
		"audit who":      s.WriteAudit(ctx(t), []store.Audit{{Time: T0}}),
	} {
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: err = %v, want store.ErrInvalid", name, err)
		}
	}
	got, err := s.Usage(ctx(t), T0, T0.Add(time.Hour), false)
	must(t, err)
	if len(got) != 0 {
		t.Fatalf("part of an invalid batch was stored: %+v", got)
	}
}

func closed(t *testing.T, s store.Store) {
	must(t, s.Close())
	if err := s.WriteRollups(context.Background(), []store.Rollup{Row(0, "w", "a", "/", 1)}); !errors.Is(err, store.ErrClosed) {
		t.Errorf("write after Close = %v, want ErrClosed", err)
	}
	if _, err := s.Usage(context.Background(), T0, T0.Add(time.Hour), false); !errors.Is(err, store.ErrClosed) {
		t.Errorf("usage after Close = %v, want ErrClosed", err)
	}
	if err := s.Close(); !errors.Is(err, store.ErrClosed) {
		t.Errorf("second Close = %v, want ErrClosed", err)
	}
}

// Counter returns the value of a store's counter with the label table
// (qtop_collector_store_rows_written_total, ..._write_errors_total) as
// gathered from reg; 0 when there is no such series.
func Counter(t testing.TB, reg prometheus.Gatherer, name, table string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "table" && l.GetValue() == table {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
