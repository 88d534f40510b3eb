package collector

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/meter"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/tenant"
)

// A tenant turning noisy after the live view holds its maximum of
// tenants, all busy, is shown by name within two ticks, in the place of
// one of the lightest, and the view's sums keep every RU (what the
// tenant whose place it took did is under "other"). Before, it stayed
// in "other" for as long as the others kept busy. Fake time.
func TestNoisyTenantBeyondMaxIsShown(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MaxTenants = 8; c.SourceRate = 1e9 })
	defer f.stop()
	pr := newProcess(f.clk, "api", "p1")
	send := func(noisy bool) {
		for k := range 40 {
			pr.rec.Record(meter.Record{Tags: tenant.Tags{Tenant: fmt.Sprintf("t%02d", k), Route: "GET /x"},
				Kind: report.KindRequest, Duration: time.Millisecond, RU: 1})
		}
		if noisy {
			pr.rec.Record(meter.Record{Tags: tenant.Tags{Tenant: "noisy", Route: "GET /x"},
				Kind: report.KindRequest, Duration: time.Millisecond, RU: 100})
		}
		body, err := pr.rec.Cut(f.clk.Now()).MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if status, _, msg, _, _ := ingest(f.s, body); status != 200 {
			t.Fatalf("%d %s", status, msg)
		}
		f.s.Tick(context.Background(), f.clk.Add(time.Second))
	}
	for range 3 {
		send(false)
	}
	for range 3 {
		send(true)
	}
	snap := f.s.Snapshot(f.clk.Now(), "ru", 50)
	var total float64
	var shown bool
	for _, r := range snap.Tenants {
		total += r.RUPerSec * rateN
		if r.Tenant == "noisy" {
			shown = true
			if snap.Tenants[0].Tenant != "noisy" {
				t.Errorf("noisy is shown but %q leads", snap.Tenants[0].Tenant)
			}
		}
	}
	if !shown {
		t.Errorf("noisy is not shown: %+v", rowsOf(&snap))
	}
	if want := 6*40 + 3*100.0; math.Abs(total-want) > 1e-9 {
		t.Errorf("the view sums %v RU, want %v", total, want)
	}
}

func rowsOf(s *api.Snapshot) []string {
	var out []string
	for _, r := range s.Tenants {
		out = append(out, fmt.Sprintf("%s=%.1f", r.Tenant, r.RUPerSec))
	}
	return out
}
