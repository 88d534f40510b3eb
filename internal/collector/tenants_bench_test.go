package collector

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/api"
)

// benchPerSecond is the reports a simulated second holds in
// BenchmarkTenants: after each, the collector does its once-a-second work
// (Tick and the autopilot's live view of the top maxTop tenants), as the
// real binary does, so its cost is spread over the reports of a second.
const benchPerSecond = 1000

// BenchmarkTenants measures a report's whole cost — decode, write-ahead
// log, admission, the merge of 100 tenant rows, and its share of the
// once-a-second work — at 2,000, 20,000 and 100,000 distinct tenants
// drawn uniformly (every tenant active, the worst case for their number).
// The collector is first warmed with every tenant, so what is measured is
// the steady state. The ratio of the 100k and 2k cpu-µs/report is the
// issue's "within 1.3×".
//
//	go test -run '^$' -bench BenchmarkTenants -benchtime 3000x -benchmem ./internal/collector/
func BenchmarkTenants(b *testing.B) {
	for _, n := range []int{2_000, 20_000, 100_000} {
		b.Run(fmt.Sprintf("tenants=%d", n), func(b *testing.B) { benchTenants(b, n) })
	}
}

func benchTenants(b *testing.B, tenants int) {
	s, feed, warm := warmTenants(b, tenants, b.N)
	defer s.Shutdown(b.Context())
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := range b.N {
		feed(warm + i)
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/report")
	b.ReportMetric(float64(s.agg.tenants.Load()), "live-tenants")
}

// warmTenants is a collector fed with reports of tenants distinct
// tenants until every one was seen three times (at least two simulated
// seconds); feed(i) feeds report i, and more reports are ready up to
// warm+more.
func warmTenants(b *testing.B, tenants, more int) (s *Server, feed func(int), warm int) {
	const rows = 100
	warm = max(3*tenants/rows, 2*benchPerSecond)
	clk := &clock{t: t0}
	bodies := benchReports(b, warm+more, rows, t0, func(i, j int) string {
		return fmt.Sprintf("tenant-%06d", (uint64(i)*rows+uint64(j))*2654435761%uint64(tenants))
	})
	s = benchServer(b, clk)
	feed = func(i int) {
		if status, _, msg, _, _ := ingest(s, bodies[i]); status != 200 {
			b.Fatalf("refused: %d %s", status, msg)
		}
		if (i+1)%benchPerSecond == 0 {
			now := clk.Add(time.Second)
			s.Tick(b.Context(), now)
			s.Snapshot(now, api.MeasureRU, maxTop) // the autopilot's, every second
		}
	}
	for i := range warm {
		feed(i)
	}
	return s, feed, warm
}

// BenchmarkTenantsSnapshot measures the live view the autopilot reads
// every second (top maxTop tenants by RU, the rest in "other") at 2,000
// and 100,000 distinct tenants, and how long it holds Server.mu, which
// every report takes.
//
//	go test -run '^$' -bench BenchmarkTenantsSnapshot -benchmem ./internal/collector/
func BenchmarkTenantsSnapshot(b *testing.B) {
	for _, n := range []int{2_000, 100_000} {
		b.Run(fmt.Sprintf("tenants=%d", n), func(b *testing.B) {
			s, _, _ := warmTenants(b, n, 0)
			defer s.Shutdown(b.Context())
			now := s.cfg.Now()
			b.ReportAllocs()
			cpu0 := cpuTime()
			b.ResetTimer()
			for range b.N {
				s.mu.Lock()
				clear(s.view.snapCache)
				s.mu.Unlock()
				s.Snapshot(now, api.MeasureRU, maxTop)
			}
			b.StopTimer()
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1e3/float64(b.N), "cpu-ms/op")
		})
	}
}

// BenchmarkTenantsHeap measures what the collector holds for each live
// tenant and each open minute's rollup row (the figures --help gives for
// --max-live-tenants and --max-minute-rows): 1,100 reports of 100 rows
// over 11 seconds, once of 100,000 distinct tenants with the live view
// capped at one tenant (every row in "other": the rows' cost), once of
// 10,000 tenants each in every second (so that every second of its live
// window holds a histogram: a busy tenant), less their rows.
//
//	go test -run '^$' -bench BenchmarkTenantsHeap -benchtime 1x ./internal/collector/
func BenchmarkTenantsHeap(b *testing.B) {
	const reports, rows = 1100, 100
	heap := func(maxTenants, tenants int) (float64, int64, int) {
		clk := &clock{t: t0}
		bodies := benchReports(b, reports, rows, t0, func(i, j int) string { return fmt.Sprintf("tenant-%06d", (i*rows+j)%tenants) })
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		s, err := New(Config{Store: StoreNone, DataDir: b.TempDir(), Writer: "bench", IntakeConfig: IntakeConfig{SourceRate: 1e9},
			Registerer: prometheus.NewRegistry(), Now: clk.Now, LimitsConfig: LimitsConfig{MaxTenants: maxTenants}})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Shutdown(b.Context())
		for i, body := range bodies {
			if status, _, msg, _, _ := ingest(s, body); status != 200 {
				b.Fatalf("refused: %d %s", status, msg)
			}
			if (i+1)%100 == 0 {
				clk.Add(time.Second)
			}
		}
		bodies = nil
		runtime.GC()
		runtime.ReadMemStats(&after)
		n := 0
		for _, m := range s.minutes.byStart {
			n += s.agg.minuteRows(m)
		}
		return float64(int64(after.HeapAlloc) - int64(before.HeapAlloc)), s.agg.tenants.Load(), n
	}
	for range b.N {
		h1, _, n1 := heap(1, 100_000)
		h2, live, n2 := heap(10_000, 10_000)
		perRow := h1 / float64(n1)
		b.ReportMetric(perRow, "B/minute-row")
		b.ReportMetric((h2-perRow*float64(n2))/float64(live), "B/live-tenant")
	}
}
