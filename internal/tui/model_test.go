package tui

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/policy"
)

func newTestModel(t *testing.T, f Features) (*Model, *fakeSource) {
	t.Helper()
	src := newFake(f)
	m := New(src, WithRenderer(asciiRenderer()), WithClock(func() time.Time { return t0 }), WithUser("alice"), WithLocation(time.UTC))
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 30})
	if m.Init() == nil {
		t.Fatal("Init returned no command: the model would never fetch")
	}
	m.Update(snapshotMsg{incident()})
	return m, src
}

// keyOf turns a key name into the message bubbletea sends for it.
func keyOf(k string) tea.KeyMsg {
	types := map[string]tea.KeyType{
		"enter": tea.KeyEnter, "tab": tea.KeyTab, "shift+tab": tea.KeyShiftTab, "esc": tea.KeyEsc,
		"up": tea.KeyUp, "down": tea.KeyDown, "pgup": tea.KeyPgUp, "pgdown": tea.KeyPgDown,
		"home": tea.KeyHome, "end": tea.KeyEnd, "backspace": tea.KeyBackspace, "ctrl+c": tea.KeyCtrlC, "ctrl+u": tea.KeyCtrlU,
	}
	if t, ok := types[k]; ok {
		return tea.KeyMsg{Type: t}
	}
	return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)}
}

// press sends keys; it returns the command of the last one.
func press(m *Model, keys ...string) tea.Cmd {
	var cmd tea.Cmd
	for _, k := range keys {
		_, cmd = m.Update(keyOf(k))
	}
	return cmd
}

func typeText(m *Model, s string) {
	for _, r := range s {
		m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}})
	}
}

// firstRow returns the first table row of the Tenants view.
func firstRow(t *testing.T, m *Model) string {
	t.Helper()
	lines := strings.Split(m.View(), "\n")
	for i, l := range lines {
		if strings.Contains(l, "TENANT") && strings.Contains(l, "TIER") && i+1 < len(lines) {
			return lines[i+1]
		}
	}
	t.Fatalf("no Tenants table on screen:\n%s", m.View())
	return ""
}

func mustContain(t *testing.T, screen string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(screen, w) {
			t.Errorf("screen lacks %q:\n%s", w, screen)
		}
	}
}

func TestViewSwitchKeys(t *testing.T) {
	m, _ := newTestModel(t, Features{Throttle: true})
	steps := []struct {
		key  string
		view string
		want string
	}{
		{"2", "Hot keys", "± ERR"},
		{"3", "Statements", "DURATION"},
		{"4", "Latency", "SHEDDING"},
		{"5", "Enforcement", "PRICE ×"},
		{"1", "Tenants", "THROTTLE"},
		{"tab", "Hot keys", "± ERR"},
		{"tab", "Statements", "DURATION"},
		{"shift+tab", "Hot keys", "± ERR"},
		{"shift+tab", "Tenants", "DB LOAD"},
		{"shift+tab", "Top SQL", "pg_stat_statements"},
		{"shift+tab", "Victims", "Offenders"},
		{"shift+tab", "Freshness", "no freshness view"},
		{"shift+tab", "Locks", "Lock tree"},
		{"shift+tab", "Enforcement", "Policy v3"},
		{"tab", "Locks", "xmin horizon"},
		{"6", "Locks", "ROOT BLOCKER"},
		{"tab", "Freshness", "no freshness view"},
		{"8", "Victims", "Victims: p95"},
		{"tab", "Top SQL", "TIME ms/s"},
		{"tab", "Tenants", "RU/s"},
	}
	for i, s := range steps {
		press(m, s.key)
		if m.nav.cur.name() != s.view {
			t.Fatalf("step %d: %s → view %s, want %s", i, s.key, m.nav.cur.name(), s.view)
		}
		mustContain(t, m.View(), s.want)
	}
}

func TestTenantsViewRowsAndOther(t *testing.T) {
	m, _ := newTestModel(t, Features{Throttle: true})
	screen := m.View()
	if r := firstRow(t, m); !strings.HasPrefix(r, "› bigcorp") {
		t.Fatalf("first row %q: want the selected bigcorp", r)
	}
	mustContain(t, screen, "4800", "1.84s", "55.0%", "THROTTLED", "other", "42 tenants", "sort RU/s↓")
	// "other" stays last whatever the order.
	press(m, "S")
	lines := strings.Split(strings.TrimRight(m.View(), "\n"), "\n")
	var last string
	for _, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(strings.TrimPrefix(l, "›")), "other") {
			last = l
		}
	}
	if last == "" {
		t.Fatalf("no other row after reversing:\n%s", m.View())
	}
}

func TestSortKey(t *testing.T) {
	m, _ := newTestModel(t, Features{Throttle: true})
	want := []struct {
		col   column
		first string
		query string
	}{
		{colReq, "acme", api.MeasureReq},
		{colP95, "bigcorp", api.MeasureP95},
		{colErr, "acme", api.MeasureErr},
		{colShare, "bigcorp", api.MeasureErr}, // share keeps the source's measure
		{colThrottle, "globex", api.MeasureErr},
		{colTenant, "acme", api.MeasureErr},
		{colTier, "trust-safety", api.MeasureErr},
		{colDB, "bigcorp", api.MeasureDB},
		{colRU, "bigcorp", api.MeasureRU},
		{colReq, "acme", api.MeasureReq},
	}
	for i, w := range want {
		press(m, "s")
		if viewOf[*tenantsView](m).col != w.col {
			t.Fatalf("step %d: column %v, want %v", i, viewOf[*tenantsView](m).col, w.col)
		}
		if r := firstRow(t, m); !strings.HasPrefix(r, "› "+w.first) {
			t.Fatalf("step %d: sorted by %v the first row is %q, want %s", i, w.col, r, w.first)
		}
		if m.c.query.Measure != w.query {
			t.Fatalf("step %d: query measure %q, want %q", i, m.c.query.Measure, w.query)
		}
	}
	press(m, "S") // by REQ/s ascending
	if r := firstRow(t, m); !strings.HasPrefix(r, "› trust-safety") {
		t.Fatalf("reversed: first row %q", r)
	}
	mustContain(t, m.View(), "REQ/s↑")
	// s elsewhere says where it works, and changes nothing.
	press(m, "2")
	press(m, "s")
	if viewOf[*tenantsView](m).col != colReq || !strings.Contains(m.c.status.text, "Tenants") {
		t.Fatalf("s in Hot keys: col %v status %q", viewOf[*tenantsView](m).col, m.c.status.text)
	}
}

func TestFilterKey(t *testing.T) {
	m, _ := newTestModel(t, Features{Throttle: true})
	press(m, "/")
	if m.state != stateFilter {
		t.Fatal("/ did not open the filter")
	}
	typeText(m, "glx")
	press(m, "backspace", "backspace")
	typeText(m, "lo")
	screen := m.View()
	mustContain(t, screen, "› globex", "/glo")
	if strings.Contains(screen, "acme") || strings.Contains(screen, "other") {
		t.Fatalf("filter /glo shows other tenants:\n%s", screen)
	}
	press(m, "enter")
	if m.state != stateBrowse || viewOf[*tenantsView](m).pattern != "glo" {
		t.Fatalf("enter: state %v filter %q", m.state, viewOf[*tenantsView](m).pattern)
	}
	// A new snapshot keeps the filter.
	m.Update(snapshotMsg{incident()})
	if len(viewOf[*tenantsView](m).order) != 1 {
		t.Fatalf("after a snapshot %d rows match /glo, want 1", len(viewOf[*tenantsView](m).order))
	}
	press(m, "esc") // esc in browse clears the filter
	if viewOf[*tenantsView](m).pattern != "" || !strings.Contains(m.View(), "acme") {
		t.Fatalf("esc did not clear the filter: %q", viewOf[*tenantsView](m).pattern)
	}
	press(m, "/")
	typeText(m, "nobody")
	mustContain(t, m.View(), "no row matches /nobody")
	press(m, "esc")
	if m.state != stateBrowse || viewOf[*tenantsView](m).pattern != "" {
		t.Fatalf("esc in the filter: state %v filter %q", m.state, viewOf[*tenantsView](m).pattern)
	}
	// The hot keys view filters by key or tenant.
	press(m, "2", "/")
	typeText(m, "catalog")
	press(m, "enter")
	if len(viewOf[*hotKeysView](m).order) != 1 {
		t.Fatalf("hot keys /catalog: %d rows", len(viewOf[*hotKeysView](m).order))
	}
	// Latency has no filter.
	press(m, "4", "/")
	if m.state != stateBrowse || m.c.status.text == "" {
		t.Fatalf("/ in Latency: state %v status %q", m.state, m.c.status.text)
	}
}

func TestEnterDrillsIn(t *testing.T) {
	m, _ := newTestModel(t, Features{Throttle: true})
	press(m, "enter")
	if m.nav.cur.name() != "Tenant" {
		t.Fatalf("enter: view %v", m.nav.cur.name())
	}
	mustContain(t, m.View(), "Tenant bigcorp (T2)", "12.7 AAS", "Routes", "POST /catalog/import", "Hot keys", "catalog:3",
		"Statements", "4242", "Waits (AAS): CPU 8.10 · IO 4.60", "RU/s, last 120 s (peak 4800)", "1 Tenants")
	// A new snapshot refreshes the drill-in.
	s := incident()
	s.Tenants[0].DBLoad = 20
	m.Update(snapshotMsg{s})
	mustContain(t, m.View(), "20.0 AAS")
	// t throttles the tenant drilled into.
	press(m, "t")
	if m.state != statePrompt || m.prompt.tenant != "bigcorp" {
		t.Fatalf("t in the drill-in: state %v tenant %q", m.state, m.prompt.tenant)
	}
	press(m, "esc", "esc")
	if m.nav.cur.name() != "Tenants" {
		t.Fatalf("esc: view %v, want Tenants", m.nav.cur.name())
	}
	// From the statements view, enter drills into the statement's tenant.
	press(m, "3", "end", "enter")
	if m.nav.cur.name() != "Tenant" || viewOf[*detailView](m).tenant != "acme" {
		t.Fatalf("enter on a statement: view %v tenant %q", m.nav.cur.name(), viewOf[*detailView](m).tenant)
	}
	press(m, "backspace")
	if m.nav.cur.name() != "Statements" {
		t.Fatalf("back: view %v, want Statements", m.nav.cur.name())
	}
	// "other" cannot be drilled into.
	press(m, "1", "end", "enter")
	if m.nav.cur.name() != "Tenants" || !strings.Contains(m.c.status.text, "other") {
		t.Fatalf("enter on other: view %v status %q", m.nav.cur.name(), m.c.status.text)
	}
	// A tenant gone from the window says so.
	press(m, "home", "enter")
	s.Tenants = s.Tenants[1:]
	m.Update(snapshotMsg{s})
	mustContain(t, m.View(), "no load in the window")
}

func TestNavigationKeepsSelection(t *testing.T) {
	m, _ := newTestModel(t, Features{Throttle: true})
	press(m, "down")
	if r := viewOf[*tenantsView](m).selected(); r == nil || r.Tenant != "acme" {
		t.Fatalf("down: selected %v", r)
	}
	// acme moves to the top: the cursor follows it.
	s := incident()
	s.Tenants[1].RUPerSec = 9000
	m.Update(snapshotMsg{s})
	if r := viewOf[*tenantsView](m).selected(); r == nil || r.Tenant != "acme" || viewOf[*tenantsView](m).list.cursor != 0 {
		t.Fatalf("after acme rose: selected %v at %d", r, viewOf[*tenantsView](m).list.cursor)
	}
	press(m, "end")
	if r := viewOf[*tenantsView](m).selected(); r == nil || r.Tenant != api.OtherTenant {
		t.Fatalf("end: selected %v", r)
	}
	press(m, "pgup", "home", "pgdown")
	if viewOf[*tenantsView](m).list.cursor != 4 {
		t.Fatalf("pgdown from the top of 5 rows: cursor %d", viewOf[*tenantsView](m).list.cursor)
	}
	press(m, "home")
	// Unpinned (on the first row), the cursor stays on the worst offender.
	s = incident()
	s.Tenants[2].RUPerSec = 99999
	m.Update(snapshotMsg{s})
	if r := viewOf[*tenantsView](m).selected(); r == nil || r.Tenant != "globex" {
		t.Fatalf("unpinned cursor: selected %v, want the new top globex", r)
	}
}

func TestPauseKey(t *testing.T) {
	m, _ := newTestModel(t, Features{Throttle: true})
	press(m, "p")
	mustContain(t, m.View(), "PAUSED")
	s := incident()
	s.Time = t0.Add(time.Second)
	s.Tenants[0].RUPerSec = 1
	_, cmd := m.Update(snapshotMsg{s})
	if cmd == nil {
		t.Fatal("paused: the model stopped fetching")
	}
	if m.snap.Time != t0 || !strings.Contains(m.View(), "4800") {
		t.Fatal("paused: a new snapshot was shown")
	}
	press(m, "p")
	if m.snap.Time != s.Time || strings.Contains(m.View(), "PAUSED") {
		t.Fatal("resumed: the pending snapshot was not shown")
	}
}

// runCmd runs an action command and feeds its message back.
func runCmd(t *testing.T, m *Model, cmd tea.Cmd) tea.Msg {
	t.Helper()
	if cmd == nil {
		t.Fatal("no command")
	}
	msg := cmd()
	m.Update(msg)
	return msg
}

func TestThrottleKey(t *testing.T) {
	m, src := newTestModel(t, Features{Throttle: true})
	press(m, "t")
	if m.state != statePrompt || m.prompt.kind != promptThrottle || m.prompt.tenant != "bigcorp" {
		t.Fatalf("t: state %v prompt %+v", m.state, m.prompt)
	}
	mustContain(t, m.View(), "Throttle bigcorp: RU/s cap [480▏] for [15m]")
	press(m, "backspace", "backspace", "backspace")
	typeText(m, "100")
	press(m, "tab", "ctrl+u")
	typeText(m, "1h")
	press(m, "enter")
	if !m.prompt.confirm {
		t.Fatalf("enter did not ask for confirmation: %+v", m.prompt)
	}
	mustContain(t, m.View(), "Throttle bigcorp to 100 RU/s for 1h0m0s? y confirm")
	cmd := press(m, "y")
	if m.state != stateBrowse {
		t.Fatalf("y: state %v", m.state)
	}
	msg := runCmd(t, m, cmd)
	if am, ok := msg.(actionMsg); !ok || am.err != nil {
		t.Fatalf("throttle command: %#v", msg)
	}
	if len(src.throttles) != 1 {
		t.Fatalf("posted %d rules, want 1", len(src.throttles))
	}
	r := src.throttles[0]
	if r.Tenant != "bigcorp" || r.Action != policy.Throttle || r.RUPerSecond != 100 || !r.Expires.Equal(t0.Add(time.Hour)) ||
		!strings.Contains(r.Reason, "alice") || r.Validate() != nil {
		t.Fatalf("rule %+v", r)
	}
	mustContain(t, m.View(), "bigcorp throttled to 100 RU/s")
}

func TestThrottleBadInputLosesNothing(t *testing.T) {
	m, src := newTestModel(t, Features{Throttle: true})
	for _, c := range []struct{ ru, dur, want string }{
		{"-5", "15m", "RU/s cap"},
		{"lots", "15m", "RU/s cap"},
		{"100", "forever", "duration"},
		{"100", "-1m", "duration"},
		{"100", "9999h", "duration"},
	} {
		press(m, "t", "ctrl+u")
		typeText(m, c.ru)
		press(m, "tab", "ctrl+u")
		typeText(m, c.dur)
		press(m, "enter")
		if m.state != statePrompt || m.prompt.confirm || !strings.Contains(m.prompt.err, c.want) {
			t.Fatalf("%+v: state %v confirm %v err %q", c, m.state, m.prompt.confirm, m.prompt.err)
		}
		mustContain(t, m.View(), c.want)
		// What was typed is still there to fix.
		if m.prompt.ru.value != c.ru || m.prompt.dur.value != c.dur {
			t.Fatalf("%+v: the prompt lost the input: %+v", c, m.prompt)
		}
		press(m, "esc")
	}
	// n at the confirmation does nothing either.
	press(m, "t", "enter", "n")
	if len(src.throttles) != 0 || m.state != stateBrowse {
		t.Fatalf("bad input or n posted %d rules", len(src.throttles))
	}
	// No throttle of "other", nor without a collector.
	press(m, "end", "t")
	if m.state != stateBrowse || !strings.Contains(m.c.status.text, "other") {
		t.Fatalf("t on other: state %v status %q", m.state, m.c.status.text)
	}
	pg, _ := newTestModel(t, Features{Signal: true})
	press(pg, "t")
	if pg.state != stateBrowse || !strings.Contains(pg.c.status.text, "needs a collector") {
		t.Fatalf("t without a collector: state %v status %q", pg.state, pg.c.status.text)
	}
}

func TestThrottleErrorShown(t *testing.T) {
	m, src := newTestModel(t, Features{Throttle: true})
	src.feats.Throttle = false // the source refuses
	cmd := press(m, "t", "enter", "y")
	runCmd(t, m, cmd)
	if m.c.status.ok || !strings.Contains(m.c.status.text, "throttle bigcorp") {
		t.Fatalf("status %q ok %v", m.c.status.text, m.c.status.ok)
	}
}

// TestSignalMarkedAndMovedOn: space marks several statements; c acts on
// each, only as shown (pid and query_start), reports those that moved on,
// and logs every action with who asked.
func TestSignalMarkedAndMovedOn(t *testing.T) {
	m, src := newTestModel(t, Features{Signal: true})
	var log strings.Builder
	m.log = &actionLog{w: &log}
	m.user = "alice"
	src.moved = map[int32]bool{5150: true}
	press(m, "3", " ", " ", " ")
	if len(viewOf[*statementsView](m).marked) != 3 {
		t.Fatalf("marked %v", viewOf[*statementsView](m).marked)
	}
	mustContain(t, m.View(), "*4242", "*4243", "*5150")
	press(m, "c")
	mustContain(t, m.View(), "Cancel the statements of 3 backends (4242, 4243, 5150)?")
	runCmd(t, m, press(m, "y"))
	if fmt.Sprint(src.cancels) != "[4242 4243]" {
		t.Fatalf("cancels %v", src.cancels)
	}
	if tg := src.targets[0]; !tg.QueryStart.Equal(t0.Add(-41*time.Second)) || src.actors[0] != "qtop (alice)" {
		t.Fatalf("target %+v by %q", tg, src.actors[0])
	}
	mustContain(t, m.c.status.text, "cancel sent to backend 4242, 4243", "backend 5150 moved on")
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], `"user":"qtop (alice)"`) || !strings.Contains(lines[0], `"query_start":"2026-03-09T09:13:26Z"`) ||
		!strings.Contains(lines[2], `"result":"moved on"`) {
		t.Fatalf("action log:\n%s", log.String())
	}
	if len(viewOf[*statementsView](m).marked) != 0 {
		t.Fatal("marks kept after the action")
	}
	// Space outside the Statements view marks nothing.
	press(m, "1", " ")
	mustContain(t, m.c.status.text, "space marks statements")
}

func TestCancelTerminateKeys(t *testing.T) {
	m, src := newTestModel(t, Features{Signal: true})
	press(m, "c")
	if m.state != stateBrowse || !strings.Contains(m.c.status.text, "Statements") {
		t.Fatalf("c in Tenants: state %v status %q", m.state, m.c.status.text)
	}
	press(m, "3")
	if s := viewOf[*statementsView](m).selected(); s == nil || s.PID != 4242 {
		t.Fatalf("first statement %+v, want bigcorp's longest 4242", s)
	}
	press(m, "c")
	mustContain(t, m.View(), "Cancel the statement of backend 4242")
	runCmd(t, m, press(m, "y"))
	press(m, "down", "k")
	mustContain(t, m.View(), "Terminate backend 4243? only if it still runs this · y confirm · n/esc keep it · UPDATE stock SET n = n - 1")
	press(m, "n")
	press(m, "k")
	runCmd(t, m, press(m, "y"))
	if fmt.Sprint(src.cancels, src.terms) != "[4242] [4243]" {
		t.Fatalf("cancels %v terminates %v", src.cancels, src.terms)
	}
	mustContain(t, m.View(), "terminate sent to backend 4243")

	col, csrc := newTestModel(t, Features{Throttle: true})
	press(col, "3", "c")
	press(col, "k")
	if col.state != stateBrowse || !strings.Contains(col.c.status.text, "--postgres") || len(csrc.cancels)+len(csrc.terms) != 0 {
		t.Fatalf("c/k without --postgres: state %v status %q", col.state, col.c.status.text)
	}
}

func TestHelpKey(t *testing.T) {
	m, _ := newTestModel(t, Features{Throttle: true})
	press(m, "?")
	if m.state != stateHelp {
		t.Fatal("? did not open help")
	}
	mustContain(t, m.View(), "Keys", "terminate backend", "drill in", "reverse order")
	press(m, "x")
	if m.state != stateBrowse {
		t.Fatal("a key did not close help")
	}
}

func TestQuitKey(t *testing.T) {
	for _, k := range []string{"q", "ctrl+c"} {
		m, _ := newTestModel(t, Features{Throttle: true})
		cmd := press(m, k)
		if cmd == nil {
			t.Fatalf("%s: no command", k)
		}
		if _, ok := cmd().(tea.QuitMsg); !ok {
			t.Fatalf("%s: not quit", k)
		}
	}
	// q typed into the filter is text, not quit.
	m, _ := newTestModel(t, Features{Throttle: true})
	press(m, "/")
	if cmd := press(m, "q"); cmd != nil || m.filter.value != "q" {
		t.Fatalf("q in the filter: %v %q", cmd, m.filter.value)
	}
}

func TestResizeFitsEveryView(t *testing.T) {
	m, _ := newTestModel(t, Features{Throttle: true, Signal: true})
	for _, size := range [][2]int{{120, 30}, {60, 12}, {30, 8}, {200, 60}, {10, 3}} {
		m.Update(tea.WindowSizeMsg{Width: size[0], Height: size[1]})
		w, h := m.c.width, m.c.height
		for _, k := range []string{"1", "2", "3", "4", "5", "1", "enter", "?"} {
			press(m, k)
			screen := m.View()
			lines := strings.Split(screen, "\n")
			if len(lines) != h {
				t.Fatalf("%dx%d view %v: %d lines, want %d:\n%s", size[0], size[1], m.nav.cur.name(), len(lines), h, screen)
			}
			for i, l := range lines {
				if ansi.StringWidth(l) > w {
					t.Fatalf("%dx%d view %v: line %d is %d wide: %q", size[0], size[1], m.nav.cur.name(), i, ansi.StringWidth(l), l)
				}
			}
			if k == "?" {
				press(m, "esc")
			}
		}
		press(m, "esc")
	}
}

func TestSourceErrorBannerAndBackoff(t *testing.T) {
	m, src := newTestModel(t, Features{Throttle: true})
	err := fmt.Errorf("%w: no collector answers at http://127.0.0.1:7070; start one with `qtop demo`", ErrUnreachable)
	// Capped at a second: a collector back from a restart is followed
	// again within a second of its return.
	ms := time.Millisecond
	wantBackoff := []time.Duration{250 * ms, 500 * ms, 1000 * ms, 1000 * ms, 1000 * ms, 1000 * ms}
	for i, w := range wantBackoff {
		_, cmd := m.Update(sourceErrMsg{err})
		if cmd == nil {
			t.Fatalf("error %d: no retry scheduled", i)
		}
		if m.backoff != w {
			t.Fatalf("error %d: backoff %v, want %v", i, m.backoff, w)
		}
	}
	screen := m.View()
	mustContain(t, screen, "no collector answers at http://127.0.0.1:7070", "retrying in 1s (attempt 6) · showing the last snapshot", "bigcorp")
	// The retry fetches again; a snapshot clears the banner.
	_, cmd := m.Update(retryMsg{})
	if cmd == nil {
		t.Fatal("retry did not fetch")
	}
	src.snaps <- incident()
	msg := cmd()
	m.Update(msg)
	if m.err != nil || strings.Contains(m.View(), "retrying") {
		t.Fatalf("after a snapshot the banner stays: %v", m.err)
	}
	// A closed source is not retried.
	if _, cmd := m.Update(sourceErrMsg{ErrClosed}); cmd != nil {
		t.Fatal("a closed source is retried")
	}
}

func TestWaitingScreen(t *testing.T) {
	src := newFake(Features{})
	m := New(src, WithRenderer(asciiRenderer()))
	mustContain(t, m.View(), "waiting for the first snapshot from fake")
	m.Update(sourceErrMsg{errors.New("boom")})
	mustContain(t, m.View(), "boom", "no data yet")
}

func TestNoEscapesFromTheWire(t *testing.T) {
	m, _ := newTestModel(t, Features{Throttle: true})
	for _, k := range []string{"1", "2", "3", "enter"} {
		press(m, k)
		if s := m.View(); strings.ContainsAny(s, "\x1b\r\t") {
			t.Fatalf("view %v prints a control character from the data:\n%q", m.nav.cur.name(), s)
		}
	}
}

func TestOptions(t *testing.T) {
	src := newFake(Features{})
	m := New(src, WithSort(api.MeasureDB), WithTop(7), WithKeyMap(DefaultKeyMap()))
	if viewOf[*tenantsView](m).col != colDB || m.c.query != (Query{Measure: api.MeasureDB, Top: 7}) {
		t.Fatalf("col %v query %+v", viewOf[*tenantsView](m).col, m.c.query)
	}
	// The fetch command asks the source with the model's query.
	go func() { src.snaps <- incident() }()
	if msg := m.Init()(); msg == nil {
		t.Fatal("no message")
	}
	if len(src.queries) != 1 || src.queries[0] != m.c.query {
		t.Fatalf("queries %+v", src.queries)
	}
}

func TestPostgresSnapshotHidesRequestColumns(t *testing.T) {
	m, _ := newTestModel(t, Features{Signal: true})
	s := incident()
	s.Source = api.SourcePostgres
	m.Update(snapshotMsg{s})
	screen := m.View()
	mustContain(t, screen, "DB LOAD", "SHARE")
	for _, col := range []string{"RU/s", "REQ/s", "P95", "ERR/s", "THROTTLE"} {
		if strings.Contains(screen, col) {
			t.Errorf("qtop --postgres shows %s:\n%s", col, screen)
		}
	}
	for range 2 * numColumns {
		press(m, "s")
		if viewOf[*tenantsView](m).hidden(viewOf[*tenantsView](m).col) {
			t.Fatalf("s sorts by the hidden column %v", viewOf[*tenantsView](m).col)
		}
	}
}
