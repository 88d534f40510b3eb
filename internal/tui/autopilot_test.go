package tui

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/teatest"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/internal/collector"
	"github.com/qtop-dev/qtop/policy"
)

// pilotEvidence is the evidence line of the fixtures' action.
const pilotEvidence = "victims 4 (acme p95 128ms base 40ms, globex p95 123ms base 38ms) · ratio 0.42 catalog-worker · " +
	"offender ru 4800 = 55%, ×77 its baseline · baseline 62 (median before), 62 RU/s, 0.2 DB"

// pilotIncident is the incident under the autopilot: mode "enforce",
// "shadow" (the same decision, not applied), "paused" (enforced, then
// paused by hand: the action stays until it lifts), "idle" (another
// collector acts, nothing saved) or "held" (another collector acts: its
// actions listed).
func pilotIncident(mode string) api.Snapshot {
	s := incident()
	shadow := mode == "shadow"
	st := &api.AutopilotStatus{Rules: 2, Enforcing: 1, Acting: true, Paused: mode == "paused"}
	if shadow {
		st.Enforcing = 0
	}
	id := "autopilot-import-1773047627"
	st.Active = []api.AutopilotRow{
		{ID: "autopilot-pool-1773047507", Rule: "pool", Tenant: "globex", Action: "budget", Limit: 2, Unit: "sessions", Level: 1,
			Shadow: true, Started: t0.Add(-140 * time.Second), Expires: t0.Add(2*time.Minute + 40*time.Second),
			Evidence: "victims 3 · offender pool_wait 1.2 = 61%, ×9 its baseline · baseline 0.13 (median before)"},
		{ID: id, Rule: "import", Tenant: "bigcorp", Action: "quota", Limit: 62, Unit: "RU/s", Shadow: shadow,
			Started: t0.Add(-20 * time.Second), Expires: t0.Add(14*time.Minute + 40*time.Second), Evidence: pilotEvidence,
			Now: "victims 1 (acme p95 72ms base 40ms) · offender ru 1240 = 31%, ×20 its baseline · baseline 62 (median before)"},
	}
	would := ""
	if shadow {
		would = "would "
	}
	st.Recent = []string{
		"2026-03-09T09:13:47Z " + would + "apply quota rule=import tenant=bigcorp id=" + id + " level=0 limit=62 RU/s · victims hurt, offender far above its baseline · " + pilotEvidence,
		"2026-03-09T09:13:17Z would relax budget rule=pool tenant=globex id=autopilot-pool-1773047507 level=1 limit=2 sessions · victims recovered for 30s · victims 0",
		"2026-03-09T09:11:47Z would apply budget rule=pool tenant=globex id=autopilot-pool-1773047507 level=0 limit=1 sessions · victims hurt · victims 3",
	}
	s.Autopilot = st
	if mode == "idle" { // another collector holds the lock
		st.Acting, st.Active, st.Recent = false, nil, nil
		st.Note = "collector 10.0.0.2:7070 holds the autopilot's lock and acts"
		return s
	}
	if mode == "held" { // another collector holds the lock: its actions, as it saved them
		st.Acting, st.HeldBy = false, "10.0.0.2:7070"
		st.Note = "collector 10.0.0.2:7070 holds the autopilot's lock and acts: below, its actions as it last saved them"
	}
	s.Policy.Rules = append(s.Policy.Rules, policy.Rule{ID: id, Tenant: "bigcorp", Action: policy.Quota, RUPerSecond: 62, Shadow: shadow,
		Expires: t0.Add(14*time.Minute + 40*time.Second), Reason: "autopilot import: victims hurt", CreatedBy: "autopilot/import"})
	return s
}

// pilotSource is the fake source with an autopilot: it records the
// commands it is sent.
type pilotSource struct {
	*fakeSource
	mu   sync.Mutex
	cmds []api.AutopilotCommand
	fwd  string // a cancel's answer, as a collector that passed it on says
}

func (p *pilotSource) AutopilotCommand(_ context.Context, c api.AutopilotCommand) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cmds = append(p.cmds, c)
	if c.Cancel != "" {
		return p.fwd, nil
	}
	return "", nil
}

// TestGoldenAutopilot: the line under the headline and the Enforcement
// view with the autopilot enforcing, in shadow and paused, and the
// prompts of A and x.
func TestGoldenAutopilot(t *testing.T) {
	cases := []struct {
		name, mode string
		keys       []string
		w, h       int
	}{
		{name: "enforce", mode: "enforce", keys: []string{"5", "down"}, w: 120, h: 28},
		{name: "shadow", mode: "shadow", keys: []string{"5"}, w: 120, h: 27},
		{name: "paused", mode: "paused", keys: []string{"5"}, w: 100, h: 22},
		{name: "tenants_enforce", mode: "enforce", w: 110, h: 12},
		{name: "idle", mode: "idle", keys: []string{"5"}, w: 100, h: 20},
		{name: "held", mode: "held", keys: []string{"5"}, w: 120, h: 28},
		{name: "narrow", mode: "enforce", keys: []string{"5"}, w: 60, h: 16},
		{name: "cancel_prompt", mode: "enforce", keys: []string{"5", "down", "x"}, w: 120, h: 24},
		{name: "pause_prompt", mode: "enforce", keys: []string{"A"}, w: 120, h: 12},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := &pilotSource{fakeSource: newFake(Features{Throttle: true})}
			defer src.Close()
			m := New(src, WithRenderer(asciiRenderer()), WithClock(func() time.Time { return t0 }), WithLocation(time.UTC))
			m.Update(tea.WindowSizeMsg{Width: c.w, Height: c.h})
			m.Update(snapshotMsg{pilotIncident(c.mode)})
			press(m, c.keys...)
			screen := m.View()
			for _, l := range strings.Split(screen, "\n") {
				if n := len([]rune(l)); n > c.w {
					t.Fatalf("line of %d columns at width %d: %q", n, c.w, l)
				}
			}
			if n := strings.Count(screen, "\n") + 1; n != c.h {
				t.Fatalf("%d lines at height %d:\n%s", n, c.h, screen)
			}
			teatest.RequireEqualOutput(t, []byte(screen+"\n"))
		})
	}
}

// TestAutopilotHeadline: one truth, the snapshot's status; nothing
// without one, nor while it has nothing to say.
func TestAutopilotHeadline(t *testing.T) {
	for _, c := range []struct {
		st   *api.AutopilotStatus
		want string
		warn bool
	}{
		{nil, "", false},
		{&api.AutopilotStatus{Rules: 1, Acting: true}, "", false},
		{pilotIncident("idle").Autopilot, "", false},
		{&api.AutopilotStatus{Rules: 1, Paused: true}, "autopilot paused", false},
		{pilotIncident("enforce").Autopilot, "autopilot: quota bigcorp 62.0 RU/s (enforce, 14m left) · 1 more action", true},
		{pilotIncident("shadow").Autopilot, "autopilot: would quota bigcorp 62.0 RU/s (shadow, 14m left) · 1 more action", false},
		{pilotIncident("paused").Autopilot, "autopilot paused: quota bigcorp 62.0 RU/s (enforce, 14m left) · 1 more action", true},
		{&api.AutopilotStatus{Active: []api.AutopilotRow{{Action: "demote", Tenant: "x", Limit: 4, Unit: "×", Expires: t0.Add(90 * time.Minute)}}},
			"autopilot: demote x ×4.00 (enforce, 1h30m left)", true},
	} {
		got, warn := autopilotHeadline(c.st, nil, t0)
		if got != c.want || warn != c.warn {
			t.Errorf("got %q (warn %v), want %q (warn %v)", got, warn, c.want, c.warn)
		}
	}
	// An enforced action that no process applies to its tenant's load
	// says so; a shadow one has no effect to miss.
	un := []api.Unapplied{{Rule: "autopilot-import-1", Tenant: "bigcorp", DBLoad: 4.2}}
	if got, _ := autopilotHeadline(pilotIncident("enforce").Autopilot, un, t0); !strings.Contains(got, "(enforce, 14m left) · NO EFFECT: its load is database sessions") {
		t.Errorf("enforced, unapplied: %q", got)
	}
	if got, _ := autopilotHeadline(pilotIncident("shadow").Autopilot, un, t0); strings.Contains(got, "NO EFFECT") {
		t.Errorf("shadow, unapplied: %q", got)
	}
}

// TestAutopilotOnce: qtop --once prints the autopilot's line under the
// headline.
func TestAutopilotOnce(t *testing.T) {
	var b bytes.Buffer
	if err := Print(&b, pilotIncident("shadow"), FormatTable); err != nil {
		t.Fatal(err)
	}
	mustContain(t, b.String(), "headline: bigcorp 55% of RU, ×77 its baseline · victims: none\n"+
		"autopilot: would quota bigcorp 62.0 RU/s (shadow, 14m left) · 1 more action\n")
}

// pilotModel is qtop on an autopilot source, 120×30, as alice, with its
// action log.
func pilotModel(t *testing.T) (*pilotSource, *Model, *bytes.Buffer) {
	src := &pilotSource{fakeSource: newFake(Features{Throttle: true})}
	t.Cleanup(func() { src.Close() })
	log := new(bytes.Buffer)
	m := New(src, WithRenderer(asciiRenderer()), WithClock(func() time.Time { return t0 }), WithLocation(time.UTC),
		WithUser("alice"), WithActionLog(log))
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 30})
	return src, m, log
}

// TestAutopilotKeys: A asks, then pauses (or resumes a paused
// autopilot); x ends the action selected (on a policy rule, it offers to
// lift it); n keeps it;
// each command done is in the action log.
func TestAutopilotKeys(t *testing.T) {
	src, m, log := pilotModel(t)
	m.Update(snapshotMsg{pilotIncident("enforce")})

	press(m, "A", "n")
	if len(src.cmds) != 0 || m.state != stateBrowse {
		t.Fatalf("n sent %v", src.cmds)
	}
	runCmd(t, m, press(m, "A", "y"))
	press(m, "x")
	mustContain(t, m.c.status.text, "x ends the autopilot action selected in the Enforcement view (5)")
	press(m, "5", "down", "down")
	press(m, "x") // the cursor is on a policy rule now: x would lift it
	if m.state != statePrompt || m.prompt.kind != promptLift {
		t.Fatalf("x on a policy rule: state %v, prompt %+v", m.state, m.prompt)
	}
	press(m, "n")
	press(m, "up", "x")
	mustContain(t, m.View(), "End autopilot action autopilot-import-1773047627 (quota bigcorp 62.0 RU/s)?")
	runCmd(t, m, press(m, "y"))
	mustContain(t, m.c.status.text, "autopilot action autopilot-import-1773047627 ended")

	m.Update(snapshotMsg{pilotIncident("paused")})
	runCmd(t, m, press(m, "A", "y"))
	want := []api.AutopilotCommand{{Pause: true}, {Cancel: "autopilot-import-1773047627"}, {Resume: true}}
	if len(src.cmds) != len(want) || src.cmds[0] != want[0] || src.cmds[1] != want[1] || src.cmds[2] != want[2] {
		t.Fatalf("commands %+v, want %+v", src.cmds, want)
	}
	var actions []string
	for _, l := range strings.Split(strings.TrimSpace(log.String()), "\n") {
		var a action
		if err := json.Unmarshal([]byte(l), &a); err != nil {
			t.Fatal(err)
		}
		if a.User != "qtop (alice)" || a.Result != "done" {
			t.Fatalf("log line %s", l)
		}
		actions = append(actions, a.Action+" "+a.ID)
	}
	if got := strings.Join(actions, ","); got != "autopilot-pause ,autopilot-cancel autopilot-import-1773047627,autopilot-resume " {
		t.Fatalf("action log: %s", got)
	}
}

// TestAutopilotCancelForwarded: a cancel that the collector passed to
// the fleet's holder of the autopilot's lock says so, not that the limit
// lifts now, and the action log has it as forwarded.
func TestAutopilotCancelForwarded(t *testing.T) {
	src, m, log := pilotModel(t)
	src.fwd = "passed to collector c1, which holds the autopilot's lock: it ends action autopilot-pool-1773047507 at its next step (within a second)"
	m.Update(snapshotMsg{pilotIncident("enforce")})
	press(m, "5", "x")
	runCmd(t, m, press(m, "y"))
	mustContain(t, m.c.status.text, "autopilot action autopilot-pool-1773047507: cancel passed to collector c1")
	if strings.Contains(m.c.status.text, "lifts now") {
		t.Fatalf("a forwarded cancel said the limit lifts now: %s", m.c.status.text)
	}
	var a action
	if err := json.Unmarshal(bytes.TrimSpace(log.Bytes()), &a); err != nil || a.Result != "forwarded" || a.ID != "autopilot-pool-1773047507" {
		t.Fatalf("action log %s: %v", log.String(), err)
	}
}

// TestAutopilotKeysRefused: a replay is read only, a source without an
// autopilot has none, and a collector without autopilot rules says how
// to write some; a recording of a live collector passes them through.
func TestAutopilotKeysRefused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pilot.qtop")
	rec, err := NewRecorder(newFake(Features{}), path, t0, false)
	if err != nil {
		t.Fatal(err)
	}
	rec.line(recordingLine{Snapshot: ptr(pilotIncident("enforce"))})
	rec.Close()
	rp, err := OpenReplay(path)
	if err != nil {
		t.Fatal(err)
	}
	defer rp.Close()
	m := New(rp, WithRenderer(asciiRenderer()), WithLocation(time.UTC))
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 30})
	m.Update(snapshotMsg{pilotIncident("enforce")})
	press(m, "A")
	mustContain(t, m.c.status.text, "a replay is read only")
	press(m, "5", "x")
	mustContain(t, m.c.status.text, "a replay is read only")
	if m.state != stateBrowse {
		t.Fatal("a replay prompted for an autopilot command")
	}

	m2, _ := newTestModel(t, Features{Throttle: true})
	press(m2, "A")
	mustContain(t, m2.c.status.text, "this source has none")

	src := &pilotSource{fakeSource: newFake(Features{Throttle: true})}
	defer src.Close()
	m3 := New(src, WithRenderer(asciiRenderer()), WithLocation(time.UTC))
	m3.Update(snapshotMsg{incident()})
	press(m3, "A")
	mustContain(t, m3.c.status.text, "no autopilot rules")

	// Recording a collector is live: A and x pass through, as t does.
	live := &pilotSource{fakeSource: newFake(Features{Throttle: true})}
	rec2, err := NewRecorder(live, filepath.Join(dir, "live.qtop"), t0, false)
	if err != nil {
		t.Fatal(err)
	}
	defer rec2.Close()
	m4 := New(rec2, WithRenderer(asciiRenderer()), WithLocation(time.UTC))
	m4.Update(snapshotMsg{pilotIncident("enforce")})
	runCmd(t, m4, press(m4, "A", "y"))
	if len(live.cmds) != 1 || !live.cmds[0].Pause {
		t.Fatalf("A while recording sent %+v", live.cmds)
	}
}

func ptr[T any](v T) *T { return &v }

// TestAutopilotOnARealCollector: A and x post the autopilot's commands to
// a real collector with the admin token (the collector pauses, and
// answers for an action it does not have); without the admin token the
// 401 says which token and where it lives, and nothing changes.
func TestAutopilotOnARealCollector(t *testing.T) {
	// The live view is made once a second: the test's clock moves a
	// second before each screen, so that each shows the changes before it.
	var mu sync.Mutex
	clk := t0
	now := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return clk
	}
	srv, err := collector.New(collector.Config{Store: collector.StoreNone, DataDir: t.TempDir(), Demo: true, Now: now,
		Token: "report-tok", ReadToken: "read-tok", AdminToken: "admin-tok", Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	var posted []string
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == api.PathAutopilot {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			posted = append(posted, string(b)+" "+r.Header.Get("Authorization"))
			mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		srv.Handler().ServeHTTP(w, r)
	}))
	defer hs.Close()
	ctx := context.Background()
	rules := `{"rules":[{"name":"import","mode":"enforce","victims_min":3}]}`
	req, _ := http.NewRequest(http.MethodPost, hs.URL+collector.PathAutopilotPolicy, strings.NewReader(rules))
	req.Header.Set("Authorization", "Bearer admin-tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("rules: %s", resp.Status)
	}
	read := func() api.AutopilotState {
		t.Helper()
		cl, _ := api.NewClient(hs.URL, api.WithToken("read-tok"))
		st, err := cl.Autopilot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	screen := func(src Source) *Model {
		mu.Lock()
		clk = clk.Add(time.Second)
		mu.Unlock()
		m := New(src, WithRenderer(asciiRenderer()), WithLocation(time.UTC))
		m.Update(tea.WindowSizeMsg{Width: 100, Height: 30})
		s, err := src.(OnceSource).Once(ctx, Query{Measure: api.MeasureRU, Top: 5})
		if err != nil {
			t.Fatal(err)
		}
		if s.Autopilot == nil || s.Autopilot.Rules != 1 || s.Autopilot.Enforcing != 1 {
			t.Fatalf("the snapshot's autopilot: %+v", s.Autopilot)
		}
		m.Update(snapshotMsg{s})
		return m
	}

	readOnly, _ := NewCollector(hs.URL, "read-tok", api.WithToken("read-tok"))
	defer readOnly.Close()
	m := screen(readOnly)
	runCmd(t, m, press(m, "A", "y"))
	flat := strings.Join(strings.Fields(m.View()), " ")
	mustContain(t, flat, "refused the autopilot command with the token given", "401 Unauthorized",
		"--admin-token, QTOP_ADMIN_TOKEN or QTOP_ADMIN_TOKEN_FILE")
	if read().Status.Paused {
		t.Fatal("paused without the admin token")
	}

	admin, _ := NewCollector(hs.URL, "admin-tok", api.WithToken("read-tok"))
	defer admin.Close()
	m = screen(admin)
	runCmd(t, m, press(m, "A", "y"))
	if st := read(); !st.Status.Paused || !st.Rules.Paused {
		t.Fatalf("after A: %+v", st.Status)
	}
	m = screen(admin)
	press(m, "5")
	mustContain(t, m.View(), "⚙ autopilot paused", "PAUSED: no new action (A resumes)")
	runCmd(t, m, press(m, "A", "y"))
	if read().Status.Paused {
		t.Fatal("still paused after A on a paused autopilot")
	}

	// The collector's engine has no action in this short run: x on one
	// the screen shows reaches it, and its answer is shown.
	m.Update(snapshotMsg{pilotIncident("enforce")})
	runCmd(t, m, press(m, "5", "down", "x", "y"))
	mustContain(t, strings.Join(strings.Fields(m.c.status.text), " "), "autopilot-cancel", "autopilot-import-1773047627")
	mu.Lock()
	defer mu.Unlock()
	want := []string{`{"pause":true} Bearer read-tok`, `{"pause":true} Bearer admin-tok`, `{"resume":true} Bearer admin-tok`,
		`{"cancel":"autopilot-import-1773047627"} Bearer admin-tok`}
	if strings.Join(posted, "\n") != strings.Join(want, "\n") {
		t.Fatalf("posted:\n%s\nwant:\n%s", strings.Join(posted, "\n"), strings.Join(want, "\n"))
	}
}

// TestAutopilotFleet: a fleet shows the autopilot of the collector that
// acts; A pauses every collector; x reaches the one that has the action
// (here none has it: each one's answer is shown).
func TestAutopilotFleet(t *testing.T) {
	acting := &api.AutopilotStatus{Rules: 1, Acting: true}
	idle := &api.AutopilotStatus{Rules: 1, Note: "collector b holds the autopilot's lock and acts"}
	if got := fleetPilot([]api.Snapshot{{}, {Autopilot: idle}, {Autopilot: acting}}); got != acting {
		t.Fatalf("fleet's autopilot: %+v", got)
	}
	if got := fleetPilot([]api.Snapshot{{}, {Autopilot: idle}}); got != idle {
		t.Fatalf("fleet's autopilot without one acting: %+v", got)
	}
	if got := fleetPilot([]api.Snapshot{{}, {}}); got != nil {
		t.Fatalf("fleet's autopilot without any: %+v", got)
	}

	var urls []string
	var srvs []*collector.Server
	for range 2 {
		srv, err := collector.New(collector.Config{Store: collector.StoreNone, DataDir: t.TempDir(),
			Token: "report-tok", ReadToken: "read-tok", AdminToken: "admin-tok", Registerer: prometheus.NewRegistry()})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Shutdown(context.Background())
		hs := httptest.NewServer(srv.Handler())
		defer hs.Close()
		urls, srvs = append(urls, hs.URL), append(srvs, srv)
	}
	f, err := NewFleet(urls, "read-tok", "admin-tok")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx := context.Background()
	if _, err := f.AutopilotCommand(ctx, api.AutopilotCommand{Pause: true}); err != nil {
		t.Fatal(err)
	}
	for i, s := range srvs {
		if p := s.Policy(); p.Autopilot == nil || !p.Autopilot.Paused {
			t.Fatalf("collector %d not paused: %+v", i, p.Autopilot)
		}
	}
	_, err = f.AutopilotCommand(ctx, api.AutopilotCommand{Cancel: "autopilot-import-1"})
	if err == nil || strings.Count(err.Error(), "no such action") != 2 {
		t.Fatalf("cancel of an action no collector has: %v", err)
	}

	// A collector with another admin token: the resume is taken by one
	// of two, and the answer says so and why.
	other, err := collector.New(collector.Config{Store: collector.StoreNone, DataDir: t.TempDir(),
		Token: "report-tok", ReadToken: "read-tok", AdminToken: "another-tok", Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Shutdown(context.Background())
	hs := httptest.NewServer(other.Handler())
	defer hs.Close()
	mixed, _ := NewFleet([]string{urls[0], hs.URL}, "read-tok", "admin-tok")
	defer mixed.Close()
	_, err = mixed.AutopilotCommand(ctx, api.AutopilotCommand{Resume: true})
	if err == nil || !strings.Contains(err.Error(), "1 of 2 collectors took it") || !strings.Contains(err.Error(), "401") {
		t.Fatalf("resume taken by one of two: %v", err)
	}
	if srvs[0].Policy().Autopilot.Paused {
		t.Fatal("the collector that took the resume is still paused")
	}
}

// TestLiftLogsRule: x then y on a policy rule lifts it, and the action
// log names the rule it lifted (a tenant may hold a rule of its own and
// one of the autopilot's).
func TestLiftLogsRule(t *testing.T) {
	_, m, log := pilotModel(t)
	snap := pilotIncident("enforce")
	m.Update(snapshotMsg{snap})
	press(m, "5", "down", "down", "x")
	rule, ok := m.nav.cur.(*enforcementView).selectedRule()
	if !ok || m.state != statePrompt {
		t.Fatalf("no rule selected (state %v)", m.state)
	}
	runCmd(t, m, press(m, "y"))
	var a action
	if err := json.Unmarshal(bytes.TrimSpace(log.Bytes()), &a); err != nil {
		t.Fatalf("log %q: %v", log.String(), err)
	}
	if a.Action != "lift" || a.ID != rule.ID || a.ID == "" {
		t.Fatalf("logged %+v, want the lift of rule %q", a, rule.ID)
	}
}
