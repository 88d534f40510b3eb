package collector

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/autopilot"
	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/store"
)

// pilotMember is a collector of a fleet as TestAutopilotCommandsReachTheHolder
// builds it, with its HTTP API.
type pilotMember struct {
	*fixture
	url string
}

// newPilotFleet starts n collectors of one fleet on one fake clock: the
// policy shared through a ClickHouse database of their own
// (--shared-policy), the autopilot's lock in the real Redis
// (--quota-redis), their HTTP APIs served. Nothing runs by itself: the
// test steps their autopilots and reads the shared policy.
func newPilotFleet(t *testing.T, n int) []pilotMember {
	t.Helper()
	ch, rd := testsvc.ClickHouse(t), testsvc.Redis(t)
	db := fmt.Sprintf("qtop_pilot_%d_%d", os.Getpid(), time.Now().UnixNano()%1e9)
	t.Cleanup(func() {
		conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{ch}})
		if err != nil {
			return
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		conn.Exec(ctx, "DROP DATABASE IF EXISTS "+db)
	})
	prefix := fmt.Sprintf("{qtop-pilot-%d}:", time.Now().UnixNano())
	clk := &clock{t: t0}
	var ms []pilotMember
	for i := range n {
		f := &fixture{t: t, clk: clk, mem: newMemStore(), dir: t.TempDir()}
		f.start(func(c *Config) {
			c.Writer = fmt.Sprintf("c%d", i+1)
			c.Store, c.OpenStore = "clickhouse://"+ch+"/"+db, nil
			c.SharedPolicy = true
			c.QuotaConfig = QuotaConfig{QuotaRedis: rd, QuotaPrefix: prefix}
		})
		t.Cleanup(func() { f.s.Shutdown(context.Background()) })
		srv := httptest.NewServer(f.s.Handler())
		t.Cleanup(srv.Close)
		ms = append(ms, pilotMember{fixture: f, url: srv.URL})
	}
	return ms
}

// step runs m's autopilot once, a second on.
func (m pilotMember) step(snap *api.Snapshot) {
	m.t.Helper()
	snap.Time = m.clk.Add(time.Second)
	m.s.feat.pilot.step(context.Background(), snap.Time, snap)
}

// follow reads the fleet's policy log until m's policy satisfies ok.
func (m pilotMember) follow(what string, ok func(policy.Policy) bool) {
	m.t.Helper()
	testsvc.Eventually(m.t, 20*time.Second, m.s.Writer()+": "+what, func() bool {
		if err := m.s.fleet.pollPolicy(context.Background()); err != nil {
			m.t.Logf("%s: %v", m.s.Writer(), err)
		}
		return ok(m.s.Policy())
	})
}

// setPilotRules posts one autopilot rule in enforce mode to via and waits
// until every member of fl has it from the shared policy.
func setPilotRules(t *testing.T, via pilotMember, fl []pilotMember) {
	t.Helper()
	rules, _ := json.Marshal(pilotRule(policy.AutopilotEnforce))
	if code, msg := post(t, via.url+PathAutopilotPolicy, via.token, string(rules)); code != http.StatusOK {
		t.Fatalf("rules: %d %s", code, msg)
	}
	for _, m := range fl {
		m.follow("the autopilot's rules", func(p policy.Policy) bool { return p.Autopilot != nil && len(p.Autopilot.Rules) == 1 })
	}
}

// TestAutopilotCommandsReachTheHolder: in a fleet (two collectors, one
// shared policy, the autopilot's lock in Redis), a command sent to the
// collector that does not hold the lock — behind a load balancer the
// operator cannot choose — reaches the one that does.
//
// c2 held the lock and started an action; it lost the lock (its key ran
// out) and c1 took over, following the action from the copy c2 left
// beside the lock. A cancel sent to c2 is passed to c1 through Redis
// (202, naming c1), and c1 ends the action at its next step, audited
// once with the operator's credential. Before, c2 cancelled its own
// stale copy of the action (200, a cancel audited), while c1 went on
// following it and listing it (and a collector that never held it
// refused the cancel: no such action). A pause and a resume sent to c2
// reach c1 through the shared policy (they did already). The tenant a
// cancel spares is spared by the collector that takes over next: before,
// the spare stayed in the data dir of the collector that cancelled, and
// the next holder could act on the tenant again at once. A cancel sent
// while no collector holds the lock (its holder died) waits beside it,
// and the next to take the lock carries it out at its first step.
func TestAutopilotCommandsReachTheHolder(t *testing.T) {
	fl := newPilotFleet(t, 2)
	c1, c2 := fl[0], fl[1]
	ctx := context.Background()
	setPilotRules(t, c2, fl)

	// c2 steps first: it holds the lock, and starts an action (as its
	// engine would: the action in the engine, its apply written).
	c2.step(&api.Snapshot{})
	c1.step(&api.Snapshot{})
	if st := c1.s.feat.pilot.state().Status; st.Acting || !strings.Contains(st.Note, "c2 holds") {
		t.Fatalf("c1: acting %v, %q; want c2 to hold the lock", st.Acting, st.Note)
	}
	p2 := c2.s.feat.pilot
	start := c2.clk.Now()
	act := autopilot.Action{ID: "autopilot-noisy-neighbour-1", Rule: "noisy-neighbour", Tenant: "bigcorp", Action: policy.AutopilotQuota,
		Started: start, Changed: start, Expires: start.Add(15 * time.Minute), Limit: 32, Evidence: autopilot.Evidence{BaselineRU: 32}}
	if n := p2.eng.Restore([]autopilot.Action{act}); n != 1 {
		t.Fatalf("restored %d", n)
	}
	p2.write(ctx, start, autopilot.Decision{Time: start, Rule: act.Rule, Tenant: act.Tenant, Kind: autopilot.KindApply,
		Action: act.Action, ActionID: act.ID, Limit: act.Limit, Why: "victims hurt",
		PolicyRule: &policy.Rule{ID: act.ID, Tenant: act.Tenant, Action: policy.Quota, RUPerSecond: act.Limit,
			Expires: act.Expires, Reason: "autopilot/noisy-neighbour apply"}})
	c2.step(&api.Snapshot{}) // saves its state beside the lock
	hasQuota := func(p policy.Policy) bool {
		return slices.ContainsFunc(p.Rules, func(r policy.Rule) bool { return r.ID == act.ID })
	}
	c1.follow("the action's quota", hasQuota)

	// c2's key runs out (it stalled); c1 takes over and follows the action.
	lock := p2.lock
	if err := lock.client.Del(ctx, lock.key).Err(); err != nil {
		t.Fatal(err)
	}
	c1.step(&api.Snapshot{})
	p1 := c1.s.feat.pilot
	if st := p1.state().Status; !st.Acting || len(st.Active) != 1 || st.Active[0].ID != act.ID {
		t.Fatalf("c1 after taking over: acting %v, active %+v", st.Acting, st.Active)
	}
	c2.step(&api.Snapshot{})
	if st := p2.state().Status; st.Acting || st.HeldBy != "c1" || len(st.Active) != 1 || st.Active[0].ID != act.ID || len(p2.eng.Active()) != 0 {
		t.Errorf("c2 without the lock: acting %v, held by %q, lists %+v, follows %d; want c1's action listed as c1's, followed by c1 alone",
			st.Acting, st.HeldBy, st.Active, len(p2.eng.Active()))
	}

	// The cancel, sent to c2.
	code, msg := post(t, c2.url+api.PathAutopilot, c2.token, `{"cancel":"`+act.ID+`"}`)
	var answer api.AutopilotState
	if err := json.Unmarshal([]byte(msg), &answer); code != http.StatusAccepted || err != nil ||
		!strings.Contains(answer.Forwarded, "passed to collector c1") {
		t.Errorf("cancel sent to c2: %d %s; want 202 saying it was passed to c1, which ends it", code, msg)
	}
	c1.step(&api.Snapshot{})
	if st := p1.state(); len(st.Status.Active) != 0 || len(st.Decisions) == 0 || st.Decisions[0].Kind != autopilot.KindCancel {
		t.Fatalf("c1 after the cancel sent to c2: active %+v, decisions %+v; want the action cancelled", st.Status.Active, st.Decisions)
	}
	c2.step(&api.Snapshot{})
	if st := p2.state(); len(st.Status.Active) != 0 || len(st.Decisions) == 0 || st.Decisions[0].Kind != autopilot.KindCancel {
		t.Errorf("c2 after c1 cancelled: lists %+v, newest decisions %+v; want c1's state: no action, the cancel", st.Status.Active, st.Decisions)
	}
	if got := p1.eng.Spared(); !got["bigcorp"].Equal(act.Expires) {
		t.Errorf("c1 spares %v, want bigcorp until %v", got, act.Expires)
	}
	noQuota := func(p policy.Policy) bool { return !hasQuota(p) }
	c1.follow("the quota lifted", noQuota)
	c2.follow("the quota lifted", noQuota)
	audit, err := c1.s.Store().(store.AuditReader).ReadAudit(ctx, time.Time{}, t0.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var cancels []store.Audit
	for _, a := range audit {
		if a.Action == "autopilot-cancel" {
			cancels = append(cancels, a)
		}
	}
	if len(cancels) != 1 || !strings.Contains(cancels[0].Who, "admin") {
		t.Errorf("cancels audited: %+v; want one, by the operator's credential", cancels)
	}
	if code, msg := post(t, c2.url+api.PathAutopilot, c2.token, `{"cancel":"nope"}`); code != http.StatusBadRequest || !strings.Contains(msg, "no such action") {
		t.Errorf("cancel of no action, sent to c2: %d %s", code, msg)
	}

	// Pause and resume, sent to c2, reach c1.
	for _, pause := range []bool{true, false} {
		body := map[bool]string{true: `{"pause":true}`, false: `{"resume":true}`}[pause]
		if code, msg := post(t, c2.url+api.PathAutopilot, c2.token, body); code != http.StatusOK {
			t.Fatalf("%s sent to c2: %d %s", body, code, msg)
		}
		c1.follow(body, func(p policy.Policy) bool { return p.Autopilot != nil && p.Autopilot.Paused == pause })
		c1.step(&api.Snapshot{})
		if st := p1.state().Status; st.Paused != pause || p1.eng.Paused() != pause || !st.Acting {
			t.Fatalf("c1 after %s sent to c2: paused %v (engine %v), acting %v", body, st.Paused, p1.eng.Paused(), st.Acting)
		}
	}

	// c1 dies: c2 takes over, and spares bigcorp too.
	if err := lock.client.Del(ctx, lock.key).Err(); err != nil {
		t.Fatal(err)
	}
	c2.step(&api.Snapshot{})
	if !p2.state().Status.Acting {
		t.Fatal("c2 did not take over")
	}
	if got := p2.eng.Spared(); !got["bigcorp"].Equal(act.Expires) {
		t.Errorf("c2 after taking over spares %v, want bigcorp until %v (the cancel's)", got, act.Expires)
	}

	// c2 starts an action and dies; before anyone takes the lock, a
	// cancel sent to c1 waits beside it, and c1 carries it out at its
	// first step as holder.
	second := act
	second.ID, second.Tenant = "autopilot-noisy-neighbour-2", "megacorp"
	if n := p2.eng.Restore([]autopilot.Action{second}); n != 1 {
		t.Fatalf("restored %d", n)
	}
	p2.write(ctx, c2.clk.Now(), autopilot.Decision{Time: c2.clk.Now(), Rule: second.Rule, Tenant: second.Tenant, Kind: autopilot.KindApply,
		Action: second.Action, ActionID: second.ID, Limit: second.Limit, Why: "victims hurt"})
	c2.step(&api.Snapshot{})
	if err := lock.client.Del(ctx, lock.key).Err(); err != nil {
		t.Fatal(err)
	}
	code, msg = post(t, c1.url+api.PathAutopilot, c1.token, `{"cancel":"`+second.ID+`"}`)
	answer = api.AutopilotState{}
	if err := json.Unmarshal([]byte(msg), &answer); code != http.StatusAccepted || err != nil ||
		!strings.Contains(answer.Forwarded, "no collector holds") {
		t.Fatalf("cancel sent to c1 while nobody holds the lock: %d %s", code, msg)
	}
	c1.step(&api.Snapshot{})
	if st := p1.state(); !st.Status.Acting || len(st.Status.Active) != 0 || st.Decisions[0].Kind != autopilot.KindCancel ||
		st.Decisions[0].ActionID != second.ID {
		t.Fatalf("c1 taking the lock after the cancel: acting %v, active %+v, newest decision %v", st.Status.Acting, st.Status.Active, st.Decisions[0])
	}
}

// TestAutopilotLockLetGoAtStop: a holder that stops lets the autopilot's
// lock go, so the next collector of the fleet takes over at its next step
// and follows the actions the holder saved, not once the key runs out
// 5 s later (the holder, stopped, renews it no more).
func TestAutopilotLockLetGoAtStop(t *testing.T) {
	fl := newPilotFleet(t, 2)
	c1, c2 := fl[0], fl[1]
	setPilotRules(t, c1, fl)
	c1.step(&api.Snapshot{})
	c2.step(&api.Snapshot{})
	if st := c2.s.feat.pilot.state().Status; st.Acting {
		t.Fatal("c2 acts while c1 holds the lock")
	}
	// c1 runs its background work, as a collector serving does, so that
	// its Shutdown stops it first (the quota's loop among it, whose
	// Redis client the lock shares).
	c1.s.Run(t.Context())
	if err := c1.s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	c2.step(&api.Snapshot{})
	if st := c2.s.feat.pilot.state().Status; !st.Acting {
		t.Fatalf("c2 the step after c1 stopped: acting %v, %q; want it to hold the lock c1 let go", st.Acting, st.Note)
	}
}
