package report

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/qtop-dev/qtop/spacesaving"
	"github.com/qtop-dev/qtop/tenant"
)

// benchReport is a window of 1,000 tenant × route rows (250 tenants × 4
// routes, each row with 200 lognormal latencies) and a 1,000-key sketch
// fed a Zipf stream.
func benchReport() *Report { return benchReportOf(250) }

// benchReportOf is benchReport with tenants × 4 rows.
func benchReportOf(tenants int) *Report {
	rng := rand.New(rand.NewPCG(1, 2))
	r := &Report{Source: Source{Service: "billing-api", Instance: "8f14e45fceea167a", Host: "billing-api-7c9d6-xk2lp"},
		Seq: 86400, Start: t0, End: t0.Add(time.Second)}
	routes := []string{"GET /api/v1/invoices/{id}", "POST /api/v1/invoices", "GET /api/v1/reports", "SELECT invoices"}
	for i := range tenants {
		for j, route := range routes {
			row := Row{Tenant: fmt.Sprintf("tenant-%05d", i*37), Route: route, Tier: tenant.T0 + tenant.Tier(i%4), Kind: Kind(j / 3)}
			for range 200 {
				d := time.Duration(math.Exp(rng.NormFloat64()*0.8+math.Log(float64(5*time.Millisecond)))) + time.Microsecond
				row.Count++
				row.Duration += d
				row.Latency.ObserveDuration(d)
				if rng.IntN(100) == 0 {
					row.Errors++
				}
			}
			row.RU = float64(row.Count) * 1.7
			row.Bytes = row.Count * 1500
			row.Rows = row.Count * 3
			r.Rows = append(r.Rows, row)
		}
	}
	r.Keys = spacesaving.New(1000)
	r.KeyTenants = map[string]string{}
	z := rand.NewZipf(rng, 1.1, 1, 1_000_000)
	for range 200_000 {
		k := z.Uint64()
		key := fmt.Sprintf("sku:%d", k)
		r.Keys.Add(key, 1)
		if k < 100 {
			r.KeyTenants[key] = fmt.Sprintf("tenant-%05d", (k%250)*37)
		}
	}
	r.Enforcement.Admitted = [4]uint64{1000, 5000, 20000, 9000}
	r.Enforcement.PriceMultiplier = [4]float64{1, 1, 1.5, 3}
	return r
}

// BenchmarkReportEncode encodes the benchmark report with the codec of
// the format (zstd) and, for comparison, without compression, with gzip,
// and as JSON (histograms as sparse bucket lists) with gzip.
func BenchmarkReportEncode(b *testing.B) {
	rep := benchReport()
	raw, err := rep.appendRaw(nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("zstd", func(b *testing.B) {
		var n int
		b.ReportAllocs()
		for b.Loop() {
			out, err := rep.MarshalBinary()
			if err != nil {
				b.Fatal(err)
			}
			n = len(out)
		}
		b.ReportMetric(float64(n), "bytes/report")
	})
	b.Run("none", func(b *testing.B) {
		var n int
		b.ReportAllocs()
		for b.Loop() {
			out, _ := rep.marshalUncompressed()
			n = len(out)
		}
		b.ReportMetric(float64(n), "bytes/report")
	})
	for _, lvl := range []zstd.EncoderLevel{zstd.SpeedFastest, zstd.SpeedBetterCompression} {
		b.Run("zstd-"+lvl.String(), func(b *testing.B) {
			enc, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(lvl), zstd.WithEncoderConcurrency(1))
			defer enc.Close()
			var n int
			b.ReportAllocs()
			for b.Loop() {
				r2, _ := rep.appendRaw(nil)
				n = len(enc.EncodeAll(r2, nil))
			}
			b.ReportMetric(float64(n), "bytes/report")
		})
	}
	b.Run("gzip", func(b *testing.B) {
		var n int
		var buf bytes.Buffer
		b.ReportAllocs()
		for b.Loop() {
			r2, _ := rep.appendRaw(nil)
			buf.Reset()
			w := gzip.NewWriter(&buf)
			w.Write(r2)
			w.Close()
			n = buf.Len()
		}
		b.ReportMetric(float64(n), "bytes/report")
	})
	b.Run("json+gzip", func(b *testing.B) {
		type jrow struct {
			Tenant, Route string
			Tier, Kind    uint8
			Count, Errors uint64
			Duration      int64
			RU            float64
			Bytes, Rows   uint64
			Buckets       [][2]uint64
		}
		var n int
		var buf bytes.Buffer
		b.ReportAllocs()
		for b.Loop() {
			rows := make([]jrow, len(rep.Rows))
			for i, r := range rep.Rows {
				rows[i] = jrow{r.Tenant, r.Route, uint8(r.Tier), uint8(r.Kind), r.Count, r.Errors, int64(r.Duration), r.RU, r.Bytes, r.Rows, nil}
				r.Latency.Buckets(func(j int, c uint64) { rows[i].Buckets = append(rows[i].Buckets, [2]uint64{uint64(j), c}) })
			}
			buf.Reset()
			w := gzip.NewWriter(&buf)
			json.NewEncoder(w).Encode(map[string]any{"source": rep.Source, "rows": rows, "keys": rep.Keys.Top(-1), "key_tenants": rep.KeyTenants})
			w.Close()
			n = buf.Len()
		}
		b.ReportMetric(float64(n), "bytes/report")
	})
	b.ReportMetric(float64(len(raw)), "raw-bytes")
}

// BenchmarkReportDecode decodes the benchmark report, into a new Report
// and into a reused one (as a collector worker would).
func BenchmarkReportDecode(b *testing.B) { benchDecode(b, benchReport()) }

// BenchmarkReportDecode100 decodes a report of 100 rows (25 tenants × 4
// routes, ~25 latency buckets each), as a collector receives them from a
// process of a busy fleet: into a new Report (what a decoded report
// keeps is B/op) and into a reused one.
func BenchmarkReportDecode100(b *testing.B) { benchDecode(b, benchReportOf(25)) }

func benchDecode(b *testing.B, rep *Report) {
	body, err := rep.MarshalBinary()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("new", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if _, err := Decode(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("reuse", func(b *testing.B) {
		var r Report
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if err := r.UnmarshalBinary(body); err != nil {
				b.Fatal(err)
			}
		}
	})
}
