package collector

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/qtop-dev/qtop/meter"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/tenant"
)

// bigPolicy has n tenant rules (tenant-0 … tenant-(n−1)) and one tier rule.
func bigPolicy(n int, now time.Time) policy.Policy {
	p := policy.Policy{Version: 42, Updated: now}
	for i := range n {
		p.Rules = append(p.Rules, policy.Rule{ID: fmt.Sprint("r", i), Tenant: fmt.Sprint("tenant-", i), Action: policy.Throttle,
			RUPerSecond: 100, Expires: now.Add(time.Hour), Created: now, Reason: "load test"})
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
