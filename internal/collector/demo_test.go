package collector

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/policy"
)

// TestDemoIncident runs the demo fleet on a fake clock: after the import
// starts, bigcorp leads by DB load and RU and the services' latency ratio
// falls; a throttle posted through the policy API brings it back down.
func TestDemoIncident(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Demo = true; c.Store = StoreNone })
	defer f.stop()
	fleet, err := newDemoFleet(f.s, f.clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	fleet.warm(f.clk.Now())
	step := func(n int) api.Snapshot {
		for range n {
			fleet.step(f.clk.Add(time.Second))
			f.s.Tick(context.Background(), f.clk.Now())
		}
		return f.s.Snapshot(f.clk.Now(), api.MeasureDB, 5)
	}
	before := step(4)
	if before.Tenants[0].Tenant == DemoImportTenant {
		t.Fatalf("bigcorp leads before its import: %+v", before.Tenants[0])
	}
	if len(before.Tenants) < 6 || before.TenantsSeen < 30 || before.Tenants[5].Tenant != api.OtherTenant {
		t.Fatalf("want dozens of tenants, top 5 and other: seen %d, %d rows", before.TenantsSeen, len(before.Tenants))
	}
	during := step(20)
	if during.Tenants[0].Tenant != DemoImportTenant || during.Tenants[0].Share < 0.5 {
		t.Fatalf("bigcorp should dominate DB load during the import: %+v", during.Tenants[0])
	}
	byRU := f.s.Snapshot(f.clk.Now(), api.MeasureRU, 5)
	if byRU.Tenants[0].Tenant != DemoImportTenant {
		t.Fatalf("bigcorp should lead by RU: %+v", byRU.Tenants[0])
	}
	if len(during.HotKeys) == 0 || during.Source != api.SourceDemo {
		t.Fatalf("hot keys %d source %q", len(during.HotKeys), during.Source)
	}
	for _, sv := range during.Services {
		if sv.Ratio == 0 || sv.Ratio > 0.6 || !sv.Degraded || sv.Processes != demoProcesses {
			t.Fatalf("service %s during the import: ratio %.2f degraded %v processes %d", sv.Service, sv.Ratio, sv.Degraded, sv.Processes)
		}
	}
	if during.Enforcement.Tiers[3].PriceMultiplier <= 1 || during.Enforcement.Tiers[0].Shed != 0 {
		t.Fatalf("enforcement %+v", during.Enforcement)
	}

	// Throttle bigcorp through the API, as qtop does.
	srv := httptest.NewServer(f.s.Handler())
	defer srv.Close()
	c, _ := api.NewClient(srv.URL)
	if _, err := c.PostPolicy(context.Background(), policy.Rule{ID: "stop-import", Tenant: DemoImportTenant,
		Action: policy.Throttle, RUPerSecond: 0, Reason: "import hurts everyone", Expires: f.clk.Now().Add(time.Hour)}, f.token); err != nil {
		t.Fatal(err)
	}
	after := step(15)
	var big api.TenantRow
	for _, tr := range after.Tenants {
		if tr.Tenant == DemoImportTenant {
			big = tr
		}
	}
	if big.DBLoad != 0 && big.DBLoad > 0.1*during.Tenants[0].DBLoad {
		t.Fatalf("throttled bigcorp still loads the DB: %v (was %v)", big.DBLoad, during.Tenants[0].DBLoad)
	}
	if after.Enforcement.Tiers[1].Throttled == 0 && after.Enforcement.Tiers[2].Throttled == 0 {
		t.Fatalf("no throttled work counted: %+v", after.Enforcement)
	}
}

func TestStreamThroughClient(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Demo = true; c.Store = StoreNone })
	srv := httptest.NewServer(f.s.Handler())
	defer srv.Close()
	c, _ := api.NewClient(srv.URL, api.WithTop(3), api.WithMeasure(api.MeasureReq))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n := 0
	err := c.Stream(ctx, func(s api.Snapshot) {
		if s.Measure != api.MeasureReq {
			t.Errorf("measure %q", s.Measure)
		}
		if n++; n == 2 {
			cancel()
		}
	})
	if n < 2 || ctx.Err() == nil {
		t.Fatalf("stream: %d snapshots, err %v", n, err)
	}
	f.stop()
	if _, err := c.Get(context.Background()); err != nil {
		t.Fatalf("handler after shutdown still answers reads: %v", err)
	}
}
