package collector

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/qtop-dev/qtop/meter"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/tenant"
)

// The OTLP benchmarks and their counterpart in qtop's own format measure the
// same load: per batch 1,000 units of work of 50 tenants, a third of them
// requests (SERVER spans with nine attributes) and two thirds PostgreSQL
// statements (CLIENT spans with six, tenant by trace), as an SDK exports
// them. Figures: bench/README.md.

const benchSpans = 1000

// BenchmarkOTLPIngest is POST /v1/traces (protobuf, 1,000 spans) through
// the collector's handler, and the receiver's once-a-second merge of the
// windows through Ingest, amortised (a flush every 10 requests).
func BenchmarkOTLPIngest(b *testing.B) {
	clk := &clock{t: t0}
	s := benchServer(b, clk)
	defer s.Shutdown(b.Context())
	h := s.Handler()
	body, err := proto.Marshal(otlpRequest("shop", benchSpans, 50, t0, 1))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	cpu0 := cpuTime()
	n := 0
	for b.Loop() {
		if w := postTraces(b, h, body, ""); w.Code != http.StatusOK {
			b.Fatalf("status %d: %s", w.Code, w.Body.String())
		}
		if n++; n%10 == 0 {
			s.otlp.recv.Flush(clk.Add(time.Second))
		}
	}
	s.otlp.recv.Flush(clk.Add(time.Second))
	cpu := cpuTime() - cpu0
	spans := float64(n * benchSpans)
	b.ReportMetric(spans/b.Elapsed().Seconds(), "spans/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/spans, "cpu-ns/span")
}

// BenchmarkOwnFormatIngest is the same load in qtop's own format: the
// application's Recorder takes the 1,000 records, its reporter cuts and
// encodes the window, and the collector merges it (Ingest). cpu-ns/record
// counts all three; collector-ns/record only the collector's part.
func BenchmarkOwnFormatIngest(b *testing.B) {
	clk := &clock{t: t0}
	s := benchServer(b, clk)
	defer s.Shutdown(b.Context())
	rec, err := meter.NewRecorder(meter.WithSource(report.Source{Service: "shop", Instance: "inst-1", Host: "pod-1"}), meter.WithClock(clk.Now))
	if err != nil {
		b.Fatal(err)
	}
	records := make([]meter.Record, benchSpans)
	for i := range records {
		tr := i / 3
		r := &records[i]
		r.Tags = tenant.Tags{Tenant: fmt.Sprintf("tenant-%d", tr%50), Tier: tenant.T2}
		if i%3 == 0 {
			r.Kind, r.Duration, r.Tags.Route = report.KindRequest, 20*time.Millisecond, "/items/:id"
		} else {
			r.Kind, r.Duration, r.Tags.Route = report.KindDB, 5*time.Millisecond, "SELECT items"
		}
	}
	b.ReportAllocs()
	var collector time.Duration
	cpu0 := cpuTime()
	n := 0
	var seq uint64
	for b.Loop() {
		for _, r := range records {
			rec.Record(r)
		}
		rep := rec.Cut(clk.Add(time.Second))
		seq++
		rep.Seq = seq
		body, err := rep.MarshalBinary()
		if err != nil {
			b.Fatal(err)
		}
		c0 := cpuTime()
		if status, _, msg, _, _ := ingest(s, body); status != 200 {
			b.Fatalf("refused: %d %s", status, msg)
		}
		collector += cpuTime() - c0
		n++
	}
	cpu := cpuTime() - cpu0
	records_ := float64(n * benchSpans)
	b.ReportMetric(records_/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/records_, "cpu-ns/record")
	b.ReportMetric(float64(collector.Nanoseconds())/records_, "collector-ns/record")
}
