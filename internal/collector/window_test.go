package collector

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/report"
)

// TestLiveRatesSteadyFleet: a steady synthetic fleet — 20 processes, each
// reporting once a second 1,000 requests (RU 2 each, 5 ms of DB time per
// request) for tenant acme — is 20,000 req/s, 40,000 RU/s, 100 s/s of DB
// time and 20 reports/s. The live window used to keep 10 one-second slots
// of which only 9 were complete and divide by 10 (18,000 req/s, 18
// reports/s). /v1/live (which qtop shows as is) must be within 1%, and
// the /metrics counters exact.
func TestLiveRatesSteadyFleet(t *testing.T) {
	const procs, perReport, seconds = 20, 1000, 25
	f := newFixture(t)
	defer f.stop()
	start := t0.Truncate(time.Second)
	seq := make([]uint64, procs)
	for sec := range seconds {
		for p := range procs {
			// Reports of one second arrive spread over it.
			now := start.Add(time.Duration(sec)*time.Second + time.Duration(p)*time.Second/procs)
			f.clk.Set(now)
			seq[p]++
			rep := &report.Report{Source: report.Source{Service: "api", Instance: fmt.Sprintf("p%d", p), Host: "h"}, Seq: seq[p],
				Start: now.Add(-time.Second), End: now,
				Rows: []report.Row{
					{Tenant: "acme", Route: "GET /x", Kind: report.KindRequest, Count: perReport, RU: 2 * perReport, Duration: perReport * 10 * time.Millisecond},
					{Tenant: "acme", Route: "GET /x", Kind: report.KindDB, Count: perReport, Duration: perReport * 5 * time.Millisecond},
				}}
			rep.Rows[0].Latency.ObserveDuration(10 * time.Millisecond)
			body, err := rep.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			if status := f.ingest(body); status != 200 {
				t.Fatalf("refused: %d", status)
			}
		}
	}
	// Read while the fleet keeps reporting: the current second already
	// holds reports (it is never counted, and must not displace a
	// complete second).
	f.clk.Set(start.Add(seconds*time.Second - 10*time.Millisecond))
	w := httptest.NewRecorder()
	f.s.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, api.PathLive, nil))
	var snap api.Snapshot
	if err := json.Unmarshal(w.Body.Bytes(), &snap); err != nil {
		t.Fatal(err)
	}
	within := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 0.01*want {
			t.Errorf("%s = %v, want %v ±1%%", what, got, want)
		}
	}
	if len(snap.Tenants) == 0 || snap.Tenants[0].Tenant != "acme" {
		t.Fatalf("tenants %+v", snap.Tenants)
	}
	acme := snap.Tenants[0]
	within("acme req/s", acme.ReqPerSec, procs*perReport)
	within("acme RU/s", acme.RUPerSec, 2*procs*perReport)
	within("acme DB load", acme.DBLoad, procs*perReport*0.005)
	if len(acme.Routes) == 0 {
		t.Fatal("no routes")
	}
	within("route req/s", acme.Routes[0].ReqPerSec, procs*perReport)
	if len(snap.Services) != 1 {
		t.Fatalf("services %+v", snap.Services)
	}
	within("service req/s", snap.Services[0].ReqPerSec, procs*perReport)
	within("reports/s", snap.Collector.ReportsPerSec, procs)
	// /metrics counts totals; a scraper's rate() over them is exact.
	if got := testutil.ToFloat64(f.s.met.accepted); got != procs*seconds {
		t.Errorf("reports counted %v, want %d", got, procs*seconds)
	}
}

// TestConcurrentIngestExact: reports of many sources ingested at once,
// each also retried, with the write-ahead log written outside the merge
// lock, are each counted exactly once.
func TestConcurrentIngestExact(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	const workers, each = 8, 40
	bodies := make([][][]byte, workers)
	for w := range workers {
		for k := range each {
			rep := &report.Report{Source: report.Source{Service: "api", Instance: fmt.Sprintf("w%d", w)}, Seq: uint64(k + 1),
				Start: f.clk.Now().Add(-time.Second), End: f.clk.Now(),
				Rows: []report.Row{{Tenant: "acme", Route: "r", Kind: report.KindRequest, Count: 3}}}
			b, err := rep.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			bodies[w] = append(bodies[w], b)
		}
	}
	f.s.cfg.SourceRate = 1e9
	done := make(chan struct{})
	for w := range workers {
		go func() {
			defer func() { done <- struct{}{} }()
			for _, b := range bodies[w] {
				// Retried as a reporter would, a bounded number of times.
				st, tries := 0, 0
				for ; st != 200 && tries < 1000; tries++ {
					st, _, _, _, _ = ingest(f.s, b)
				}
				if st != 200 {
					t.Errorf("a report refused %d times, last with %d", tries, st)
					return
				}
				ingest(f.s, b) // the retry of a report whose reply was lost
			}
		}()
	}
	for range workers {
		<-done
	}
	if got := testutil.ToFloat64(f.s.met.accepted); got != workers*each {
		t.Fatalf("accepted %v, want %d", got, workers*each)
	}
	f.s.Tick(context.Background(), t0.Truncate(time.Minute).Add(time.Minute+DefaultGrace+time.Second))
	if got := f.mem.sum("acme", "", count); got != 3*workers*each {
		t.Fatalf("stored %v requests, want %d", got, 3*workers*each)
	}
}
