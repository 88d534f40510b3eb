package collector_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/internal/collector"
	"github.com/qtop-dev/qtop/meter"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/tenant"
)

// A collector without a store, fed one report the way POST /v1/reports
// does, read back through the live view.
func Example() {
	dir, _ := os.MkdirTemp("", "collector-example")
	defer os.RemoveAll(dir)
	now := time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	s, err := collector.New(collector.Config{Store: collector.StoreNone, DataDir: dir, Now: clock})
	if err != nil {
		panic(err)
	}
	defer s.Shutdown(context.Background())

	rec, err := meter.NewRecorder(meter.WithSource(report.Source{Service: "api", Instance: "p1"}), meter.WithClock(clock))
	if err != nil {
		panic(err)
	}
	for range 50 {
		rec.Record(meter.Record{Tags: tenant.Tags{Tenant: "bigcorp", Route: "POST /import"}, Kind: report.KindRequest, RU: 40})
	}
	rec.Record(meter.Record{Tags: tenant.Tags{Tenant: "acme", Route: "GET /items"}, Kind: report.KindRequest, RU: 1})
	now = now.Add(time.Second)
	reply, err := s.Consume(context.Background(), rec.Cut(now), nil) // in process: no encoding
	fmt.Println("accepted", reply.Accepted, err)

	now = now.Add(time.Second)
	for _, t := range s.Snapshot(now, api.MeasureRU, 1).Tenants {
		fmt.Printf("%-7s %6.1f RU/s  %3.0f%%\n", t.Tenant, t.RUPerSec, 100*t.Share)
	}
	// Output:
	// accepted true <nil>
	// bigcorp  200.0 RU/s  100%
	// other      0.1 RU/s    0%
}
