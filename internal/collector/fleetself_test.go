package collector

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/meter"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/tenant"
)

// TestFleetPeersIncludeSelf: the replicas of a StatefulSet share one
// peer list, which holds each replica's own address. A collector that
// finds itself among its peers (its own instance in the answer) does not
// merge its own view twice: the fleet view is the sum of the two, and its
// peer list names it once.
func TestFleetPeersIncludeSelf(t *testing.T) {
	clk := &clock{t: time.Now().Truncate(time.Second)}
	listen := []string{freeAddr(t), freeAddr(t)}
	var urls []string
	servers := make([]*Server, len(listen))
	for i, l := range listen {
		s, err := New(Config{Listen: l, Store: StoreNone, FleetConfig: FleetConfig{Peers: listen},
			Token: fleetToken, DataDir: t.TempDir(), Writer: fmt.Sprintf("c%d", i), Now: clk.Now, Registerer: prometheus.NewRegistry()})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Shutdown(context.Background()) })
		servers[i], urls = s, append(urls, "http://"+l)
	}
	for i, u := range urls {
		rec := newRec(t, meter.WithSource(report.Source{Service: "api", Instance: fmt.Sprintf("p%d", i), Host: "h"}))
		rep, err := meter.NewReporter(u+api.PathReports, rec, meter.WithToken(fleetToken))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rep.Shutdown(context.Background()) })
		for range 10 * (i + 1) {
			rec.Record(meter.Record{Tags: tenant.Tags{Tenant: "acme", Route: "GET /x"}, Kind: report.KindRequest, Duration: time.Millisecond, RU: 1})
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := rep.ForceFlush(ctx); err != nil {
			t.Fatal(err)
		}
		cancel()
	}
	clk.Add(time.Second)
	for i, u := range urls {
		c, err := api.NewClient(u, api.WithToken(fleetToken))
		if err != nil {
			t.Fatal(err)
		}
		snap, err := c.Get(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var req float64
		for _, r := range snap.Tenants {
			req += r.ReqPerSec
		}
		if got := req * rateN; math.Abs(got-30) > 0.5 {
			t.Errorf("collector %d: the fleet view holds %v requests, the processes recorded 30", i, got)
		}
		// Itself once, first, by its address; then the other one.
		want := []string{u + " (self)", urls[1-i]}
		var got []string
		for _, p := range snap.Peers {
			if p.OK {
				got = append(got, p.Collector)
			}
		}
		if !slices.Equal(got, want) || len(snap.Peers) != len(want) {
			t.Errorf("collector %d: peers %+v, want %q", i, snap.Peers, want)
		}
	}
}
