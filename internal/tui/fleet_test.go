package tui

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/internal/collector"
	"github.com/qtop-dev/qtop/policy"
)

// TestFleetSource: qtop given three collectors shows their sum, names
// each, goes on without one that stopped, and throttles through the first.
func TestFleetSource(t *testing.T) {
	var srvs []*collector.Server
	var urls []string
	var stops []func()
	for range 3 {
		s, u, stop := realCollector(t)
		srvs, urls, stops = append(srvs, s), append(urls, u), append(stops, stop)
	}
	f, err := NewFleet(urls, "s3cret", "")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var snap api.Snapshot
	sources := func() (n int) {
		for _, s := range srvs {
			n += s.Live().Collector.Sources
		}
		return n
	}
	for {
		// The demo fleets' sources may change between the members'
		// answers and this check: the sum is checked against the three
		// collectors' own counts taken just before and just after.
		before := sources()
		if snap, err = f.Next(ctx, Query{Measure: api.MeasureRU, Top: 5}); err != nil {
			// None answered within the fleet's wait (2 s): collectors
			// just started on a loaded machine. Ask again, within ctx.
			if ctx.Err() != nil {
				t.Fatal(err)
			}
			continue
		}
		after := sources()
		lo, hi := min(before, after), max(before, after)
		if lo > 0 && snap.Collector.Sources >= lo && snap.Collector.Sources <= hi && len(snap.Tenants) > 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the fleet never showed the sources of all three: %d, want %d to %d", snap.Collector.Sources, lo, hi)
		}
	}
	if len(snap.Peers) != 3 || !snap.Peers[0].OK || !snap.Peers[1].OK || !snap.Peers[2].OK {
		t.Fatalf("peers %+v", snap.Peers)
	}
	if len(snap.Tenants) > 6 {
		t.Fatalf("%d tenant rows for top 5", len(snap.Tenants))
	}
	rule := policy.Rule{Tenant: "bigcorp", Action: policy.Throttle, RUPerSecond: 5, Expires: time.Now().Add(time.Hour), Reason: "fleet"}
	if err := f.Throttle(ctx, rule); err != nil {
		t.Fatal(err)
	}
	if p := srvs[0].Policy(); len(p.Rules) != 1 {
		t.Fatalf("the first collector's policy %+v", p)
	}
	stops[2]()
	// The stopped collector's stream may still hold the snapshot it sent
	// last: the one after it says it is gone.
	for {
		snap, err = f.Next(ctx, Query{Measure: api.MeasureRU, Top: 5})
		if err != nil {
			t.Fatal(err)
		}
		if !snap.Peers[2].OK || ctx.Err() != nil {
			break
		}
	}
	if snap.Peers[2].OK || snap.Peers[2].Error == "" || !snap.Peers[0].OK {
		t.Fatalf("with one collector stopped, peers %+v", snap.Peers)
	}
	if _, err := NewFleet(nil, "", ""); !errors.Is(err, ErrInput) {
		t.Fatalf("empty fleet: %v", err)
	}
}

// TestFleetRefusesACollectorTwice: a collector named twice in --collector,
// however spelt, would have its load counted twice; it is refused.
func TestFleetRefusesACollectorTwice(t *testing.T) {
	for _, bases := range [][]string{
		{"127.0.0.1:7070", "127.0.0.1:7070"},
		{"127.0.0.1:7070", " http://127.0.0.1:7070/"},
		{"https://C1.example:7070", "https://c1.example:7070", "c2:7070"},
	} {
		if _, err := NewFleet(bases, "", ""); !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "twice") {
			t.Errorf("%q: %v", bases, err)
		}
	}
	f, err := NewFleet([]string{"c1:7070", "c2:7070", "https://c1:7070"}, "", "")
	if err != nil {
		t.Fatalf("distinct collectors: %v", err)
	}
	f.Close()
}
