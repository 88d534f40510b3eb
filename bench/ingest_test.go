package bench

// The report encoding side by side: one window of a process — 1,000
// tenant × route rows, each with count, errors, duration, RU, bytes, rows
// and a latency histogram of 200 observations at ~1% resolution, plus the
// 1,000 hot keys of a Zipf(1.1) stream — encoded as a qtop ingest.Report
// (varints + string table + sparse histograms, zstd) and as the OTLP
// metrics request an OpenTelemetry SDK would export for the same data
// (go.opentelemetry.io/proto/otlp v1.11.1: exponential histograms at scale
// 5, i.e. buckets 2.2% wide, five Sum metrics, two gauges for the keys,
// the row's labels as attributes), compressed with gzip as OTLP/HTTP does
// and with zstd. Run: ./run -bench Report
//
// BenchmarkReportEncode/<format>  time to encode; bytes/report is the body size
// BenchmarkReportDecode/<format>  time to decode that body

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	common "go.opentelemetry.io/proto/otlp/common/v1"
	metrics "go.opentelemetry.io/proto/otlp/metrics/v1"
	resource "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/protobuf/proto"

	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/spacesaving"
	"github.com/qtop-dev/qtop/tenant"
)

var reportStart = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

// reportData is the window both encodings carry: per row its latencies.
type reportRow struct {
	tenant, route string
	tier          tenant.Tier
	kind          report.Kind
	lat           []time.Duration
	errors        uint64
}

func reportWindow() ([]reportRow, []string) {
	rng := rand.New(rand.NewPCG(1, 2))
	routes := []string{"GET /api/v1/invoices/{id}", "POST /api/v1/invoices", "GET /api/v1/reports", "SELECT invoices"}
	var rows []reportRow
	for i := range 250 {
		for j, route := range routes {
			r := reportRow{tenant: fmt.Sprintf("tenant-%05d", i*37), route: route, tier: tenant.T0 + tenant.Tier(i%4), kind: report.Kind(j / 3)}
			for range 200 {
				r.lat = append(r.lat, time.Duration(math.Exp(rng.NormFloat64()*0.8+math.Log(float64(5*time.Millisecond))))+time.Microsecond)
				if rng.IntN(100) == 0 {
					r.errors++
				}
			}
			rows = append(rows, r)
		}
	}
	z := rand.NewZipf(rng, 1.1, 1, 1_000_000)
	keys := make([]string, 200_000)
	for i := range keys {
		keys[i] = fmt.Sprintf("sku:%d", z.Uint64())
	}
	return rows, keys
}

func qtopReport(rows []reportRow, keys []string) *report.Report {
	rep := &report.Report{Source: report.Source{Service: "billing-api", Instance: "8f14e45fceea167a", Host: "billing-api-7c9d6-xk2lp"},
		Seq: 86400, Start: reportStart, End: reportStart.Add(time.Second)}
	for _, r := range rows {
		row := report.Row{Tenant: r.tenant, Route: r.route, Tier: r.tier, Kind: r.kind, Errors: r.errors}
		for _, d := range r.lat {
			row.Count++
			row.Duration += d
			row.Latency.ObserveDuration(d)
		}
		row.RU, row.Bytes, row.Rows = float64(row.Count)*1.7, row.Count*1500, row.Count*3
		rep.Rows = append(rep.Rows, row)
	}
	rep.Keys = spacesaving.New(1000)
	for _, k := range keys {
		rep.Keys.Add(k, 1)
	}
	return rep
}

func str(k, v string) *common.KeyValue {
	return &common.KeyValue{Key: k, Value: &common.AnyValue{Value: &common.AnyValue_StringValue{StringValue: v}}}
}

// otlpRequest builds the OTLP request an SDK would export for the window,
// as a MetricsData, whose encoding is that of ExportMetricsServiceRequest
// (both are field 1, repeated ResourceMetrics) without the gRPC packages.
func otlpRequest(rows []reportRow, keys []string) *metrics.MetricsData {
	start, end := uint64(reportStart.UnixNano()), uint64(reportStart.Add(time.Second).UnixNano())
	const scale = 5
	hist := &metrics.ExponentialHistogram{AggregationTemporality: metrics.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA}
	sums := map[string]*metrics.Sum{}
	names := []string{"errors", "ru", "bytes", "rows", "duration_seconds"}
	for _, n := range names {
		sums[n] = &metrics.Sum{AggregationTemporality: metrics.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA, IsMonotonic: true}
	}
	for _, r := range rows {
		attrs := []*common.KeyValue{str("tenant.id", r.tenant), str("tenant.route", r.route), str("tenant.tier", r.tier.String()), str("kind", r.kind.String())}
		lo, hi := math.MaxInt, math.MinInt
		idx := make([]int, len(r.lat))
		var sum float64
		for i, d := range r.lat {
			s := d.Seconds()
			sum += s
			idx[i] = int(math.Ceil(math.Log2(s)*(1<<scale))) - 1
			lo, hi = min(lo, idx[i]), max(hi, idx[i])
		}
		counts := make([]uint64, hi-lo+1)
		for _, i := range idx {
			counts[i-lo]++
		}
		n := uint64(len(r.lat))
		hist.DataPoints = append(hist.DataPoints, &metrics.ExponentialHistogramDataPoint{
			Attributes: attrs, StartTimeUnixNano: start, TimeUnixNano: end, Count: n, Sum: &sum, Scale: scale,
			Positive: &metrics.ExponentialHistogramDataPoint_Buckets{Offset: int32(lo), BucketCounts: counts},
		})
		for name, v := range map[string]float64{"errors": float64(r.errors), "ru": float64(n) * 1.7, "bytes": float64(n * 1500), "rows": float64(n * 3), "duration_seconds": sum} {
			sums[name].DataPoints = append(sums[name].DataPoints, &metrics.NumberDataPoint{Attributes: attrs, StartTimeUnixNano: start, TimeUnixNano: end,
				Value: &metrics.NumberDataPoint_AsDouble{AsDouble: v}})
		}
	}
	ms := []*metrics.Metric{{Name: "qtop.latency", Unit: "s", Data: &metrics.Metric_ExponentialHistogram{ExponentialHistogram: hist}}}
	for _, n := range names {
		ms = append(ms, &metrics.Metric{Name: "qtop." + n, Data: &metrics.Metric_Sum{Sum: sums[n]}})
	}
	sk := spacesaving.New(1000)
	for _, k := range keys {
		sk.Add(k, 1)
	}
	count, errg := &metrics.Gauge{}, &metrics.Gauge{}
	for _, c := range sk.Top(-1) {
		a := []*common.KeyValue{str("key", c.Key)}
		count.DataPoints = append(count.DataPoints, &metrics.NumberDataPoint{Attributes: a, TimeUnixNano: end, Value: &metrics.NumberDataPoint_AsInt{AsInt: int64(c.Count)}})
		errg.DataPoints = append(errg.DataPoints, &metrics.NumberDataPoint{Attributes: a, TimeUnixNano: end, Value: &metrics.NumberDataPoint_AsInt{AsInt: int64(c.Err)}})
	}
	ms = append(ms, &metrics.Metric{Name: "qtop.key.count", Data: &metrics.Metric_Gauge{Gauge: count}},
		&metrics.Metric{Name: "qtop.key.error", Data: &metrics.Metric_Gauge{Gauge: errg}})
	return &metrics.MetricsData{ResourceMetrics: []*metrics.ResourceMetrics{{
		Resource: &resource.Resource{Attributes: []*common.KeyValue{str("service.name", "billing-api"),
			str("service.instance.id", "8f14e45fceea167a"), str("host.name", "billing-api-7c9d6-xk2lp")}},
		ScopeMetrics: []*metrics.ScopeMetrics{{Metrics: ms}},
	}}}
}

func gzipBytes(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func BenchmarkReportEncode(b *testing.B) {
	rows, keys := reportWindow()
	rep := qtopReport(rows, keys)
	req := otlpRequest(rows, keys)
	zenc, _ := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	defer zenc.Close()
	run := func(name string, enc func() []byte) {
		b.Run(name, func(b *testing.B) {
			var n int
			b.ReportAllocs()
			for b.Loop() {
				n = len(enc())
			}
			b.ReportMetric(float64(n), "bytes/report")
		})
	}
	run("qtop", func() []byte {
		out, err := rep.MarshalBinary()
		if err != nil {
			b.Fatal(err)
		}
		return out
	})
	run("otlp-proto", func() []byte { out, _ := proto.Marshal(req); return out })
	run("otlp-proto-gzip", func() []byte { out, _ := proto.Marshal(req); return gzipBytes(out) })
	run("otlp-proto-zstd", func() []byte { out, _ := proto.Marshal(req); return zenc.EncodeAll(out, nil) })
}

func BenchmarkReportDecode(b *testing.B) {
	rows, keys := reportWindow()
	qbody, err := qtopReport(rows, keys).MarshalBinary()
	if err != nil {
		b.Fatal(err)
	}
	raw, _ := proto.Marshal(otlpRequest(rows, keys))
	gz := gzipBytes(raw)
	b.Run("qtop", func(b *testing.B) {
		var r report.Report
		b.ReportAllocs()
		for b.Loop() {
			if err := r.UnmarshalBinary(qbody); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("otlp-proto-gzip", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			zr, err := gzip.NewReader(bytes.NewReader(gz))
			if err != nil {
				b.Fatal(err)
			}
			body, _ := io.ReadAll(zr)
			var req metrics.MetricsData
			if err := proto.Unmarshal(body, &req); err != nil {
				b.Fatal(err)
			}
		}
	})
}
