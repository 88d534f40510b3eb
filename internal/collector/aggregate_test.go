package collector

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/meter"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/tenant"
)

// Reports of many processes merge at once, shard by shard, while the
// minute is emitted again and again: what the store ends with is exactly
// what was sent — nothing merged during an emission is lost (the minute
// is marked changed after its rows are in), nothing counted twice.
func TestShardedMergeDuringEmission(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.SourceRate = 1e9 })
	const procs, reports, tenants = 8, 60, 40
	var sent [tenants]atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var emissions atomic.Int64
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				f.s.em.writeDue(t.Context(), &f.s.mu, &f.s.minutes, f.clk.Now(), true)
				emissions.Add(1)
			}
		}
	}()
	for p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pr := newProcess(f.clk, "api", fmt.Sprintf("p%d", p))
			for r := range reports {
				for k := range 10 {
					tn := (p*7 + r*3 + k) % tenants
					pr.rec.Record(meter.Record{Tags: tenant.Tags{Tenant: fmt.Sprintf("t%02d", tn), Route: "GET /x", Tier: tenant.T2},
						Kind: report.KindRequest, Duration: time.Duration(1+k) * time.Millisecond, RU: 1})
					sent[tn].Add(1)
				}
				body, err := pr.rec.Cut(f.clk.Now()).MarshalBinary()
				if err != nil {
					t.Error(err)
					return
				}
				if status, _, msg, _, _ := ingest(f.s, body); status != 200 {
					t.Errorf("refused: %d %s", status, msg)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	f.stop()
	if emissions.Load() < 2 {
		t.Fatalf("only %d emissions ran beside the merges", emissions.Load())
	}
	for tn := range tenants {
		name := fmt.Sprintf("t%02d", tn)
		got := f.mem.sum(name, "request", func(r store.Rollup) float64 { return float64(r.Count) })
		lat := f.mem.sum(name, "request", func(r store.Rollup) float64 { return float64(r.Latency.Count()) })
		if want := float64(sent[tn].Load()); got != want || lat != want {
			t.Errorf("%s: stored %v requests, %v latencies, sent %v", name, got, lat, want)
		}
	}
}

// The rows of a report are merged without the server's lock, one shard at
// a time: with one shard held (a long merge), a report whose tenants are
// all in other shards is merged at once, and one with a tenant in the
// held shard waits for it alone.
func TestShardsMergeApart(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	held := f.s.agg.shardOf("held-tenant")
	var other string
	for i := 0; other == ""; i++ {
		if n := fmt.Sprintf("free-%d", i); f.s.agg.shardOf(n) != held {
			other = n
		}
	}
	p1, p2 := newProcess(f.clk, "api", "p1"), newProcess(f.clk, "api", "p2")
	free, blocked := p1.report(t, other, 2, ""), p2.report(t, "held-tenant", 3, "")
	sh := &f.s.agg.shards[held]
	sh.mu.Lock()
	if status := f.ingest(free); status != 200 {
		sh.mu.Unlock()
		t.Fatalf("report of another shard: %d", status)
	}
	done := make(chan int)
	go func() { done <- f.ingest(blocked) }()
	// Wait until the report is taken into its minute and merging its
	// rows: the server's lock is free while it waits for its shard.
	waitFor(t, time.Minute, "the report to wait for its shard", func() bool {
		f.s.mu.Lock()
		defer f.s.mu.Unlock()
		for _, m := range f.s.minutes.byStart {
			if m.merging.Load() > 0 {
				return true
			}
		}
		return false
	})
	select {
	case status := <-done:
		sh.mu.Unlock()
		t.Fatalf("merged into a held shard: %d", status)
	default:
	}
	sh.mu.Unlock()
	if status := <-done; status != 200 {
		t.Fatalf("after the shard was free: %d", status)
	}
	snap := f.s.Snapshot(f.clk.Add(time.Second), "req", 10)
	got := map[string]float64{}
	for _, r := range snap.Tenants {
		got[r.Tenant] = r.ReqPerSec * rateN
	}
	if got[other] != 2 || got["held-tenant"] != 3 {
		t.Fatalf("live requests %v", got)
	}
}

// A minute's row keeps its tenant's live state to skip two lookups; once
// the tenant is pruned from the live view (idle), the row's next merge
// finds the tenant's new live state instead of writing into the old one.
func TestRowFindsTenantAgainAfterPrune(t *testing.T) {
	met, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	guard, err := newGuardMetrics(prometheus.NewRegistry(), &Server{})
	if err != nil {
		t.Fatal(err)
	}
	g := newAggregator(Config{LimitsConfig: LimitsConfig{MaxTenants: 100, MaxMinuteRows: 100}}, met, guard)
	m := newMinute(t0.Truncate(time.Minute))
	d := new(decoded)
	d.rep.Source = report.Source{Service: "api", Instance: "p"}
	d.rep.Rows = []report.Row{{Tenant: "acme", Route: "GET /x", Kind: report.KindRequest, Count: 1, RU: 1}}
	d.prepare(g)
	g.merge(&d.rep, &d.order, m, t0, true)
	sec := t0.Unix() + histN + rateN + 1
	g.prune(sec) // acme idle: forgotten by the live view
	if g.tenants.Load() != 0 {
		t.Fatalf("tenants tracked after prune: %d", g.tenants.Load())
	}
	now := time.Unix(sec, 0)
	g.merge(&d.rep, &d.order, m, now, true) // the same minute's row, again
	var req uint64
	g.tenantShard("acme", func(tl *tenantLive) { req = tl.w.req[tl.w.slot(sec)] })
	if req != 1 || g.tenants.Load() != 1 {
		t.Fatalf("after prune: live requests %d, tenants %d", req, g.tenants.Load())
	}
	var count uint64
	g.rows(m, func(k rowKey, a *rowAgg) { count += a.count })
	if count != 2 {
		t.Fatalf("minute row count %d, want 2", count)
	}
}

// Beyond Config.MaxTenants, tenants count in an "other" that may be in any
// shard; snapshots taken while reports merge add them up into one "other"
// row with every request counted.
func TestOtherTenantsAcrossShards(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MaxTenants = 4; c.SourceRate = 1e9 })
	defer f.stop()
	var wg sync.WaitGroup
	for p := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pr := newProcess(f.clk, "api", fmt.Sprintf("p%d", p))
			for r := range 20 {
				for k := range 30 {
					pr.rec.Record(meter.Record{Tags: tenant.Tags{Tenant: fmt.Sprintf("t%02d", k), Route: "GET /x"},
						Kind: report.KindRequest, Duration: time.Millisecond, RU: 1})
				}
				body, err := pr.rec.Cut(f.clk.Now()).MarshalBinary()
				if err != nil {
					t.Error(err)
					return
				}
				if status, _, msg, _, _ := ingest(f.s, body); status != 200 {
					t.Errorf("report %d: %d %s", r, status, msg)
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 200 { // each at another second: never from the cache
			f.s.Snapshot(f.clk.Now().Add(time.Duration(i)*time.Second), "p95", 2)
		}
	}()
	wg.Wait()
	<-done
	snap := f.s.Snapshot(f.clk.Now().Add(time.Second), "req", 50)
	var total float64
	others := 0
	for _, r := range snap.Tenants {
		total += r.ReqPerSec * rateN
		if r.Tenant == api.OtherTenant {
			others++
		}
	}
	if others != 1 || total != 2*20*30 {
		t.Fatalf("%d other rows, %v requests in all, want 1 and %d", others, total, 2*20*30)
	}
}
