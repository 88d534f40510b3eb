package collector

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/meter"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/tenant"
)

// bigPolicy has n tenant rules (tenant-0 … tenant-(n−1)), made an hour
// before now, and one tier rule.
func bigPolicy(n int, now time.Time) policy.Policy {
	p := policy.Policy{Version: 42, Updated: now}
	for i := range n {
		p.Rules = append(p.Rules, policy.Rule{ID: fmt.Sprint("r", i), Tenant: fmt.Sprint("tenant-", i), Action: policy.Throttle,
			RUPerSecond: 100, Expires: now.Add(time.Hour), Created: now.Add(-time.Hour), Reason: "load test"})
	}
	p.Rules = append(p.Rules, policy.Rule{ID: "tier", Tier: tenant.T3, Action: policy.Throttle, RUPerSecond: 5,
		Expires: now.Add(time.Hour), Created: now, Reason: "tier"})
	return p
}

// TestPolicyViewReply: with a 10,000-rule policy, a report that carries
// the policy-view section is answered with its tenants' rules and the
// tier rule only, then with "unchanged" while it holds that view; a
// report without the section still gets the whole policy.
func TestPolicyViewReply(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	if !f.s.policy.adopt(bigPolicy(policy.MaxRules-1, t0)) {
		t.Fatal("policy not adopted")
	}
	rec, _ := meter.NewRecorder(meter.WithSource(report.Source{Service: "api", Instance: "p", Host: "h"}), meter.WithClock(f.clk.Now))
	send := func(section bool, tag string) report.Reply {
		t.Helper()
		for _, tn := range []string{"tenant-7", "tenant-9998", "nobody"} {
			rec.Record(meter.Record{Tags: tenant.Tags{Tenant: tn, Route: "r"}, Kind: report.KindRequest, Duration: time.Millisecond, RU: 1})
		}
		f.clk.Add(time.Second)
		rep := rec.Cut(f.clk.Now())
		if section {
			rep.SetSection(report.PolicyView{Tag: tag})
		}
		reply, err := f.s.Consume(context.Background(), rep, nil)
		if err != nil {
			t.Fatal(err)
		}
		return reply
	}
	whole := send(false, "")
	if len(whole.Policy) < 1<<20 || whole.PolicyView != nil {
		t.Fatalf("without the section: policy of %d bytes, view %q", len(whole.Policy), whole.PolicyView)
	}
	first := send(true, "")
	var v policy.View
	if err := json.Unmarshal(first.PolicyView, &v); err != nil || first.Policy != nil {
		t.Fatalf("view %s: %v (policy %d bytes)", first.PolicyView, err, len(first.Policy))
	}
	ids := map[string]bool{}
	for _, r := range v.Rules {
		ids[r.ID] = true
	}
	if len(v.Rules) != 3 || !ids["r7"] || !ids["r9998"] || !ids["tier"] || v.Version != 42 || v.Tag == "" {
		t.Fatalf("view: version %d tag %q rules %v", v.Version, v.Tag, ids)
	}
	again := send(true, v.Tag)
	var u policy.View
	if err := json.Unmarshal(again.PolicyView, &u); err != nil || !u.Unchanged || len(u.Rules) != 0 || u.Tag != v.Tag {
		t.Fatalf("held view: %s %v", again.PolicyView, err)
	}
	body, _ := report.EncodeReply(first)
	held, _ := report.EncodeReply(again)
	full, _ := report.EncodeReply(whole)
	t.Logf("reply bytes: whole policy %d, first view %d, unchanged %d", len(full), len(body), len(held))
}

// TestPolicyViewKeepsIdleTenants: a tenant with a throttle that its
// process does not report for a few intervals keeps its rule in the
// process's view (same tag: "unchanged"), until it has been idle for
// viewKeep; a tenant the process reports for the first time brings its
// rule at once.
func TestPolicyViewKeepsIdleTenants(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	if !f.s.policy.adopt(bigPolicy(100, t0)) {
		t.Fatal("policy not adopted")
	}
	rec, _ := meter.NewRecorder(meter.WithSource(report.Source{Service: "api", Instance: "p", Host: "h"}), meter.WithClock(f.clk.Now))
	send := func(tag string, tenants ...string) policy.View {
		t.Helper()
		for _, tn := range tenants {
			rec.Record(meter.Record{Tags: tenant.Tags{Tenant: tn, Route: "r"}, Kind: report.KindRequest, Duration: time.Millisecond, RU: 1})
		}
		f.clk.Add(time.Second)
		f.s.Tick(context.Background(), f.clk.Now())
		rep := rec.Cut(f.clk.Now())
		rep.SetSection(report.PolicyView{Tag: tag})
		reply, err := f.s.Consume(context.Background(), rep, nil)
		if err != nil {
			t.Fatal(err)
		}
		var v policy.View
		if err := json.Unmarshal(reply.PolicyView, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	rulesOf := func(v policy.View) []string {
		var ids []string
		for _, r := range v.Rules {
			ids = append(ids, r.ID)
		}
		return ids
	}
	v := send("", "tenant-3", "tenant-5")
	if got := rulesOf(v); len(got) != 3 {
		t.Fatalf("first view: %v", got)
	}
	tag := v.Tag
	for range 10 { // tenant-3 idle for ten reports: its rule stays
		if u := send(tag, "tenant-5"); !u.Unchanged || u.Tag != tag {
			t.Fatalf("with tenant-3 idle: %+v", u)
		}
	}
	// A tenant never reported before: its rule comes with its first report.
	v = send(tag, "tenant-7")
	if got := rulesOf(v); len(got) != 4 || v.Unchanged {
		t.Fatalf("with tenant-7: %v", got)
	}
	// A rule made now, of a tenant this process has never reported, comes
	// at once (a throttle reaches every process in one interval).
	p := bigPolicy(100, t0)
	p.Version++
	p.Rules = append(p.Rules, policy.Rule{ID: "new", Tenant: "bigcorp", Action: policy.Throttle, RUPerSecond: 1,
		Expires: f.clk.Now().Add(time.Hour), Created: f.clk.Now(), Reason: "import"})
	if !f.s.policy.adopt(p) {
		t.Fatal("policy not adopted")
	}
	v = send(v.Tag, "tenant-5")
	if got := rulesOf(v); len(got) != 5 || !slices.Contains(got, "new") {
		t.Fatalf("with a new rule of bigcorp: %v", got)
	}
	// Idle for longer than viewKeep: tenant-3's rule goes, then
	// tenant-7's; bigcorp's once it is no longer new.
	changed := 0
	for range int(viewKeep/time.Second) + 60 {
		if u := send(v.Tag, "tenant-5"); !u.Unchanged {
			v, changed = u, changed+1
		}
	}
	if got := rulesOf(v); changed != 3 || len(got) != 2 {
		t.Fatalf("after %v idle: %v (%d changes)", viewKeep, got, changed)
	}
}

// TestThrottleShowsAtOnce: bigcorp sends 100 RU/s; a throttle is made
// and its process then sends 10 RU/s. Two seconds later the live view
// shows bigcorp near 10 RU/s (its rates since the rule), where the rate
// window alone would still show ~80; ten seconds on, the whole window
// again.
func TestThrottleShowsAtOnce(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	ctx := context.Background()
	rec, _ := meter.NewRecorder(meter.WithSource(report.Source{Service: "api", Instance: "p", Host: "h"}), meter.WithClock(f.clk.Now))
	second := func(ru float64) {
		rec.Record(meter.Record{Tags: tenant.Tags{Tenant: "bigcorp", Route: "r"}, Kind: report.KindRequest, Duration: time.Millisecond, RU: ru})
		rec.Record(meter.Record{Tags: tenant.Tags{Tenant: "acme", Route: "r"}, Kind: report.KindRequest, Duration: time.Millisecond, RU: 10})
		f.clk.Add(time.Second)
		if _, err := f.s.Consume(ctx, rec.Cut(f.clk.Now()), nil); err != nil {
			t.Fatal(err)
		}
	}
	ruOf := func(tn string) float64 {
		return rowOf(f.s.Snapshot(f.clk.Now(), api.MeasureRU, 10), tn).RUPerSec
	}
	for range 15 {
		second(100)
	}
	if ru := ruOf("bigcorp"); ru != 100 {
		t.Fatalf("before: %v RU/s", ru)
	}
	if _, err := f.s.SetRule(ctx, policy.Rule{ID: "r1", Tenant: "bigcorp", Action: policy.Throttle, RUPerSecond: 10,
		Expires: f.clk.Now().Add(time.Hour), Reason: "import"}, "test"); err != nil {
		t.Fatal(err)
	}
	second(100) // the second the rule was made in: the processes apply it at their next report
	second(10)
	second(10)
	if ru, acme := ruOf("bigcorp"), ruOf("acme"); ru != 10 || acme != 10 {
		t.Fatalf("two seconds after the throttle: bigcorp %v RU/s, acme %v", ru, acme)
	}
	for range 9 {
		second(10)
	}
	if ru := ruOf("bigcorp"); ru != 10 {
		t.Fatalf("later: %v RU/s", ru)
	}
}
