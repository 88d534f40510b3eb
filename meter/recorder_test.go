package meter

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/tenant"
)

func fixedClock(t time.Time) Option { return WithClock(func() time.Time { return t }) }

func rowsByKey(rep *report.Report) map[string]report.Row {
	m := make(map[string]report.Row, len(rep.Rows))
	for _, r := range rep.Rows {
		k := r.Tenant + "|" + r.Route + "|" + r.Kind.String()
		if _, dup := m[k]; dup {
			panic("duplicate row " + k)
		}
		m[k] = r
	}
	return m
}

func TestRecorderSteps(t *testing.T) {
	rec := mustRecorder(fixedClock(t0), WithSource(report.Source{Service: "api", Instance: "i1", Host: "h"}))
	acme := tenant.Tags{Tenant: "acme", Route: "GET /a", Tier: tenant.T1}
	steps := []struct {
		at  time.Duration
		rec *Record
		cut bool
		// expected rows of the window after a cut: key → count, errors, duration, ru, bytes, rows
		want map[string][6]float64
	}{
		{at: 100 * time.Millisecond, rec: &Record{Tags: acme, Duration: 10 * time.Millisecond, RU: 1, Bytes: 100}},
		{at: 200 * time.Millisecond, rec: &Record{Tags: acme, Duration: 30 * time.Millisecond, RU: 2, Err: true}},
		{at: 300 * time.Millisecond, rec: &Record{Tags: acme, Kind: report.KindDB, Duration: 5 * time.Millisecond, Rows: 7}},
		{at: 400 * time.Millisecond, rec: &Record{Tags: tenant.Tags{Route: "GET /a"}, Duration: time.Millisecond}},
		{at: time.Second, cut: true, want: map[string][6]float64{
			"acme|GET /a|request":       {2, 1, 0.040, 3, 100, 0},
			"acme|GET /a|db":            {1, 0, 0.005, 0, 0, 7},
			"(untagged)|GET /a|request": {1, 0, 0.001, 0, 0, 0},
		}},
		{at: 1500 * time.Millisecond, rec: &Record{Tags: acme, Kind: report.KindJob, Duration: time.Second}},
		{at: 2 * time.Second, cut: true, want: map[string][6]float64{
			"acme|GET /a|job": {1, 0, 1, 0, 0, 0},
		}},
		{at: 3 * time.Second, cut: true, want: map[string][6]float64{}},
	}
	prev := t0
	cuts := uint64(0)
	for i, s := range steps {
		now := t0.Add(s.at)
		if s.rec != nil {
			s.rec.Time = now
			rec.Record(*s.rec)
			continue
		}
		rep := rec.Cut(now)
		cuts++
		if !rep.Start.Equal(prev) || !rep.End.Equal(now) || rep.Seq != cuts {
			t.Fatalf("step %d: window [%v, %v) seq %d, want [%v, %v) seq %d", i, rep.Start, rep.End, rep.Seq, prev, now, cuts)
		}
		prev = now
		got := rowsByKey(rep)
		if len(got) != len(s.want) {
			t.Fatalf("step %d: rows %v, want %v", i, got, s.want)
		}
		for k, w := range s.want {
			g, ok := got[k]
			if !ok {
				t.Fatalf("step %d: no row %s in %v", i, k, got)
			}
			have := [6]float64{float64(g.Count), float64(g.Errors), g.Duration.Seconds(), g.RU, float64(g.Bytes), float64(g.Rows)}
			if have != w {
				t.Errorf("step %d: row %s = %v, want %v", i, k, have, w)
			}
			if g.Latency.Count() != g.Count {
				t.Errorf("step %d: row %s histogram holds %d, want %d", i, k, g.Latency.Count(), g.Count)
			}
			if strings.HasPrefix(k, "acme") && g.Tier != tenant.T1 {
				t.Errorf("step %d: row %s tier %v, want T1", i, k, g.Tier)
			}
		}
		if rep.Source != (report.Source{Service: "api", Instance: "i1", Host: "h"}) {
			t.Errorf("source %+v", rep.Source)
		}
	}
}

func TestRecorderSeqAndClockBack(t *testing.T) {
	rec := mustRecorder(fixedClock(t0))
	r1 := rec.Cut(t0.Add(time.Second))
	rec.Record(Record{Tags: tenant.Tags{Tenant: "a"}, Duration: time.Millisecond})
	r2 := rec.Cut(t0.Add(500 * time.Millisecond)) // the clock went back
	r3 := rec.Cut(t0.Add(2 * time.Second))
	if r1.Seq != 1 || r2.Seq != 2 || r3.Seq != 3 {
		t.Errorf("seqs %d %d %d, want 1 2 3", r1.Seq, r2.Seq, r3.Seq)
	}
	if !r2.Start.Equal(r1.End) || !r2.End.Equal(r2.Start) {
		t.Errorf("after a clock jump back: window [%v, %v), want empty at %v", r2.Start, r2.End, r1.End)
	}
	if len(r2.Rows) != 1 || r2.Rows[0].Count != 1 {
		t.Errorf("record lost when the clock went back: %+v", r2.Rows)
	}
	if !r3.Start.Equal(r2.End) {
		t.Errorf("windows not contiguous: %v then %v", r2.End, r3.Start)
	}
	if _, err := r2.MarshalBinary(); err != nil {
		t.Errorf("empty window does not encode: %v", err)
	}
}

// TestRecorderRefusedNotTimed: work the process refused (a throttle's
// 429) counts as a request, not in the latency: a throttled tenant's
// instant refusals do not make its service look fast.
func TestRecorderRefusedNotTimed(t *testing.T) {
	rec := mustRecorder(fixedClock(t0))
	tags := tenant.Tags{Tenant: "bigcorp", Route: "GET /r"}
	rec.Record(Record{Tags: tags, Duration: 80 * time.Millisecond})
	for range 99 {
		rec.Record(Record{Tags: tags, Duration: 50 * time.Microsecond, Refused: true})
	}
	r := rec.Cut(t0.Add(time.Second))
	if len(r.Rows) != 1 {
		t.Fatalf("rows %+v", r.Rows)
	}
	row := r.Rows[0]
	if row.Count != 100 || row.Latency.Count() != 1 || row.Duration != 80*time.Millisecond || row.Latency.Quantile(0.5) < 0.07 {
		t.Fatalf("count %d, timed %d, duration %v, p50 %v: want 100 counted, 1 timed at 80ms", row.Count, row.Latency.Count(), row.Duration, row.Latency.Quantile(0.5))
	}
}

// TestRecorderManyTenants feeds a million tenants (Zipf-like: tenant i
// gets a weight ∝ 1/i) into a recorder that tracks 64 of them, and checks
// the Space-Saving guarantees: exact totals, no tracked row above its true
// value, the heaviest tenants tracked.
func TestRecorderManyTenants(t *testing.T) {
	const tenants = 200_000
	rec := mustRecorder(fixedClock(t0), WithMaxTenants(64), WithShards(4))
	trueDur := make(map[string]time.Duration)
	var total time.Duration
	var count uint64
	emit := func(name string, d time.Duration) {
		rec.Record(Record{Tags: tenant.Tags{Tenant: name, Route: "r"}, Duration: d})
		trueDur[name] += d
		total += d
		count++
	}
	for i := 1; i <= tenants; i++ {
		name := fmt.Sprintf("t%06d", i)
		emit(name, time.Duration(10_000_000/i)*time.Microsecond/10+time.Microsecond)
		if i <= 10 { // the heavy ones come back
			for range 20 {
				emit(name, 50*time.Millisecond)
			}
		}
	}
	rep := rec.Cut(t0.Add(time.Second))
	var sumDur time.Duration
	var sumCount uint64
	tracked := map[string]bool{}
	for _, r := range rep.Rows {
		sumDur += r.Duration
		sumCount += r.Count
		if r.Tenant == report.OtherTenant {
			continue
		}
		tracked[r.Tenant] = true
		if r.Duration > trueDur[r.Tenant] {
			t.Errorf("tenant %s: %v recorded, only %v true", r.Tenant, r.Duration, trueDur[r.Tenant])
		}
	}
	if sumDur != total || sumCount != count {
		t.Errorf("totals %v / %d, want exactly %v / %d", sumDur, sumCount, total, count)
	}
	if len(tracked) > 64+4 { // per-shard rounding
		t.Errorf("%d tenants tracked, want at most 68", len(tracked))
	}
	for i := 1; i <= 10; i++ {
		if name := fmt.Sprintf("t%06d", i); !tracked[name] {
			t.Errorf("heavy tenant %s not tracked", name)
		}
	}
	if len(rep.Rows) > 80 {
		t.Errorf("%d rows", len(rep.Rows))
	}
}

func TestRecorderRouteAndRowLimits(t *testing.T) {
	rec := mustRecorder(fixedClock(t0), WithMaxRoutes(3), WithMaxRows(10), WithShards(1))
	for i := range 10 {
		rec.Record(Record{Tags: tenant.Tags{Tenant: "a", Route: fmt.Sprint("r", i)}, Duration: time.Millisecond})
	}
	for i := range 20 {
		rec.Record(Record{Tags: tenant.Tags{Tenant: fmt.Sprint("t", i), Route: "x"}, Duration: time.Millisecond})
	}
	rep := rec.Cut(t0.Add(time.Second))
	got := rowsByKey(rep)
	if r := got["a|other|request"]; r.Count != 7 {
		t.Errorf("a's other route: %d records, want 7 (routes beyond 3): %v", r.Count, got)
	}
	var n uint64
	for _, r := range rep.Rows {
		n += r.Count
	}
	if n != 30 {
		t.Errorf("%d records in rows, want 30", n)
	}
	// 4 rows for a, then 6 tenants reach the limit of 10; the records of
	// the other 14 go to other/other, the one row created beyond the limit.
	if len(rep.Rows) != 11 {
		t.Errorf("%d rows, want 11: %v", len(rep.Rows), got)
	}
	if r := got["other|other|request"]; r.Count != 14 {
		t.Errorf("other/other: %d records, want 14", r.Count)
	}
}

// A tenant named like the overflow row is a tenant of its own: counted
// under its stand-in, never in the overflow row, which keeps exactly the
// tenants beyond the limit.
func TestRecorderTenantNamedOther(t *testing.T) {
	rec := mustRecorder(fixedClock(t0), WithMaxTenants(2), WithShards(1))
	for range 5 {
		rec.Record(Record{Tags: tenant.Tags{Tenant: report.OtherTenant, Route: "r"}, Duration: time.Second})
	}
	rec.Record(Record{Tags: tenant.Tags{Tenant: "a", Route: "r"}, Duration: time.Second})
	for i := range 3 {
		rec.Record(Record{Tags: tenant.Tags{Tenant: fmt.Sprint("small", i), Route: "r"}, Duration: time.Microsecond})
	}
	got := rowsByKey(rec.Cut(t0.Add(time.Second)))
	want := map[string]uint64{tenant.Escape(report.OtherTenant) + "|r|request": 5, "a|r|request": 1, "other|r|request": 3}
	if len(got) != len(want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k].Count != n {
			t.Errorf("row %s: %d records, want %d", k, got[k].Count, n)
		}
	}
}

// TestRecorderRouteNamedOther: a route really named like the overflow
// route, passed straight to the recorder, is a route of its own under its
// stand-in (tenant.EscapeValue); one an entry point already escaped is
// the same row, not escaped twice; the overflow route keeps exactly the
// routes beyond the tenant's limit.
func TestRecorderRouteNamedOther(t *testing.T) {
	rec := mustRecorder(fixedClock(t0), WithMaxRoutes(2), WithShards(1))
	own := tenant.EscapeValue(report.OtherRoute)
	for range 3 {
		rec.Record(Record{Tags: tenant.Tags{Tenant: "a", Route: report.OtherRoute}})
	}
	rec.Record(Record{Tags: tenant.Tags{Tenant: "a", Route: own}}) // escaped at the door
	rec.Record(Record{Tags: tenant.Tags{Tenant: "a", Route: "r"}})
	for i := range 4 {
		rec.Record(Record{Tags: tenant.Tags{Tenant: "a", Route: fmt.Sprint("beyond", i)}})
	}
	got := rowsByKey(rec.Cut(t0.Add(time.Second)))
	want := map[string]uint64{"a|" + own + "|request": 4, "a|r|request": 1, "a|other|request": 4}
	if len(got) != len(want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k].Count != n {
			t.Errorf("row %s: %d records, want %d", k, got[k].Count, n)
		}
	}
}

func TestRecorderInvalid(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	rec := mustRecorder(fixedClock(t0), WithRegisterer(reg))
	long := strings.Repeat("x", tenant.MaxKeyLen+1)
	rec.Record(Record{Tags: tenant.Tags{Tenant: long, Route: "r"}})
	rec.Record(Record{Tags: tenant.Tags{Tenant: "a", Route: long}})
	rec.Record(Record{Tags: tenant.Tags{Tenant: "a", Route: "r", Key: long}})
	rec.Record(Record{Tags: tenant.Tags{Tenant: "a", Route: "r"}, Kind: 9})
	rec.Record(Record{Tags: tenant.Tags{Tenant: report.OtherTenant, Route: "r"}, Err: true})
	rep := rec.Cut(t0.Add(time.Second))
	got := rowsByKey(rep)
	stand, _ := tenant.Substitute(long)
	route, _ := tenant.SubstituteRoute(long)
	want := map[string]uint64{stand + "|r|request": 1, "a|" + route + "|request": 1, "a|r|request": 2, tenant.Escape(report.OtherTenant) + "|r|request": 1}
	if len(got) != len(want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k].Count != n {
			t.Errorf("row %s: %d, want %d", k, got[k].Count, n)
		}
	}
	if rep.Keys != nil {
		t.Errorf("an over-long key was kept")
	}
	if _, err := rep.MarshalBinary(); err != nil {
		t.Fatal(err)
	}
	expected := `
# HELP qtop_ingest_records_invalid_total Records with a tenant, route or key above its length limit, or an unknown kind (the tenant counted under its stand-in, tenant.Substitute; the route under its own, tenant.SubstituteRoute; the key dropped).
# TYPE qtop_ingest_records_invalid_total counter
qtop_ingest_records_invalid_total 4
# HELP qtop_ingest_records_total Records added to the recorder, by kind.
# TYPE qtop_ingest_records_total counter
qtop_ingest_records_total{kind="db"} 0
qtop_ingest_records_total{kind="job"} 0
qtop_ingest_records_total{kind="request"} 5
# HELP qtop_ingest_record_errors_total Records that reported a failed unit of work.
# TYPE qtop_ingest_record_errors_total counter
qtop_ingest_record_errors_total 1
# HELP qtop_ingest_windows_total Windows cut by the recorder.
# TYPE qtop_ingest_windows_total counter
qtop_ingest_windows_total 1
`
	if err := testutil.CollectAndCompare(rec.metrics, strings.NewReader(expected),
		"qtop_ingest_records_invalid_total", "qtop_ingest_records_total", "qtop_ingest_record_errors_total", "qtop_ingest_windows_total"); err != nil {
		t.Error(err)
	}
	if probs, err := testutil.CollectAndLint(rec.metrics); err != nil || len(probs) > 0 {
		t.Errorf("lint: %v %v", err, probs)
	}
}

func TestRecorderKeys(t *testing.T) {
	rec := mustRecorder(fixedClock(t0), WithKeyCapacity(8))
	for i := range 100 {
		rec.Record(Record{Tags: tenant.Tags{Tenant: "acme", Key: "sku:1"}})
		if i%10 == 0 {
			rec.Record(Record{Tags: tenant.Tags{Tenant: "globex", Key: "cart:2"}})
		}
		rec.Record(Record{Tags: tenant.Tags{Tenant: "initech", Key: fmt.Sprint("cold:", i)}})
	}
	rep := rec.Cut(t0.Add(time.Second))
	top := rep.Keys.Top(2)
	if len(top) != 2 || top[0].Key != "sku:1" || top[0].Count-top[0].Err > 100 || top[0].Count < 100 || top[1].Key != "cart:2" {
		t.Fatalf("top keys %+v", top)
	}
	if rep.KeyTenants["sku:1"] != "acme" || rep.KeyTenants["cart:2"] != "globex" {
		t.Errorf("key tenants %v", rep.KeyTenants)
	}
	b, err := rep.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	back, err := report.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Rows) != len(rep.Rows) || back.Seq != rep.Seq || !reflect.DeepEqual(back.KeyTenants, rep.KeyTenants) {
		t.Errorf("decoded %+v, want %+v", back, rep)
	}
}

// TestRecorderConcurrent records from several goroutines while cutting,
// and checks that every record lands in exactly one window.
func TestRecorderConcurrent(t *testing.T) {
	rec := mustRecorder(fixedClock(t0), WithMaxTenants(16))
	const workers, each = 4, 5000
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				rec.Record(Record{Tags: tenant.Tags{Tenant: fmt.Sprint("t", (w*each+i)%50), Route: "r", Key: "k"}, Duration: time.Microsecond})
			}
		}()
	}
	var total uint64
	var dur time.Duration
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	now := t0
	for stop := false; !stop; {
		select {
		case <-done:
			stop = true
		default:
		}
		now = now.Add(time.Millisecond)
		for _, r := range rec.Cut(now).Rows {
			total += r.Count
			dur += r.Duration
		}
	}
	if total != workers*each || dur != workers*each*time.Microsecond {
		t.Errorf("%d records, %v, want %d, %v", total, dur, workers*each, workers*each*time.Microsecond)
	}
}

func TestRecorderNoAllocs(t *testing.T) {
	rec := mustRecorder(fixedClock(t0))
	recs := benchRecords(50, 4)
	for _, r := range recs {
		rec.Record(r)
	}
	rec.Cut(t0.Add(time.Second))
	for _, r := range recs { // second window: everything is recycled
		rec.Record(r)
	}
	rec.Cut(t0.Add(2 * time.Second))
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		rec.Record(recs[i%len(recs)])
		i++
	})
	if allocs != 0 {
		t.Errorf("Record allocates %v times per call", allocs)
	}
}

func TestRecorderOptions(t *testing.T) {
	for name, o := range map[string]RecorderOption{
		"tenants": WithMaxTenants(0),
		"routes":  WithMaxRoutes(0),
		"rows":    WithMaxRows(report.MaxRows),
		"keys":    WithKeyCapacity(0),
		"shards":  WithShards(-1),
		"clock":   WithClock(nil),
		"source":  WithSource(report.Source{Service: strings.Repeat("s", report.MaxStringLen+1)}),
	} {
		t.Run(name, func(t *testing.T) {
			if r, err := NewRecorder(o); !errors.Is(err, ErrInvalid) || r != nil {
				t.Errorf("NewRecorder = %v, %v; want ErrInvalid", r, err)
			}
		})
	}
	rec := mustRecorder()
	if s := rec.Source(); s.Service == "" || s.Instance == "" {
		t.Errorf("default source %+v", s)
	}
	if a, b := mustRecorder().Source().Instance, mustRecorder().Source().Instance; a == b {
		t.Errorf("two recorders share the instance %q", a)
	}
}

func benchRecords(tenants, routes int) []Record {
	var out []Record
	for i := range tenants {
		for j := range routes {
			out = append(out, Record{
				Time:     t0,
				Tags:     tenant.Tags{Tenant: fmt.Sprintf("tenant-%04d", i), Route: fmt.Sprintf("GET /api/v1/r%d", j), Tier: tenant.T2},
				Kind:     report.Kind(j % 2),
				Duration: time.Duration(1+i*j) * 100 * time.Microsecond,
				Rows:     3, Bytes: 512, RU: 1.5,
			})
		}
	}
	return out
}

func BenchmarkRecord(b *testing.B) {
	rec := mustRecorder(fixedClock(t0))
	recs := benchRecords(100, 5)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		rec.Record(recs[i%len(recs)])
		i++
	}
}

// BenchmarkRecordParallel: goroutines record the same 500 tenant × route
// combinations (shared), or, in pairs, each its own 500 (disjoint).
func BenchmarkRecordParallel(b *testing.B) {
	for _, disjoint := range []bool{false, true} {
		b.Run(map[bool]string{false: "shared", true: "disjoint"}[disjoint], func(b *testing.B) {
			rec := mustRecorder(fixedClock(t0))
			all := benchRecords(200, 5)
			var mu sync.Mutex
			next := 0
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				mu.Lock()
				g := next
				next++
				mu.Unlock()
				recs := all[:500]
				if disjoint {
					recs = all[(g%2)*500 : (g%2+1)*500]
				}
				i := g * 7919
				for pb.Next() {
					rec.Record(recs[i%len(recs)])
					i++
				}
			})
		})
	}
}

func BenchmarkRecordKey(b *testing.B) {
	rec := mustRecorder(fixedClock(t0))
	recs := benchRecords(100, 5)
	for i := range recs {
		recs[i].Tags.Key = fmt.Sprint("key:", i%97)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		rec.Record(recs[i%len(recs)])
		i++
	}
}

func TestRecorderTenantMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	rec := mustRecorder(fixedClock(t0), WithRegisterer(reg), WithTopTenants(2))
	for i, name := range []string{"a", "b", "c", "d"} {
		for range i + 1 {
			rec.Record(Record{Tags: tenant.Tags{Tenant: name}, Duration: time.Second})
			rec.Record(Record{Tags: tenant.Tags{Tenant: name}, Kind: report.KindDB, Duration: time.Second, Bytes: 10})
		}
	}
	rec.Cut(t0.Add(time.Second))
	// The two heaviest tenants become members; the others are "other".
	expected := `
# HELP qtop_ingest_tenant_requests_total Requests and jobs recorded, by tenant (top N and "other").
# TYPE qtop_ingest_tenant_requests_total counter
qtop_ingest_tenant_requests_total{tenant="c"} 3
qtop_ingest_tenant_requests_total{tenant="d"} 4
qtop_ingest_tenant_requests_total{tenant="other"} 3
# HELP qtop_ingest_tenant_db_seconds_total Database time recorded, by tenant (top N and "other").
# TYPE qtop_ingest_tenant_db_seconds_total counter
qtop_ingest_tenant_db_seconds_total{tenant="c"} 3
qtop_ingest_tenant_db_seconds_total{tenant="d"} 4
qtop_ingest_tenant_db_seconds_total{tenant="other"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expected),
		"qtop_ingest_tenant_requests_total", "qtop_ingest_tenant_db_seconds_total"); err != nil {
		t.Error(err)
	}
	if probs, err := testutil.GatherAndLint(reg); err != nil || len(probs) > 0 {
		t.Errorf("lint: %v %v", err, probs)
	}
}

// TestRecorderCutIntoReuse: the reporter cuts into one Report again and
// again; nothing of a window may leak into the next.
func TestRecorderCutIntoReuse(t *testing.T) {
	rec := mustRecorder(fixedClock(t0))
	var rep report.Report
	for i := range 3 {
		rec.Record(Record{Tags: tenant.Tags{Tenant: "a", Route: "r", Key: "k1"}, Duration: time.Millisecond})
		rec.Record(Record{Tags: tenant.Tags{Tenant: "b", Route: "r"}, Duration: time.Second})
		rec.cutInto(t0.Add(time.Duration(2*i+1)*time.Second), &rep)
		got := rowsByKey(&rep)
		ra, rb := got["a|r|request"], got["b|r|request"]
		if len(got) != 2 || ra.Latency.Count() != 1 || rb.Latency.Count() != 1 || rb.Duration != time.Second {
			t.Fatalf("cut %d: %v", i, got)
		}
		if rep.Keys == nil || rep.KeyTenants["k1"] != "a" {
			t.Fatalf("cut %d: keys %v %v", i, rep.Keys, rep.KeyTenants)
		}
		rec.Record(Record{Tags: tenant.Tags{Tenant: "c", Route: "r"}, Duration: time.Millisecond})
		rec.cutInto(t0.Add(time.Duration(2*i+2)*time.Second), &rep)
		if len(rep.Rows) != 1 || rep.Rows[0].Tenant != "c" || rep.Rows[0].Latency.Count() != 1 || rep.Keys != nil || rep.KeyTenants != nil {
			t.Fatalf("cut %d: stale data: %+v keys %v %v", i, rep.Rows, rep.Keys, rep.KeyTenants)
		}
	}
}

// BenchmarkRecordChurn: a million distinct tenants, each seen once, into
// the default sketch of 512: nearly every record goes through the
// filtered admission to "other".
func BenchmarkRecordChurn(b *testing.B) {
	rec := mustRecorder(fixedClock(t0))
	names := make([]string, 1<<20)
	for i := range names {
		names[i] = fmt.Sprintf("tenant-%07d", i)
	}
	r := Record{Tags: tenant.Tags{Route: "GET /a"}, Duration: time.Millisecond}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r.Tags.Tenant = names[i&(len(names)-1)]
		rec.Record(r)
		i++
	}
}

// mustRecorder is the constructor for tests whose options are known to be valid.
func mustRecorder(opts ...RecorderOption) *Recorder {
	r, err := NewRecorder(opts...)
	if err != nil {
		panic(err)
	}
	return r
}

// BenchmarkCut measures closing a window of 1,000 rows, into a new
// report.Report (Cut) and into the reused one of the reporter (cutInto).
func BenchmarkCut(b *testing.B) {
	for _, reuse := range []bool{false, true} {
		b.Run(map[bool]string{false: "new", true: "reuse"}[reuse], func(b *testing.B) {
			rec := mustRecorder(fixedClock(t0))
			recs := benchRecords(250, 4)
			now := t0
			var rep report.Report
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				for _, r := range recs {
					rec.Record(r)
				}
				b.StartTimer()
				now = now.Add(time.Second)
				if reuse {
					rec.cutInto(now, &rep)
				} else {
					rec.Cut(now)
				}
			}
		})
	}
}

var t0 = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
