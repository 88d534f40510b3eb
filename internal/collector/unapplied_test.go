package collector

import (
	"context"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/pgactivity"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/tenant"
)

// TestUnappliedRule: a throttle on a tenant whose load is all database
// sessions with no request reported (a script on the database itself) is
// said to apply to nothing, in the live view and in GET /v1/policy; a
// throttle on a tenant whose requests an agent reports is not, nor a
// shadow rule. Before, both looked applied (a trial's autopilot "enforced"
// a quota on a pgbench tenant while its sessions went on).
func TestUnappliedRule(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	ctx := context.Background()
	now := f.clk.Now()
	rep := &report.Report{Source: report.Source{Service: "shop", Instance: "a"}, Seq: 1, Start: now.Add(-time.Second), End: now,
		Rows: []report.Row{{Tenant: "acme", Route: "GET /a", Kind: report.KindRequest, Count: 50, Duration: time.Second, RU: 50}}}
	if _, err := f.s.Consume(ctx, rep, nil); err != nil {
		t.Fatal(err)
	}
	session := func(pid int32, tn string) pgactivity.Backend {
		return pgactivity.Backend{PID: pid, Tenant: tn, State: "active", QueryStart: now, Query: "SELECT 1"}
	}
	f.s.AddSample(pgactivity.Snapshot{Time: now, Backends: []pgactivity.Backend{session(1, "rampcorp"), session(2, "rampcorp"),
		session(3, "acme"), session(4, "quiet")}}, time.Second)
	for _, r := range []policy.Rule{
		{ID: "r1", Tenant: "rampcorp", Action: policy.Quota, RUPerSecond: 10},
		{ID: "r2", Tenant: "acme", Action: policy.Throttle, RUPerSecond: 10},
		{ID: "r3", Tenant: "quiet", Action: policy.Throttle, RUPerSecond: 10, Shadow: true},
	} {
		r.Expires, r.Reason = now.Add(time.Hour), "t"
		if _, err := f.s.SetRule(ctx, r, "t"); err != nil {
			t.Fatal(err)
		}
	}
	f.clk.Add(2 * time.Second)
	un := f.s.Snapshot(f.clk.Now(), "ru", 20).Unapplied
	if len(un) != 1 || un[0].Rule != "r1" || un[0].Tenant != "rampcorp" || !(un[0].DBLoad > 0) {
		t.Fatalf("unapplied %+v, want rule r1 of rampcorp only", un)
	}
	if st := f.s.policyStatus(); len(st.Unapplied) != 1 || st.Unapplied[0].Rule != "r1" {
		t.Fatalf("GET /v1/policy: unapplied %+v", st.Unapplied)
	}
}

// TestSampledTier: a tenant seen only by the sampler shows the tier its
// sessions' tags carry (before: none, and a T0 tenant there was not
// spared by the autopilot, which skips rows whose tier is T0); a tier an
// agent reports wins.
func TestSampledTier(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	now := f.clk.Now()
	rep := &report.Report{Source: report.Source{Service: "shop", Instance: "a"}, Seq: 1, Start: now.Add(-time.Second), End: now,
		Rows: []report.Row{{Tenant: "acme", Route: "GET /a", Kind: report.KindRequest, Count: 5, Duration: time.Second, RU: 5, Tier: tenant.T1}}}
	if _, err := f.s.Consume(context.Background(), rep, nil); err != nil {
		t.Fatal(err)
	}
	session := func(pid int32, tn string, tier tenant.Tier) pgactivity.Backend {
		return pgactivity.Backend{PID: pid, Tenant: tn, Tier: tier, State: "active", QueryStart: now, Query: "SELECT 1"}
	}
	f.s.AddSample(pgactivity.Snapshot{Time: now, Backends: []pgactivity.Backend{session(1, "appcorp", tenant.T3),
		session(2, "vipcorp", tenant.T0), session(3, "acme", tenant.T3)}}, time.Second)
	f.clk.Add(2 * time.Second)
	got := map[string]string{}
	for _, r := range f.s.Snapshot(f.clk.Now(), "db", 20).Tenants {
		got[r.Tenant] = r.Tier
	}
	if got["appcorp"] != "T3" || got["vipcorp"] != "T0" || got["acme"] != "T1" {
		t.Fatalf("tiers %v, want appcorp T3, vipcorp T0, acme T1 (reported)", got)
	}
}
