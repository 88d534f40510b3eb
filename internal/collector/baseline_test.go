package collector

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/incident"
)

// TestBaselinesSameForEveryQtop: the collector keeps each tenant's
// baseline over the trailing hour and serves it in the live view, so a
// qtop that starts (or restarts) during an incident names the same
// victims as one that watched from before it — where, on its own
// baselines, the late one took the incident for normal.
func TestBaselinesSameForEveryQtop(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Demo = true; c.Store = StoreNone })
	defer f.stop()
	fleet, err := newDemoFleet(f.s, f.clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	// Two complete minutes before the last one make a baseline here (the
	// collector's: five before the last three), to keep the test short.
	f.s.feat.base.gap, f.s.feat.base.need = 1, 2
	const importAt = 4 * time.Minute
	fleet.importAfter = importAt
	fleet.warm(f.clk.Now())
	h := httpAPI{f.s}
	ctx := context.Background()
	var early, late, lateOwn incident.Tracker
	var he, hl, ho incident.Headline
	for sec := 1; sec <= int((importAt+45*time.Second)/time.Second); sec++ {
		fleet.step(f.clk.Add(time.Second))
		f.s.Tick(ctx, f.clk.Now())
		h.stepAutopilot(ctx)
		snap := f.s.Snapshot(f.clk.Now(), api.MeasureRU, defaultTop)
		he = early.Add(&snap)
		if sec == int(importAt/time.Second)-1 {
			if r := rowOf(snap, "acme"); r.BaselineP95Seconds <= 0 || r.BaselineShare <= 0 {
				t.Fatalf("no baseline served for acme after %v: %+v", importAt, r)
			}
		}
		if time.Duration(sec)*time.Second >= importAt+15*time.Second {
			// Started during the incident: on the collector's baselines,
			// and (as before) on its own.
			hl = late.Add(&snap)
			own := snap
			own.Tenants = slices.Clone(snap.Tenants)
			for i := range own.Tenants {
				own.Tenants[i].BaselineP95Seconds, own.Tenants[i].BaselineShare = 0, 0
			}
			ho = lateOwn.Add(&own)
		}
	}
	names := func(h incident.Headline) []string {
		var n []string
		for _, v := range h.Victims {
			n = append(n, v.Tenant+"/"+v.BaselineFrom)
		}
		slices.Sort(n)
		return n
	}
	if len(he.Victims) < 3 || !slices.Equal(names(he), names(hl)) {
		t.Fatalf("victims seen from the start %v, by a qtop started late %v", names(he), names(hl))
	}
	if he.Victims[0].BaselineFrom != "collector" {
		t.Fatalf("baselines from %s", he.Victims[0].BaselineFrom)
	}
	if len(ho.Victims) >= len(hl.Victims) {
		t.Fatalf("on its own baselines a late qtop saw %d victims, on the collector's %d: the test shows nothing", len(ho.Victims), len(hl.Victims))
	}
	t.Logf("victims: from the start %d, started late %d, started late on its own baselines %d", len(he.Victims), len(hl.Victims), len(ho.Victims))
}

func rowOf(s api.Snapshot, tenant string) api.TenantRow {
	for _, r := range s.Tenants {
		if r.Tenant == tenant {
			return r
		}
	}
	return api.TenantRow{}
}
