package collector

import (
	"context"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/meter"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/tenant"
)

// TestWithIngestReporter sends through the real ingest.Reporter over HTTP
// with a token: the load shows in the live view and the reporter receives
// the collector's policy in the reply.
func TestWithIngestReporter(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Token = "tok" })
	defer f.stop()
	if _, err := f.s.SetRule(context.Background(), policy.Rule{ID: "p", Tier: tenant.T3, Action: policy.Price, Multiplier: 3,
		Reason: "ratio low", Expires: t0.Add(time.Hour)}, "test"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(f.s.Handler())
	defer srv.Close()
	rec, err := meter.NewRecorder(meter.WithSource(report.Source{Service: "billing", Instance: "i1", Host: "h"}), meter.WithClock(f.clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	var got atomic.Uint64
	rep, err := meter.NewReporter(srv.URL+api.PathReports, rec, meter.WithToken("tok"), meter.WithClock(f.clk.Now),
		meter.WithPolicyHandler(func(p policy.Policy) { got.Store(p.Version) }))
	if err != nil {
		t.Fatal(err)
	}
	for range 7 {
		rec.Record(meter.Record{Tags: tenant.Tags{Tenant: "acme", Route: "GET /bills"}, Kind: report.KindRequest, RU: 2, Duration: time.Millisecond})
	}
	f.clk.Add(time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rep.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rep.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if got.Load() != 1 {
		t.Fatalf("reporter got policy version %d, want 1", got.Load())
	}
	f.clk.Add(time.Second)
	snap := f.s.Snapshot(f.clk.Now(), api.MeasureRU, 5)
	if len(snap.Tenants) == 0 || snap.Tenants[0].Tenant != "acme" || snap.Tenants[0].RUPerSec != 1.4 {
		t.Fatalf("tenants %+v", snap.Tenants)
	}
}
