package collector

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/tenant"
)

// benchReports encodes n reports of rows tenant rows each, every report
// from its own source; tenantOf names the tenant of row j of report i.
func benchReports(b *testing.B, n, rows int, at time.Time, tenantOf func(i, j int) string) [][]byte {
	b.Helper()
	rng := rand.New(rand.NewPCG(1, 1))
	out := make([][]byte, n)
	for i := range n {
		rep := &report.Report{
			Source: report.Source{Service: "api", Instance: fmt.Sprintf("p%d", i), Host: "h"},
			Seq:    1, Start: at, End: at.Add(time.Second),
			Rows: make([]report.Row, rows),
		}
		for j := range rows {
			r := &rep.Rows[j]
			r.Tenant, r.Route, r.Tier, r.Kind = tenantOf(i, j), "GET /items", tenant.T2, report.KindRequest
			r.Count, r.RU, r.Bytes, r.Duration = 10, 12.5, 4096, 100*time.Millisecond
			for range 10 {
				r.Latency.Observe(0.005 * (1 + rng.ExpFloat64()))
			}
		}
		body, err := rep.MarshalBinary()
		if err != nil {
			b.Fatal(err)
		}
		out[i] = body
	}
	return out
}

func benchServer(b *testing.B, clk *clock) *Server {
	b.Helper()
	s, err := New(Config{Store: StoreNone, DataDir: b.TempDir(), Writer: "bench", IntakeConfig: IntakeConfig{SourceRate: 1e9},
		Registerer: prometheus.NewRegistry(), Now: clk.Now})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkMerge measures POST /v1/reports' work without HTTP: decode,
// write-ahead log, dedup, admission and merge of reports of 100 tenant
// rows each, on every core. Reports/s = 1e9 / (ns/op).
func BenchmarkMerge(b *testing.B) {
	clk := &clock{t: t0}
	bodies := benchReports(b, b.N, 100, t0, func(i, j int) string { return fmt.Sprintf("tenant-%d", (i*7+j)%5000) })
	s := benchServer(b, clk)
	defer s.Shutdown(b.Context())
	var next atomic.Int64
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := next.Add(1) - 1
			if status, _, msg, _, _ := ingest(s, bodies[i]); status != 200 {
				b.Fatalf("refused: %d %s", status, msg)
			}
		}
	})
	b.StopTimer()
	cpu := cpuTime() - cpu0
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reports/s")
	// On a machine shared with other work, wall time understates what two
	// idle cores do; CPU time per report does not depend on the neighbours.
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/report")
	b.ReportMetric(2*float64(b.N)/cpu.Seconds(), "reports/s-on-2-cores")
}

// cpuTime is the process's user + system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkMillionTenants feeds 1,000,000 distinct tenants (10,000 reports
// of 100 rows) into one minute and reports the heap the collector holds
// afterwards: it is bounded by MaxTenants and MaxMinuteRows, not by the
// tenants reported.
func BenchmarkMillionTenants(b *testing.B) {
	const reports, rows = 10_000, 100
	for range b.N {
		b.StopTimer()
		clk := &clock{t: t0}
		bodies := benchReports(b, reports, rows, t0, func(i, j int) string { return fmt.Sprintf("t%07d", i*rows+j) })
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		s := benchServer(b, clk)
		b.StartTimer()
		for _, body := range bodies {
			if status, _, msg, _, _ := ingest(s, body); status != 200 {
				b.Fatalf("refused: %d %s", status, msg)
			}
		}
		b.StopTimer()
		bodies = nil
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		s.mu.Lock()
		tracked, minuteRows := s.agg.tenants.Load(), 0
		for _, m := range s.minutes.byStart {
			minuteRows += s.agg.minuteRows(m)
		}
		s.mu.Unlock()
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/(1<<20), "heap-MiB")
		b.ReportMetric(float64(tracked), "live-tenants")
		b.ReportMetric(float64(minuteRows), "minute-rows")
		s.Shutdown(b.Context())
	}
}

var _ store.Store = (*memStore)(nil)
