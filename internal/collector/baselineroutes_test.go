package collector

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/incident"
)

// mixedSecond is second sec of ten steady tenants; "mixed" answers GET
// /products in 2 ms and GET /reports in 50 ms, and its p95 follows its
// mix (50 ms every fourth second, else 3 ms). k multiplies every
// latency of mixed (k > 1: a real slowdown).
func mixedSecond(now time.Time, sec int, k float64) api.Snapshot {
	s := api.Snapshot{Time: now, Window: 10 * time.Second, Collector: api.CollectorStatus{Uptime: time.Duration(sec+1) * time.Second}}
	p95 := 0.003
	if sec%4 == 0 {
		p95 = 0.050
	}
	s.Tenants = append(s.Tenants, api.TenantRow{Tenant: "mixed", RUPerSec: 10, P95Seconds: k * p95, History: make([]float64, api.HistoryLen),
		Routes: []api.RouteRow{{Route: "GET /products", RUPerSec: 8, ReqPerSec: 8, P95Seconds: k * 0.002}, {Route: "GET /reports", RUPerSec: 2, ReqPerSec: 2, P95Seconds: k * 0.050}}})
	for i := range 9 {
		s.Tenants = append(s.Tenants, api.TenantRow{Tenant: fmt.Sprintf("t%02d", i), RUPerSec: 10, P95Seconds: 0.02, History: make([]float64, api.HistoryLen)})
	}
	return s
}

// TestBaselineRoutesServed: the book learns each tenant's routes' p95
// and serves them on the route rows; a qtop started at any time, judging
// on the served baselines, does not take a tenant whose mix of fast and
// slow routes moved for a victim (it did: its tenant baseline is the
// minutes' mean p95, 15 ms, and a second with a few more reports is at
// 50), and does when its routes are slower. The routes are saved with
// the book, read back, and erased with their tenant.
func TestBaselineRoutesServed(t *testing.T) {
	file := filepath.Join(t.TempDir(), baselinesFile)
	b := newBaselineBook()
	if err := b.load(file); err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 12, 5, 1, 0, 0, 0, time.UTC)
	const learnt = 12 * 60
	for sec := range learnt {
		now := start.Add(time.Duration(sec) * time.Second)
		s := mixedSecond(now, sec, 1)
		b.snapshot(&s, now)
		b.add(&s, nil, nil)
	}
	now := start.Add(learnt * time.Second)
	s := mixedSecond(now, learnt, 1) // a 50 ms second of the mix
	b.snapshot(&s, now)
	r := s.Tenants[0]
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	if r.BaselineP95Seconds <= 0 || !near(r.Routes[0].BaselineP95Seconds, 0.002) || !near(r.Routes[1].BaselineP95Seconds, 0.050) {
		t.Fatalf("served: tenant %v, routes %+v; want route baselines 0.002 and 0.05", r.BaselineP95Seconds, r.Routes)
	}
	var late incident.Tracker // a qtop started now
	if h := late.Add(&s); len(h.Victims) != 0 {
		t.Errorf("the mix alone: victims %+v (tenant baseline %v); want none", h.Victims, r.BaselineP95Seconds)
	}
	slow := mixedSecond(now.Add(time.Second), learnt+4, 3)
	b.snapshot(&slow, now.Add(time.Second))
	if h := late.Add(&slow); len(h.Victims) != 1 || len(h.Victims[0].Routes) != 2 {
		t.Errorf("every route ×3: victims %+v; want mixed, both routes named", h.Victims)
	}

	b.mu.Lock()
	saved := b.encode()
	b.mu.Unlock()
	b.write(saved)
	back := newBaselineBook()
	if err := back.load(file); err != nil {
		t.Fatal(err)
	}
	if len(back.routes) != 2 {
		t.Fatalf("read back %d routes, want 2", len(back.routes))
	}
	if ok, err := eraseBaselines(filepath.Dir(file), "mixed"); err != nil || !ok {
		t.Fatalf("erase: %v %v", ok, err)
	}
	erased := newBaselineBook()
	if err := erased.load(file); err != nil {
		t.Fatal(err)
	}
	if len(erased.routes) != 0 || erased.tenants["mixed"] != nil || len(erased.tenants) != 9 {
		t.Errorf("after erasing mixed: %d routes, %d tenants", len(erased.routes), len(erased.tenants))
	}
}
