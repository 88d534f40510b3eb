package collector

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/autopilot"
	"github.com/qtop-dev/qtop/incident"
	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/store"
)

// pilotRun is the demo's Monday-9am import under the autopilot, on a fake
// clock: what it decided, when the victims were back, and how much of the
// import it admitted.
type pilotRun struct {
	decisions []autopilot.Decision
	// hurt counts, each second from the fleet's start (hurt[0] is its
	// first), the tenants at ≥ 1.5× their baseline p95 in qtop's headline.
	hurt []int
	// importRU is bigcorp's RU a second at the end: slowed, not stopped.
	importRU float64
	audit    []string
	// now is the first figures an active action's status row showed
	// since its apply (api.AutopilotRow.Now).
	now string
	// hurtAt is the first second from the import's start with victims:
	// at least the rule's victims_min tenants at ≥ 1.5× their baseline
	// (one or two noisy small tenants often are); healedAt the first
	// second after it from which fewer stay so for 10 s (0: never).
	hurtAt, healedAt int
}

// healing finds hurtAt and healedAt in hurt from second from on.
func healing(hurt []int, from, victims int) (hurtAt, healedAt int) {
	for sec := from + 1; sec <= len(hurt); sec++ {
		n := hurt[sec-1]
		switch {
		case hurtAt == 0 && n >= victims:
			hurtAt = sec
		case hurtAt != 0 && healedAt == 0 && n < victims:
			healedAt = sec
		case healedAt != 0 && n >= victims:
			healedAt = 0
		}
		if healedAt != 0 && sec-healedAt >= 10 {
			return hurtAt, healedAt
		}
	}
	return hurtAt, 0
}

// runPilotDemo runs the demo fleet for secs seconds with the autopilot's
// rules a, posted through the API, stepping the autopilot every second
// as the collector's loop does.
func runPilotDemo(t *testing.T, a policy.Autopilot, secs int) pilotRun {
	t.Helper()
	f := newFixture(t, func(c *Config) { c.Demo = true })
	defer f.stop()
	srv := httptest.NewServer(f.s.Handler())
	defer srv.Close()
	body, _ := json.Marshal(a)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+PathAutopilotPolicy, strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer "+f.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %s", PathAutopilotPolicy, resp.Status)
	}
	fleet, err := newDemoFleet(f.s, f.clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	// The demo starts its import 5 s after the collector; on a Monday at
	// 9:00 the collector has been up for days. A minute of normal load
	// first gives every tenant a baseline.
	fleet.importAfter = pilotImportAfter
	fleet.warm(f.clk.Now())
	h := httpAPI{f.s}
	var run pilotRun
	var tr incident.Tracker // qtop's own headline, as an operator would watch it
	ctx := context.Background()
	for sec := 1; sec <= secs; sec++ {
		fleet.step(f.clk.Add(time.Second))
		f.s.Tick(ctx, f.clk.Now())
		h.stepAutopilot(ctx)
		snap := f.s.Snapshot(f.clk.Now(), api.MeasureRU, maxTop)
		hd := tr.Add(&snap)
		hurt := 0
		for _, v := range hd.Victims {
			if v.Factor() >= 1.5 {
				hurt++
			}
		}
		run.hurt = append(run.hurt, hurt)
		if snap.Autopilot != nil {
			for _, a := range snap.Autopilot.Active {
				if run.now == "" && a.Now != "" {
					run.now = a.Now // the figures its next step states
				}
			}
		}
		if sec == secs {
			for _, r := range snap.Tenants {
				if r.Tenant == DemoImportTenant {
					run.importRU = r.RUPerSec
				}
			}
		}
	}
	run.hurtAt, run.healedAt = healing(run.hurt, int(pilotImportAfter/time.Second), a.Rules[0].Defaults().VictimsMin)
	st := f.s.feat.pilot.state()
	for i := len(st.Decisions) - 1; i >= 0; i-- {
		run.decisions = append(run.decisions, st.Decisions[i])
	}
	for _, au := range auditsOf(t, f) {
		run.audit = append(run.audit, au.Action)
	}
	return run
}

// pilotImportAfter is when the import begins in these runs.
const pilotImportAfter = 60 * time.Second

func pilotRule(mode policy.AutopilotMode) policy.Autopilot {
	a := autopilot.Default()
	a.Rules[0].Mode = mode
	a.Allow = []string{"trust-safety"}
	return a
}

// TestAutopilotEndsTheDemoIncident: with the default rule in enforce, the
// demo's import is limited by a fleet quota with no human, once, against
// bigcorp; the victims' p95 comes back under 1.5× their baseline, and
// the import goes on, slower.
func TestAutopilotEndsTheDemoIncident(t *testing.T) {
	run := runPilotDemo(t, pilotRule(policy.AutopilotEnforce), 150)
	var applies []autopilot.Decision
	for _, d := range run.decisions {
		if d.Kind == autopilot.KindApply {
			applies = append(applies, d)
		}
	}
	if len(applies) != 1 || applies[0].Tenant != DemoImportTenant || applies[0].Shadow {
		t.Fatalf("want one enforced apply against %s, got %v", DemoImportTenant, run.decisions)
	}
	if run.hurtAt == 0 || run.healedAt == 0 {
		t.Fatalf("victims hurt at %ds, healed at %ds: the incident did not end; decisions %v", run.hurtAt, run.healedAt, run.decisions)
	}
	importStart := int(pilotImportAfter / time.Second)
	t.Logf("import from %ds; victims hurt at %ds; autopilot applied at %v; victims back under 1.5× baseline at %ds (%ds after the import began); bigcorp admitted %.0f RU/s at the end",
		importStart, run.hurtAt, applies[0].Time.Sub(t0), run.healedAt, run.healedAt-importStart, run.importRU)
	// Order and effect: hurt, then the apply, then healed. The issue's
	// goal is 15 s from the import's start; the demo takes about 20 (the
	// closing note says why: the p95 and the shares are over 10 s).
	if applyAt := int(applies[0].Time.Sub(t0) / time.Second); !(run.hurtAt <= applyAt && applyAt < run.healedAt) || run.healedAt-importStart > 30 {
		t.Errorf("hurt at %ds, applied at %ds, healed at %ds", run.hurtAt, applyAt, run.healedAt)
	}
	if run.importRU <= 0 {
		t.Errorf("the import was stopped, not slowed")
	}
	if !strings.Contains(run.now, "victims") {
		t.Errorf("the action's figures since its apply (the status row's now): %q", run.now)
	}
	if !containsString(run.audit, "autopilot-apply") || !containsString(run.audit, "autopilot-set") {
		t.Errorf("audit %v: want the rules set and the apply, with its evidence", run.audit)
	}
}

// TestAutopilotShadowDecidesAsEnforce: the same incident in shadow
// decides to act on the same tenant at the same time (± one interval),
// and applies nothing: the victims stay hurt through the import.
func TestAutopilotShadowDecidesAsEnforce(t *testing.T) {
	enf := runPilotDemo(t, pilotRule(policy.AutopilotEnforce), 90)
	sh := runPilotDemo(t, pilotRule(policy.AutopilotShadow), 90)
	first := func(r pilotRun) autopilot.Decision {
		for _, d := range r.decisions {
			if d.Kind == autopilot.KindApply {
				return d
			}
		}
		t.Fatalf("no apply in %v", r.decisions)
		return autopilot.Decision{}
	}
	e, s := first(enf), first(sh)
	if !s.Shadow || s.Tenant != e.Tenant {
		t.Fatalf("shadow %v vs enforce %v", s, e)
	}
	if d := s.Time.Sub(e.Time); d < -pilotRule("").Rules[0].Defaults().Interval() || d > pilotRule("").Rules[0].Defaults().Interval() {
		t.Fatalf("shadow decided at %v, enforce at %v", s.Time, e.Time)
	}
	if sh.healedAt != 0 {
		t.Fatalf("in shadow the victims healed at %ds: shadow must not act", sh.healedAt)
	}
}

// TestAutopilotAPI: pause through the API is a policy change (audited),
// a cancel of an unknown action is refused, and a command needs the
// admin token.
func TestAutopilotAPI(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	srv := httptest.NewServer(f.s.Handler())
	defer srv.Close()
	post := func(path, body, token string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 4096)
		n, _ := resp.Body.Read(buf)
		b.Write(buf[:n])
		return resp.StatusCode, b.String()
	}
	rules, _ := json.Marshal(pilotRule(policy.AutopilotShadow))
	if code, msg := post(PathAutopilotPolicy, string(rules), ""); code != http.StatusUnauthorized {
		t.Fatalf("rules without a token: %d %s", code, msg)
	}
	if code, msg := post(PathAutopilotPolicy, `{"rules":[{"name":"x","action":"explode"}]}`, f.token); code != http.StatusBadRequest {
		t.Fatalf("a bad rule: %d %s", code, msg)
	}
	f.s.feat.pilot.step(context.Background(), t0, &api.Snapshot{Time: t0}) // a step without rules
	if code, msg := post(PathAutopilotPolicy, string(rules), f.token); code != http.StatusOK {
		t.Fatalf("rules: %d %s", code, msg)
	}
	// Before the next step the answer says the rules are taken, not that
	// there are none (it said so for up to three seconds).
	if st := f.s.feat.pilot.state().Status; st.Rules != 1 || strings.Contains(st.Note, "no autopilot rules") {
		t.Fatalf("status right after the rules: %+v", st)
	}
	if code, msg := post(api.PathAutopilot, `{"pause":true}`, f.token); code != http.StatusOK || !strings.Contains(msg, `"paused":true`) {
		t.Fatalf("pause: %d %s", code, msg)
	}
	if p := f.s.Policy(); p.Autopilot == nil || !p.Autopilot.Paused || len(p.Autopilot.Rules) != 1 {
		t.Fatalf("policy after pause: %+v", p.Autopilot)
	}
	if code, msg := post(api.PathAutopilot, `{"cancel":"nope"}`, f.token); code != http.StatusBadRequest || !strings.Contains(msg, "no such action") {
		t.Fatalf("cancel unknown: %d %s", code, msg)
	}
	for _, body := range []string{`{"pause":true,"resume":true}`, `{"pause":false}`, `{}`} {
		// The answer says what to send, and speaks of no rule.
		if code, msg := post(api.PathAutopilot, body, f.token); code != http.StatusBadRequest || strings.Contains(msg, "rule") ||
			!strings.Contains(msg, `{\"cancel\":\"ID\"}`) {
			t.Fatalf("%s: %d %s", body, code, msg)
		}
	}
	if code, msg := post(api.PathAutopilot, `{"cancel":"nope"}`, f.token); !strings.Contains(msg, "GET /v1/autopilot") {
		t.Fatalf("cancel unknown: %d %s: want where the actions are listed", code, msg)
	}
	if code, msg := post(api.PathAutopilot, `{"resume":true}`, f.token); code != http.StatusOK || strings.Contains(msg, `"paused":true`) {
		t.Fatalf("resume: %d %s", code, msg)
	}
	var got []string
	for _, au := range auditsOf(t, f) {
		got = append(got, au.Action)
	}
	if want := []string{"autopilot-set", "autopilot-pause", "autopilot-resume"}; !slices.Equal(got, want) {
		t.Fatalf("audit %v, want %v", got, want)
	}
}

func auditsOf(t *testing.T, f *fixture) []store.Audit {
	t.Helper()
	as, err := f.mem.ReadAudit(context.Background(), time.Time{}, t0.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return as
}

func containsString(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// TestAutopilotOneCollectorActs: two collectors of a fleet share a Redis;
// the autopilot's lock there lets one act, the other says who does; when
// the holder's lock ends (it died: the key expired) the other takes over.
// A collector of a fleet without Redis acts on nothing and says why.
func TestAutopilotOneCollectorActs(t *testing.T) {
	addr := testsvc.Redis(t)
	prefix := fmt.Sprintf("{qtop-pilot-%d}:", time.Now().UnixNano())
	mk := func(writer string) *fixture {
		return newFixture(t, func(c *Config) {
			c.Writer = writer
			c.Peers = []string{"127.0.0.1:1"}
			c.QuotaConfig = QuotaConfig{QuotaRedis: addr, QuotaPrefix: prefix}
		})
	}
	a, b := mk("c1"), mk("c2")
	defer a.stop()
	defer b.stop()
	ctx := context.Background()
	if got := a.s.feat.pilot.mayAct(ctx); got.act || !strings.Contains(got.note, "--shared-policy") {
		t.Fatalf("peers without a shared policy: acts %v, %q", got.act, got.note)
	}
	// As with --shared-policy (which needs a ClickHouse store: the lock is
	// what this test is about).
	a.s.feat.pilot.unshared, b.s.feat.pilot.unshared = false, false
	if got := a.s.feat.pilot.mayAct(ctx); !got.act {
		t.Fatalf("the first collector does not act: %s", got.note)
	}
	if got := b.s.feat.pilot.mayAct(ctx); got.act || !strings.Contains(got.note, "c1 holds") || got.other != "c1" {
		t.Fatalf("the second collector acts too (%v) or says %q", got.act, got.note)
	}
	if got := a.s.feat.pilot.mayAct(ctx); !got.act {
		t.Fatal("the holder lost its lock on renewal")
	}
	// c1 keeps its actions beside the lock, when its last action
	// started (one that ended since), and its recent decisions: one that
	// c2 made while it held the lock before, and c1's apply.
	act := autopilot.Action{ID: "autopilot-noisy-1", Rule: "noisy-neighbour", Tenant: "bigcorp", Action: policy.AutopilotQuota,
		Started: t0, Changed: t0, Expires: t0.Add(15 * time.Minute), Limit: 32}
	last := t0.Add(time.Minute)
	before := autopilot.Decision{Time: t0.Add(-time.Minute), Rule: "noisy-neighbour", Tenant: "megacorp", Kind: autopilot.KindLift, ActionID: "autopilot-noisy-0"}
	apply := autopilot.Decision{Time: t0, Rule: "noisy-neighbour", Tenant: "bigcorp", Kind: autopilot.KindApply, ActionID: act.ID}
	b.s.feat.pilot.recent = []autopilot.Decision{before}
	saved, _ := json.Marshal(savedPilot{Actions: []autopilot.Action{act}, LastStart: last, Recent: []autopilot.Decision{before, apply}})
	if err := a.s.feat.pilot.lock.put(ctx, saved); err != nil {
		t.Fatal(err)
	}
	// c1 dies: its lock expires.
	lock := a.s.feat.pilot.lock
	if err := lock.client.Del(ctx, lock.key).Err(); err != nil {
		t.Fatal(err)
	}
	if got := b.s.feat.pilot.mayAct(ctx); !got.act {
		t.Fatalf("the second collector did not take over: %s", got.note)
	}
	b.s.feat.pilot.takeOver(ctx)
	if got := b.s.feat.pilot.eng.Active(); len(got) != 1 || got[0].ID != act.ID || got[0].Tenant != "bigcorp" {
		t.Fatalf("the new holder follows %+v, want c1's action", got)
	}
	if got := b.s.feat.pilot.eng.LastStart(); !got.Equal(last) {
		t.Fatalf("the new holder spaces new actions from %v, want %v", got, last)
	}
	if got := b.s.feat.pilot.state().Decisions; len(got) != 2 || got[0].ActionID != apply.ActionID || got[1].ActionID != before.ActionID {
		t.Fatalf("the new holder lists %+v, want c1's apply, then its own lift of before, once", got)
	}
	if got := a.s.feat.pilot.mayAct(ctx); got.act || !strings.Contains(got.note, "c2 holds") {
		t.Fatalf("the old holder acts again (%v): %q", got.act, got.note)
	}

	alone := newFixture(t, func(c *Config) { c.Peers = []string{"127.0.0.1:1"} })
	defer alone.stop()
	alone.s.feat.pilot.unshared = false
	if got := alone.s.feat.pilot.mayAct(ctx); got.act || !strings.Contains(got.note, "--quota-redis") {
		t.Fatalf("a fleet's collector without Redis acts (%v): %q", got.act, got.note)
	}
}

// TestSharedPolicyCarriesTheAutopilot: in a fleet whose policy is the
// store's audit log, the autopilot's part travels with the rules (the
// last change wins), and adopting the fleet's policy keeps this
// collector's own budgets.
func TestSharedPolicyCarriesTheAutopilot(t *testing.T) {
	on, off := pilotRule(policy.AutopilotEnforce), pilotRule(policy.AutopilotEnforce)
	off.Paused = true
	js := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	rule := policy.Rule{ID: "r1", Tenant: "bigcorp", Action: policy.Quota, RUPerSecond: 30, Expires: t0.Add(time.Hour), Reason: "x"}
	changes := []store.Audit{
		{Time: t0, Action: auditAutopilotSet, Rule: js(on)},
		{Time: t0.Add(time.Second), Action: "add", Rule: js(rule)},
		{Time: t0.Add(2 * time.Second), Action: auditAutopilotPause, Rule: js(off)},
		{Time: t0.Add(3 * time.Second), Action: auditAutopilotSet, Rule: `{"rules":[{"name":"bad","action":"explode"}]}`},
	}
	p := foldPolicy(changes, t0.Add(4*time.Second))
	if p.Autopilot == nil || !p.Autopilot.Paused || len(p.Autopilot.Rules) != 1 || len(p.Rules) != 1 {
		t.Fatalf("folded policy: autopilot %+v, rules %+v", p.Autopilot, p.Rules)
	}
	resumed := foldPolicy(append(changes, store.Audit{Time: t0.Add(4 * time.Second), Action: auditAutopilotResume, Rule: js(on)}), t0.Add(5*time.Second))
	if resumed.Autopilot == nil || resumed.Autopilot.Paused {
		t.Fatalf("folded after a resume: %+v", resumed.Autopilot)
	}
	f := newFixture(t)
	defer f.stop()
	if _, err := f.s.SetBudget(context.Background(), policy.Budget{ID: "b1", Match: []map[string]string{{"tenant": "acme"}}, Share: 1, Reason: "x"}, false, "test"); err != nil {
		t.Fatal(err)
	}
	if !f.s.policy.adopt(p) {
		t.Fatal("not adopted")
	}
	if got := f.s.Policy(); len(got.Budgets) != 1 || got.Autopilot == nil || len(got.Rules) != 1 {
		t.Fatalf("after adopting: budgets %d, autopilot %v, rules %d", len(got.Budgets), got.Autopilot != nil, len(got.Rules))
	}
}

// TestAutopilotLiftOfAnExpiredPart: an action that runs to its time ends
// after its policy part did — the policy's tick prunes an expired rule,
// any policy change an expired budget — so its lift finds nothing to
// remove. The lift is no write error and is audited all the same.
func TestAutopilotLiftOfAnExpiredPart(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	p := f.s.feat.pilot
	ctx := context.Background()
	end := t0.Add(15 * time.Second)
	part := func(kind autopilot.Kind, budget bool, expires time.Time) autopilot.Decision {
		d := autopilot.Decision{Time: f.clk.Now(), Rule: "noisy", Tenant: "bigcorp", Kind: kind, Action: policy.AutopilotQuota,
			ActionID: "autopilot-noisy-1", Limit: 12.12}
		if budget {
			d.Action, d.ActionID, d.Limit = policy.AutopilotBudget, "autopilot-noisy-2", 0.1
			d.Budget = &policy.Budget{ID: d.ActionID, Match: []map[string]string{{"tenant": "bigcorp"}}, Share: 0.1,
				Mode: policy.Enforce, Expires: expires, Reason: "autopilot/noisy " + string(kind), CreatedBy: "autopilot/noisy", Created: t0}
			return d
		}
		d.PolicyRule = &policy.Rule{ID: d.ActionID, Tenant: "bigcorp", Action: policy.Quota, RUPerSecond: 12.12,
			Expires: expires, Reason: "autopilot/noisy " + string(kind), CreatedBy: "autopilot/noisy", Created: t0}
		return d
	}
	p.write(ctx, f.clk.Now(), part(autopilot.KindApply, false, end))
	p.write(ctx, f.clk.Now(), part(autopilot.KindApply, true, end))
	if pol := f.s.Policy(); len(pol.Rules) != 1 || len(pol.Budgets) != 1 {
		t.Fatalf("applied: %d rules, %d budgets (%v write errors)", len(pol.Rules), len(pol.Budgets), testutil.ToFloat64(p.errors))
	}
	now := f.clk.Add(16 * time.Second)
	f.s.Tick(ctx, now) // prunes the rule
	p.write(ctx, now, part(autopilot.KindLift, false, now))
	other := part(autopilot.KindApply, false, now.Add(time.Minute))
	other.Tenant, other.ActionID, other.PolicyRule.Tenant, other.PolicyRule.ID = "megacorp", "autopilot-noisy-3", "megacorp", "autopilot-noisy-3"
	p.write(ctx, now, other) // a change: it drops the expired budget
	p.write(ctx, now, part(autopilot.KindLift, true, now))
	if n := testutil.ToFloat64(p.errors); n != 0 {
		t.Fatalf("%v write errors for lifts of parts that had expired", n)
	}
	lifts := 0
	for _, au := range auditsOf(t, f) {
		if au.Action == "autopilot-lift" {
			lifts++
		}
	}
	if lifts != 2 {
		t.Fatalf("%d lifts audited, want 2", lifts)
	}
}

// TestAutopilotCommandNoOp: pausing while paused, or resuming while
// running, changes nothing (no policy version, no audit row) and answers
// 200 with the current state.
func TestAutopilotCommandNoOp(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	srv := httptest.NewServer(f.s.Handler())
	defer srv.Close()
	command := func(body string) (int, string) {
		t.Helper()
		code, msg := post(t, srv.URL+api.PathAutopilot, f.token, body)
		if code != http.StatusOK {
			t.Fatalf("%s: %d %s", body, code, msg)
		}
		return code, msg
	}
	audits := func() int { return len(auditsOf(t, f)) }
	// Resuming an autopilot that was never paused.
	v, n := f.s.Policy().Version, audits()
	if _, msg := command(`{"resume":true}`); strings.Contains(msg, `"paused":true`) {
		t.Fatalf("resume while running: %s", msg)
	}
	if f.s.Policy().Version != v || audits() != n {
		t.Fatalf("resume while running: version %d → %d, audit rows %d → %d", v, f.s.Policy().Version, n, audits())
	}
	command(`{"pause":true}`)
	v, n = f.s.Policy().Version, audits()
	for range 15 {
		if _, msg := command(`{"pause":true}`); !strings.Contains(msg, `"paused":true`) {
			t.Fatalf("pause while paused: %s", msg)
		}
	}
	if f.s.Policy().Version != v || audits() != n {
		t.Fatalf("15 pauses while paused: version %d → %d, audit rows %d → %d", v, f.s.Policy().Version, n, audits())
	}
	command(`{"resume":true}`)
	if p := f.s.Policy(); p.Version != v+1 || p.Autopilot.Paused || audits() != n+1 {
		t.Fatalf("resume: version %d, paused %v, audit rows %d", p.Version, p.Autopilot.Paused, audits())
	}
	command(`{"resume":true}`)
	if f.s.Policy().Version != v+1 || audits() != n+1 {
		t.Fatal("resume while running made a version")
	}
}

// TestAutopilotCancelKeptAcrossRestart: a cancel spares its tenant from
// new actions until the cancelled one would have ended, and a collector
// restarted on its data dir keeps that (before, it acted on the tenant
// again within minutes of a restart).
func TestAutopilotCancelKeptAcrossRestart(t *testing.T) {
	f := newFixture(t)
	ends := f.clk.Now().Add(15 * time.Minute)
	p := f.s.feat.pilot
	if n := p.eng.Restore([]autopilot.Action{{ID: "autopilot-noisy-1", Rule: "noisy", Tenant: "bigcorp", Action: policy.AutopilotQuota,
		Started: f.clk.Now(), Changed: f.clk.Now(), Expires: ends, Limit: 50}}); n != 1 {
		t.Fatalf("restored %d actions", n)
	}
	if _, err := p.command(context.Background(), f.clk.Now(), api.AutopilotCommand{Cancel: "autopilot-noisy-1"}, "ops"); err != nil {
		t.Fatal(err)
	}
	f.stop()
	f.start()
	defer f.stop()
	if got := f.s.feat.pilot.eng.Spared(); !got["bigcorp"].Equal(ends) {
		t.Fatalf("spared after a restart: %v, want bigcorp until %v", got, ends)
	}
}

// TestAutopilotAuditAfterItsCause: a decision taken on the snapshot of a
// whole second is audited when it is written, so that it lists after the
// admin's change it followed from within that second (a trial saw
// autopilot-mode at 16:48:35 before the autopilot-set at 16:48:35.35 that
// caused it).
func TestAutopilotAuditAfterItsCause(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	p := f.s.feat.pilot
	at := f.clk.Add(350 * time.Millisecond)
	d := autopilot.Decision{Time: t0, Rule: "noisy", Tenant: "bigcorp", Kind: autopilot.KindMode, Action: policy.AutopilotQuota,
		ActionID: "autopilot-noisy-1", Limit: 12.12, PolicyRule: &policy.Rule{ID: "autopilot-noisy-1", Tenant: "bigcorp",
			Action: policy.Quota, RUPerSecond: 12.12, Expires: t0.Add(time.Hour), Reason: "autopilot/noisy mode", CreatedBy: "autopilot/noisy", Created: t0}}
	p.write(context.Background(), t0, d)
	as := auditsOf(t, f)
	if len(as) != 2 || as[0].Action != "add" || as[1].Action != "autopilot-mode" || !as[0].Time.Equal(at) || !as[1].Time.Equal(at) {
		t.Fatalf("audit %+v, want the rule's add and autopilot-mode at %v", as, at)
	}
}

// TestAutopilotActionsKeptAcrossRestart: a collector alone restarted on
// its data dir follows the actions it had (before, /v1/autopilot showed
// none, the gauges dropped to 0, their rules stayed in the policy
// unfollowed, their end was never audited, and a second rule could be
// added for the same tenant). One whose rule was removed by hand while
// it was stopped ends at once, its lift audited; the other ends at its
// time, audited too, and the saved set is then empty.
func TestAutopilotActionsKeptAcrossRestart(t *testing.T) {
	f := newFixture(t)
	p := f.s.feat.pilot
	ctx := context.Background()
	now := f.clk.Now()
	if err := p.setAutopilot(ctx, now, "ops", auditAutopilotSet, func(a *policy.Autopilot) bool {
		*a = pilotRule(policy.AutopilotEnforce)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	ends := now.Add(15 * time.Minute)
	var acts []autopilot.Action
	for i, tn := range []string{"bigcorp", "megacorp"} {
		id := fmt.Sprintf("autopilot-noisy-neighbour-%d", i)
		acts = append(acts, autopilot.Action{ID: id, Rule: "noisy-neighbour", Tenant: tn, Action: policy.AutopilotQuota,
			Started: now, Changed: now, Expires: ends, Limit: 32, Evidence: autopilot.Evidence{BaselineRU: 32}})
		r := policy.Rule{ID: id, Tenant: tn, Action: policy.Quota, RUPerSecond: 32, Expires: ends, Reason: "autopilot/noisy-neighbour apply"}
		if _, err := p.pol.setRule(ctx, now, policy.MaxAutopilotSeconds*time.Second, r, "autopilot/noisy-neighbour", false); err != nil {
			t.Fatal(err)
		}
	}
	if n := p.eng.Restore(acts); n != 2 {
		t.Fatalf("restored %d", n)
	}
	p.saveActions(ctx, now)
	// megacorp's rule is lifted by hand while the collector is down.
	lifted := policy.Rule{ID: acts[1].ID, Tenant: "megacorp", Action: policy.Quota, RUPerSecond: 32, Expires: now, Reason: "x"}
	if _, err := p.pol.setRule(ctx, now, time.Hour, lifted, "ops", false); err != nil {
		t.Fatal(err)
	}
	f.stop()
	f.start()
	defer f.stop()
	p = f.s.feat.pilot
	at := f.clk.Add(time.Second)
	p.step(ctx, at, &api.Snapshot{Time: at})
	if got := p.eng.Active(); len(got) != 1 || got[0].ID != acts[0].ID || got[0].Tenant != "bigcorp" {
		t.Fatalf("active after a restart: %+v, want bigcorp's action", got)
	}
	if st := p.state().Status; len(st.Active) != 1 || testutil.ToFloat64(p.active.WithLabelValues("enforce")) != 1 {
		t.Fatalf("status %+v, gauge %v", st.Active, testutil.ToFloat64(p.active.WithLabelValues("enforce")))
	}
	if n := p.eng.Restore(acts[:1]); n != 0 {
		t.Fatal("a second action for bigcorp")
	}
	lifts := func() []string {
		var ids []string
		for _, au := range auditsOf(t, f) {
			var d autopilot.Decision
			if au.Action == "autopilot-lift" && json.Unmarshal([]byte(au.Rule), &d) == nil {
				ids = append(ids, d.ActionID)
			}
		}
		return ids
	}
	if got := lifts(); !slices.Equal(got, []string{acts[1].ID}) {
		t.Fatalf("lifts audited %v, want megacorp's", got)
	}
	end := f.clk.Add(15 * time.Minute)
	p.step(ctx, end, &api.Snapshot{Time: end})
	if got := lifts(); len(p.eng.Active()) != 0 || !slices.Equal(got, []string{acts[1].ID, acts[0].ID}) {
		t.Fatalf("at its end: active %+v, lifts audited %v", p.eng.Active(), got)
	}
	if pol := f.s.Policy(); len(pol.Rules) != 0 {
		t.Fatalf("rules left in the policy: %+v", pol.Rules)
	}
	// GET /v1/autopilot names the policy rule each lift removed (newest
	// first).
	b, _ := json.Marshal(p.state())
	var st struct {
		Decisions []struct {
			Kind       string `json:"kind"`
			ActionID   string `json:"action_id"`
			PolicyRule struct {
				ID string `json:"id"`
			} `json:"policy_rule"`
		} `json:"decisions"`
	}
	if err := json.Unmarshal(b, &st); err != nil || len(st.Decisions) != 2 {
		t.Fatalf("%v: %s", err, b)
	}
	for i, d := range st.Decisions {
		if want := acts[i].ID; d.Kind != "lift" || d.ActionID != want || d.PolicyRule.ID != want {
			t.Fatalf("decision %d: %+v, want the lift of %s", i, d, want)
		}
	}
	f.stop()
	f.start()
	later := f.clk.Add(time.Second)
	f.s.feat.pilot.step(ctx, later, &api.Snapshot{Time: later})
	if got := f.s.feat.pilot.eng.Active(); len(got) != 0 {
		t.Fatalf("ended actions back after a restart: %+v", got)
	}
}

// TestAutopilotRecoveryKeptAcrossRestart: an action's timing is saved
// when it changes without a decision, and a collector restarted on its
// data dir takes it up where it was. The quota applied at 0 s; its
// victims count as recovered from 1 s (no decision: the hold runs); the
// collector is stopped from 1 s to 10 s; at 31 s a hold has passed since
// the apply and since the recovery, and the action relaxes then, as it
// would have without the restart. Before, the file kept only what
// decisions wrote, and the restored action counted the recovery from its
// first step after the restart: it relaxed at 41 s. A file saved before
// Calm was kept still loads, and its action does that.
func TestAutopilotRecoveryKeptAcrossRestart(t *testing.T) {
	if got := relaxAfterRestart(t, false); got != 31*time.Second {
		t.Fatalf("relaxed %v after the apply, want 31s as without a restart", got)
	}
	if got := relaxAfterRestart(t, true); got != 41*time.Second {
		t.Fatalf("from a file without calm: relaxed %v after the apply, want 41s", got)
	}
}

// relaxAfterRestart runs TestAutopilotRecoveryKeptAcrossRestart's action
// (with old, restarted on the file as saved before Calm was kept) and
// returns when it relaxed, from its apply (0: not within a minute).
func relaxAfterRestart(t *testing.T, old bool) time.Duration {
	f := newFixture(t)
	p := f.s.feat.pilot
	ctx := context.Background()
	start := f.clk.Now()
	act := pilotActing(t, f, 15*time.Minute)
	r := policy.Rule{ID: act.ID, Tenant: "bigcorp", Action: policy.Quota, RUPerSecond: 32, Expires: act.Expires, Reason: "autopilot/noisy-neighbour apply"}
	if _, err := p.pol.setRule(ctx, start, policy.MaxAutopilotSeconds*time.Second, r, "autopilot/noisy-neighbour", false); err != nil {
		t.Fatal(err)
	}
	// No victims: recovered, and written once that lasted calmSettle.
	calm := f.clk.Add(time.Second)
	p.step(ctx, calm, &api.Snapshot{Time: calm})
	for range calmSettle / time.Second {
		at := f.clk.Add(time.Second)
		p.step(ctx, at, &api.Snapshot{Time: at})
	}
	file := filepath.Join(f.dir, actionsFile)
	sp, b := readSaved(t, file)
	if saved := sp.Actions; len(saved) != 1 || !saved[0].Calm.Equal(calm) || saved[0].Level != 0 {
		t.Fatalf("saved %s, want the action calm since %v", b, calm)
	}
	f.stop()
	if old {
		b, _ = json.Marshal([]autopilot.Action{act})
		if strings.Contains(string(b), `"calm"`) {
			t.Fatalf("an action without Calm saves it: %s", b)
		}
		if err := os.WriteFile(file, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	f.clk.Set(start.Add(10 * time.Second))
	f.start()
	defer f.stop()
	for sec := 11; sec <= 60; sec++ {
		at := f.clk.Add(time.Second)
		f.s.feat.pilot.step(ctx, at, &api.Snapshot{Time: at})
		if a := f.s.feat.pilot.eng.Active(); len(a) != 1 || a[0].Level > 0 {
			return at.Sub(start)
		}
	}
	return 0
}

// TestAutopilotSpacingKeptAcrossRestart: an action that ended before a
// restart still spaces the next new one: the collector restarted on its
// data dir spaces new actions from its start. Before, the file kept the
// active actions only, and a new action could start the second after
// the restart. A file of before (an array of actions) still loads.
func TestAutopilotSpacingKeptAcrossRestart(t *testing.T) {
	f := newFixture(t)
	p := f.s.feat.pilot
	ctx := context.Background()
	start := f.clk.Now()
	act := pilotActing(t, f, 20*time.Second)
	end := f.clk.Add(20 * time.Second)
	p.step(ctx, end, &api.Snapshot{Time: end})
	if a := p.eng.Active(); len(a) != 0 {
		t.Fatalf("active at its end: %+v", a)
	}
	f.stop()
	f.start()
	at := f.clk.Add(time.Second)
	f.s.feat.pilot.step(ctx, at, &api.Snapshot{Time: at})
	if got := f.s.feat.pilot.eng.LastStart(); !got.Equal(start) {
		t.Fatalf("after a restart new actions are spaced from %v, want %v", got, start)
	}
	f.stop()
	b, _ := json.Marshal([]autopilot.Action{act})
	if err := os.WriteFile(filepath.Join(f.dir, actionsFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	f.start()
	defer f.stop()
	at = f.clk.Add(time.Second)
	f.s.feat.pilot.step(ctx, at, &api.Snapshot{Time: at})
	if got := f.s.feat.pilot.eng.LastStart(); !got.Equal(start) {
		t.Fatalf("from a file of before: spaced from %v, want %v", got, start)
	}
}

// pilotActing gives f's autopilot the default rule in enforce and an
// action of it against bigcorp (a quota of 32 RU/s, its baseline), as
// one restored: started now, ending after d. It returns the action.
func pilotActing(t *testing.T, f *fixture, d time.Duration) autopilot.Action {
	t.Helper()
	p := f.s.feat.pilot
	start := f.clk.Now()
	if err := p.setAutopilot(context.Background(), start, "ops", auditAutopilotSet, func(a *policy.Autopilot) bool {
		*a = pilotRule(policy.AutopilotEnforce)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	act := autopilot.Action{ID: "autopilot-noisy-neighbour-1", Rule: "noisy-neighbour", Tenant: "bigcorp", Action: policy.AutopilotQuota,
		Started: start, Changed: start, Expires: start.Add(d), Limit: 32, Evidence: autopilot.Evidence{BaselineRU: 32}}
	if n := p.eng.Restore([]autopilot.Action{act}); n != 1 {
		t.Fatalf("restored %d", n)
	}
	return act
}

// TestAutopilotRestartStatesTheLastFigures: an action that ends while
// the collector is stopped is lifted at its restart with the figures its
// last step saw (bigcorp at 20 RU/s under its quota), saved with it.
// Before, the lift stated the figures of its apply.
func TestAutopilotRestartStatesTheLastFigures(t *testing.T) {
	f := newFixture(t)
	p := f.s.feat.pilot
	ctx := context.Background()
	start := f.clk.Now()
	pilotActing(t, f, 30*time.Second)
	at := f.clk.Add(time.Second)
	p.step(ctx, at, &api.Snapshot{Time: at, Tenants: []api.TenantRow{{Tenant: "bigcorp", Tier: "T2", RUPerSec: 20}}})
	f.stop()
	f.clk.Set(start.Add(time.Minute))
	f.start()
	defer f.stop()
	at = f.clk.Add(time.Second)
	f.s.feat.pilot.step(ctx, at, &api.Snapshot{Time: at})
	st := f.s.feat.pilot.state()
	if len(st.Decisions) != 1 || st.Decisions[0].Kind != autopilot.KindLift || st.Decisions[0].Evidence.Load != 20 {
		t.Fatalf("decisions after a restart %+v, want a lift stating bigcorp at 20 RU/s", st.Decisions)
	}
}

// readSaved reads the actions file.
func readSaved(t *testing.T, file string) (savedPilot, []byte) {
	t.Helper()
	b, err := os.ReadFile(file)
	var sp savedPilot
	if err == nil {
		err = json.Unmarshal(b, &sp)
	}
	if err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return sp, b
}

// TestAutopilotFlappingVictimsWriteNothing: victims whose p95 swings
// every second across the recover threshold (2.5× and 1.2× their
// baseline) start and end the action's calm each second; that is not
// worth a write: the actions file, written at the first step, is not
// written again in 30 such seconds. Victims that then stay recovered
// are written once, when their calm has lasted calmSettle, with its
// start; a graceful stop writes the action's last figures. Before, the
// file was rewritten every second of the flapping.
func TestAutopilotFlappingVictimsWriteNothing(t *testing.T) {
	f := newFixture(t)
	p := f.s.feat.pilot
	ctx := context.Background()
	pilotActing(t, f, 15*time.Minute)
	file := filepath.Join(f.dir, actionsFile)
	var last os.FileInfo
	writes, calms := 0, 0
	step := func(factor float64) time.Time {
		t.Helper()
		at := f.clk.Add(time.Second)
		p.step(ctx, at, victimsAt(at, factor))
		fi, err := os.Stat(file)
		if err != nil {
			t.Fatal(err)
		}
		if last == nil || !os.SameFile(last, fi) {
			writes++
		}
		last = fi
		if a := p.eng.Active(); len(a) != 1 || a[0].Level != 0 {
			t.Fatalf("active %+v, want the action as it began", a)
		} else if !a[0].Calm.IsZero() {
			calms++
		}
		return at
	}
	for sec := range 31 {
		step([]float64{2.5, 1.2}[sec%2])
	}
	if writes != 1 || calms != 15 {
		t.Fatalf("flapping victims: %d writes, %d seconds calm; want 1 write (the first step's), 15 seconds calm", writes, calms)
	}
	calm := step(1.2)
	for range calmSettle/time.Second - 1 {
		step(1.2)
	}
	if sp, b := readSaved(t, file); writes != 1 || !sp.Actions[0].Calm.IsZero() {
		t.Fatalf("%d writes, saved %s: a calm written before it lasted %v", writes, b, calmSettle)
	}
	step(1.2)
	if sp, b := readSaved(t, file); writes != 2 || !sp.Actions[0].Calm.Equal(calm) || sp.Actions[0].Last == nil || sp.Actions[0].Last.Load != 100 {
		t.Fatalf("%d writes, saved %s: want a second write, calm since %v", writes, b, calm)
	}
	// bigcorp's load changes, its calm goes on: nothing to write until
	// the stop, which writes the figures of that last step.
	at := f.clk.Add(time.Second)
	s := victimsAt(at, 1.2)
	s.Tenants[0].RUPerSec = 90
	p.step(ctx, at, s)
	if fi, err := os.Stat(file); err != nil || !os.SameFile(last, fi) {
		t.Fatalf("%v: the file was written for a change of figures alone", err)
	}
	f.stop()
	if sp, b := readSaved(t, file); sp.Actions[0].Last == nil || sp.Actions[0].Last.Load != 90 || !sp.Actions[0].Calm.Equal(calm) {
		t.Fatalf("saved at a stop %s: want the last figures (bigcorp at 90 RU/s)", b)
	}
}

// victimsAt is a snapshot at at of bigcorp at 100 RU/s (over half its
// limit: not quiet) and five tenants whose p95 is factor × their
// baseline, each on 50 requests a window (enough to be judged alone).
func victimsAt(at time.Time, factor float64) *api.Snapshot {
	s := &api.Snapshot{Time: at, Tenants: []api.TenantRow{{Tenant: "bigcorp", Tier: "T2", RUPerSec: 100, Share: 100.0 / 150}}}
	for i := range 5 {
		s.Tenants = append(s.Tenants, api.TenantRow{Tenant: fmt.Sprintf("t%d", i), Tier: "T2", RUPerSec: 10, Share: 10.0 / 150, ReqPerSec: 5,
			P95Seconds: 0.02 * factor, BaselineP95Seconds: 0.02, BaselineShare: 0.2})
	}
	return s
}

// TestAutopilotStateMarshalledOnceASecond: a second in which nothing a
// restart acts on changed (victims flapping, the offender's figures
// moving) marshals the autopilot's state once, to compare it with what
// was written; a second that writes marshals it once more, whole. Before,
// every second marshalled it twice (whole, and without the figures).
func TestAutopilotStateMarshalledOnceASecond(t *testing.T) {
	f := newFixture(t)
	defer f.stop()
	p := f.s.feat.pilot
	ctx := context.Background()
	pilotActing(t, f, 15*time.Minute)
	at := f.clk.Add(time.Second)
	p.step(ctx, at, victimsAt(at, 2.5)) // written: the first step
	marshals := 0
	p.save.marshal = func(v any) ([]byte, error) { marshals++; return json.Marshal(v) }
	for sec := range 10 {
		at := f.clk.Add(time.Second)
		s := victimsAt(at, []float64{1.2, 2.5}[sec%2])
		s.Tenants[0].RUPerSec = float64(90 + sec)
		p.step(ctx, at, s)
	}
	if marshals != 10 {
		t.Fatalf("10 seconds with nothing to write marshalled the state %d times, want 10", marshals)
	}
	marshals = 0
	if _, err := p.command(ctx, f.clk.Now(), api.AutopilotCommand{Cancel: "autopilot-noisy-neighbour-1"}, "ops"); err != nil {
		t.Fatal(err)
	}
	if marshals != 2 {
		t.Fatalf("a cancel, written, marshalled the state %d times, want 2", marshals)
	}
}

// TestAutopilotDecisionsKeptAcrossRestart: the recent decisions GET
// /v1/autopilot lists (and the live view's status) survive a restart of
// a collector alone, newest first, bounded by api.MaxAutopilotRecent,
// from the first GET after it. Before, the actions came back from the
// actions file but the decisions that explain them were gone: an
// on-call engineer read an active quota with no apply behind it; and
// then, until the first step (a second later), both were. A file saved
// without them still loads.
func TestAutopilotDecisionsKeptAcrossRestart(t *testing.T) {
	f := newFixture(t)
	p := f.s.feat.pilot
	ctx := context.Background()
	act := pilotActing(t, f, 15*time.Minute)
	n := api.MaxAutopilotRecent + 3
	var want []string // newest first
	for i := range n {
		at := f.clk.Add(time.Second)
		d := autopilot.Decision{Time: at, Rule: act.Rule, Tenant: act.Tenant, Kind: autopilot.KindMode, Action: act.Action,
			ActionID: act.ID, Level: 0, Limit: float64(30 + i), Why: fmt.Sprintf("decision %d", i),
			PolicyRule: &policy.Rule{ID: act.ID, Tenant: act.Tenant, Action: policy.Quota, RUPerSecond: float64(30 + i),
				Expires: act.Expires, Reason: "autopilot/noisy-neighbour mode"}}
		p.write(ctx, at, d)
		want = append([]string{d.String()}, want...)
	}
	want = want[:api.MaxAutopilotRecent]
	at := f.clk.Add(time.Second)
	p.step(ctx, at, &api.Snapshot{Time: at})
	f.stop()
	f.start()
	defer f.stop()
	check := func(when string, st autopilotState, live *api.AutopilotStatus) {
		t.Helper()
		var got []string
		for _, d := range st.Decisions {
			got = append(got, d.String())
		}
		if !slices.Equal(got, want) || !slices.Equal(st.Status.Recent, want) {
			t.Fatalf("decisions %s:\n%s\nwant the %d newest before it:\n%s", when, strings.Join(got, "\n"), len(want), strings.Join(want, "\n"))
		}
		if len(st.Status.Active) != 1 || st.Status.Active[0].ID != act.ID {
			t.Fatalf("active %s: %+v", when, st.Status.Active)
		}
		if live == nil || !slices.Equal(live.Recent, want) || len(live.Active) != 1 {
			t.Fatalf("the live view's autopilot %s: %+v", when, live)
		}
	}
	// The first GET after the restart, before any step (they come once a
	// second): before, it listed nothing for that second.
	srv := httptest.NewServer(f.s.Handler())
	defer srv.Close()
	var got autopilotState
	getJSON(t, srv.URL+api.PathAutopilot, f.token, &got)
	var live api.Snapshot
	getJSON(t, srv.URL+api.PathLive, f.token, &live)
	check("right after a restart, before its first step", got, live.Autopilot)
	at = f.clk.Add(time.Second)
	f.s.feat.pilot.step(ctx, at, &api.Snapshot{Time: at})
	s := f.s.Live()
	check("after its first step", f.s.feat.pilot.state(), s.Autopilot)
	// A file of before, without the decisions.
	f.stop()
	file := filepath.Join(f.dir, actionsFile)
	var m map[string]json.RawMessage
	b, err := os.ReadFile(file)
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if _, ok := m["recent"]; err != nil || !ok {
		t.Fatalf("%v: no decisions saved in %s", err, b)
	}
	delete(m, "recent")
	b, _ = json.Marshal(m)
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	f.start()
	at = f.clk.Add(time.Second)
	f.s.feat.pilot.step(ctx, at, &api.Snapshot{Time: at})
	if st := f.s.feat.pilot.state(); len(st.Status.Active) != 1 || len(st.Decisions) != 0 {
		t.Fatalf("from a file without decisions: active %+v, decisions %d", st.Status.Active, len(st.Decisions))
	}
}

// TestAutopilotLockCopyListedAtStart: a collector that keeps its state
// beside the fleet's lock (--quota-redis) and restarts while the lock is
// still its own takes the lock over when it starts: its first GET lists
// the actions and decisions saved there, as its first step would have.
// One that starts while another holds the lock follows none of the
// holder's actions but lists them as the holder's, and says who holds it.
func TestAutopilotLockCopyListedAtStart(t *testing.T) {
	addr := testsvc.Redis(t)
	prefix := fmt.Sprintf("{qtop-pilot-%d}:", time.Now().UnixNano())
	withLock := func(writer string) func(*Config) {
		return func(c *Config) {
			c.Writer = writer
			c.QuotaConfig = QuotaConfig{QuotaRedis: addr, QuotaPrefix: prefix}
		}
	}
	f := newFixture(t, withLock("c1"))
	ctx := context.Background()
	act := pilotActing(t, f, 15*time.Minute)
	at := f.clk.Add(time.Second)
	f.s.feat.pilot.write(ctx, at, autopilot.Decision{Time: at, Rule: act.Rule, Tenant: act.Tenant, Kind: autopilot.KindApply,
		Action: act.Action, ActionID: act.ID, Limit: act.Limit, Why: "victims hurt"})
	f.s.feat.pilot.step(ctx, at, &api.Snapshot{Time: at}) // takes the lock, saves beside it
	f.stop()
	f.start(withLock("c1"))
	defer f.stop()
	srv := httptest.NewServer(f.s.Handler())
	defer srv.Close()
	var st autopilotState
	getJSON(t, srv.URL+api.PathAutopilot, f.token, &st)
	if !st.Status.Acting || len(st.Status.Active) != 1 || st.Status.Active[0].ID != act.ID || len(st.Decisions) != 1 ||
		st.Decisions[0].Kind != autopilot.KindApply {
		t.Fatalf("c1 restarted, before its first step: acting %v (%q), active %+v, decisions %+v",
			st.Status.Acting, st.Status.Note, st.Status.Active, st.Decisions)
	}
	// c2 has the same rules (a fleet shares its policy).
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join(f.dir, policyFile))
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, policyFile), b, 0o600)
	}
	if err != nil {
		t.Fatal(err)
	}
	other := newFixture(t, withLock("c2"), func(c *Config) { c.DataDir = dir })
	defer other.stop()
	// It lists c1's actions and decisions as c1's (HeldBy), as saved
	// beside the lock: every collector of the fleet shows what is in force.
	if st := other.s.feat.pilot.state(); st.Status.Acting || st.Status.HeldBy != "c1" || len(st.Status.Active) != 1 ||
		st.Status.Active[0].ID != act.ID || len(st.Decisions) != 1 || st.Decisions[0].Kind != autopilot.KindApply ||
		!strings.Contains(st.Status.Note, "c1 holds") {
		t.Fatalf("c2 started while c1 holds the lock: acting %v, held by %q (%q), active %+v, decisions %+v",
			st.Status.Acting, st.Status.HeldBy, st.Status.Note, st.Status.Active, st.Decisions)
	}
	// Its own engine follows none of them: c1 does.
	if n := len(other.s.feat.pilot.eng.Active()); n != 0 {
		t.Fatalf("c2's engine follows %d actions; c1 holds the lock", n)
	}
}

// getJSON GETs url with token and decodes the answer into v.
func getJSON(t *testing.T, url, token string, v any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// setCounter is a Redis hook that counts the SETs of one key.
type setCounter struct {
	key string
	mu  sync.Mutex
	n   int
}

func (c *setCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *setCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (c *setCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if args := cmd.Args(); cmd.Name() == "set" && len(args) > 1 && args[1] == c.key {
			c.mu.Lock()
			c.n++
			c.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

func (c *setCounter) count() int { c.mu.Lock(); defer c.mu.Unlock(); return c.n }

// TestAutopilotLockCopyWrittenOnChange: the holder of the fleet's lock
// writes its state beside the lock as a collector alone writes its
// actions file: at its first step, when what the next holder acts on
// changes (a calm once it lasted calmSettle, a decision), not in the
// seconds when nothing did (victims flapping, the offender's figures
// moving). One that takes the lock back writes at once, over what the
// holder in between left. Before, it was written every second.
func TestAutopilotLockCopyWrittenOnChange(t *testing.T) {
	addr := testsvc.Redis(t)
	prefix := fmt.Sprintf("{qtop-pilot-%d}:", time.Now().UnixNano())
	f := newFixture(t, func(c *Config) {
		c.Writer = "c1"
		c.Peers = []string{"127.0.0.1:1"}
		c.QuotaConfig = QuotaConfig{QuotaRedis: addr, QuotaPrefix: prefix}
	})
	defer f.stop()
	p := f.s.feat.pilot
	p.unshared = false // as with --shared-policy
	ctx := context.Background()
	sets := &setCounter{key: p.lock.key + "-actions"}
	p.lock.client.AddHook(sets)
	pilotActing(t, f, 15*time.Minute)
	step := func(factor float64, ru float64) {
		t.Helper()
		at := f.clk.Add(time.Second)
		s := victimsAt(at, factor)
		s.Tenants[0].RUPerSec = ru
		p.step(ctx, at, s)
	}
	for sec := range 11 {
		step([]float64{2.5, 1.2}[sec%2], float64(100+sec))
	}
	if n := sets.count(); n != 1 {
		t.Fatalf("11 seconds, flapping: written %d times beside the lock, want 1 (the first step)", n)
	}
	for range calmSettle/time.Second + 1 {
		step(1.2, 100)
	}
	if n := sets.count(); n != 2 {
		t.Fatalf("a calm that lasted %v: written %d times, want 2", calmSettle, n)
	}
	if fw, err := p.command(ctx, f.clk.Now(), api.AutopilotCommand{Cancel: "autopilot-noisy-neighbour-1"}, "ops"); err != nil || fw != "" {
		t.Fatalf("a cancel sent to the holder: %v, passed on as %q", err, fw)
	}
	if n := sets.count(); n != 3 {
		t.Fatalf("a cancel: written %d times, want 3 (at once: the next holder must not follow the action)", n)
	}
	step(1.2, 100)
	step(1.2, 100)
	if n := sets.count(); n != 3 {
		t.Fatalf("the steps after a cancel: written %d times, want 3", n)
	}
	// c2 holds the lock for a while and leaves a state c1 cannot read;
	// c1, back, writes its own at its first step as holder.
	rc := p.lock.client
	if err := rc.Set(ctx, p.lock.key, "c2", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	step(1.2, 100)
	if err := rc.Set(ctx, sets.key, "left by c2", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rc.Del(ctx, p.lock.key).Err(); err != nil {
		t.Fatal(err)
	}
	step(1.2, 100)
	b, err := rc.Get(ctx, sets.key).Bytes()
	var sp savedPilot
	if err == nil {
		err = json.Unmarshal(b, &sp)
	}
	if err != nil || len(sp.Recent) != 1 || sp.Recent[0].Kind != autopilot.KindCancel {
		t.Fatalf("%v: beside the lock after c1 took it back: %s", err, b)
	}
}
