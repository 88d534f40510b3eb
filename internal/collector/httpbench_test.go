package collector

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/report"
)

// BenchmarkHTTPIngest posts reports of 100 tenant rows over real HTTP on
// loopback (a listening collector handler, keep-alive clients, one source
// per client), as many at once as -cpu × 8, and reports accepted
// reports/s, the share refused and the p99 latency. Run it with -cpu 1,2
// for the GOMAXPROCS ratio; bench/collectorload does the same against the
// real binary.
func BenchmarkHTTPIngest(b *testing.B) {
	s, err := New(Config{Store: StoreNone, DataDir: b.TempDir(), Writer: "bench", IntakeConfig: IntakeConfig{SourceRate: 1e9},
		Registerer: prometheus.NewRegistry()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Shutdown(b.Context())
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	now := time.Now()
	const clients = 16
	bodies := make([][][]byte, clients)
	per := b.N/clients + 1
	for c := range clients {
		all := benchReports(b, per, 100, now, func(i, j int) string { return fmt.Sprintf("tenant-%d", (c*31+i*7+j)%5000) })
		for i := range all { // one source per client, increasing seq
			rep, err := reports.Decode(all[i])
			if err != nil {
				b.Fatal(err)
			}
			rep.Source.Instance, rep.Seq = fmt.Sprintf("c%d", c), uint64(i+1)
			if all[i], err = rep.MarshalBinary(); err != nil {
				b.Fatal(err)
			}
		}
		bodies[c] = all
	}
	tr := &http.Transport{MaxIdleConnsPerHost: clients}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	var ok, refused atomic.Int64
	lat := make([][]time.Duration, clients)
	var next atomic.Int64
	b.ResetTimer()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				if next.Add(1) > int64(b.N) || i >= len(bodies[c]) {
					return
				}
				req, _ := http.NewRequest(http.MethodPost, srv.URL+api.PathReports, bytes.NewReader(bodies[c][i]))
				req.Header.Set("Content-Type", report.ContentType)
				t0 := time.Now()
				resp, err := hc.Do(req)
				if err != nil {
					refused.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				lat[c] = append(lat[c], time.Since(t0))
				if resp.StatusCode == 200 {
					ok.Add(1)
				} else {
					refused.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	b.ReportMetric(float64(ok.Load())/b.Elapsed().Seconds(), "accepted/s")
	b.ReportMetric(100*float64(refused.Load())/float64(max(1, ok.Load()+refused.Load())), "%refused")
	if len(all) > 0 {
		b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
	}
}
