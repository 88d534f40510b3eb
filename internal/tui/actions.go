package tui

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/pgactivity"
	"github.com/qtop-dev/qtop/policy"
)

// The actions: t throttles the tenant selected, c and k cancel or
// terminate the backends marked or selected, each after a prompt.

func (m *Model) startThrottle() tea.Cmd {
	if _, ok := m.c.src.(*Replay); ok {
		return m.c.setStatus("a replay is read only: t throttles on a live source (qtop --collector URL, or qtop demo)", false)
	}
	if !m.c.feats.Throttle {
		return m.c.setStatus("throttling needs a collector (qtop --collector URL, or qtop demo): qtop --postgres only reads PostgreSQL", false)
	}
	t, ok := m.selectedRow()
	switch {
	case !ok:
		return m.c.setStatus("no tenant selected", false)
	case t.untagged:
		return m.c.setStatus("untagged load has no tenant to throttle: enter on it shows how to tag it", false)
	case t.victim:
		return m.c.setStatus(t.key+" is a victim, not an offender: throttle the offender from the Tenants view (1); enter here shows its routes", false)
	case m.group() != api.GroupTenant:
		return m.c.setStatus("t throttles a tenant: press b until the grouping is tenant", false)
	case t.key == api.OtherTenant:
		return m.c.setStatus(`"other" is many tenants; throttle them one by one`, false)
	}
	m.prompt = throttlePrompt(t.key, t.ru)
	m.state = statePrompt
	return nil
}

func (m *Model) startSignal(terminate bool) tea.Cmd {
	if _, ok := m.c.src.(*Replay); ok {
		return m.c.setStatus("a replay is read only: c and k signal backends on a live source (qtop --postgres DSN, or a collector that samples PostgreSQL)", false)
	}
	if !m.c.feats.Signal {
		return m.c.setStatus("c and k signal PostgreSQL backends: run qtop --postgres DSN, or follow a collector that samples PostgreSQL (collector serve --postgres DSN)", false)
	}
	sg, ok := m.nav.cur.(signaler)
	if !ok {
		return m.c.setStatus("c and k act on the statements marked (space) or selected in the Statements view (3), or on the session selected in Locks (6)", false)
	}
	if _, ok := m.c.src.(SafeSignaler); !ok {
		return m.c.setStatus("this source cannot check that a backend still runs the statement shown; nothing done", false)
	}
	ts := sg.targets()
	if len(ts) == 0 {
		return m.c.setStatus("no statement selected", false)
	}
	kind := promptCancel
	if terminate {
		kind = promptTerminate
	}
	m.prompt = prompt{kind: kind, pid: ts[0].PID, tenant: ts[0].Tenant, query: ts[0].Query, targets: ts}
	m.state = statePrompt
	return nil
}

// signal carries out a confirmed cancel or terminate of every target, each
// only if its backend still runs what was shown, and logs each one.
func (m *Model) signal(pr prompt) tea.Cmd {
	ss, ok := m.c.src.(SafeSignaler)
	if !ok {
		return nil
	}
	ctx, log, who, desc := m.c.ctx, m.log, m.actor(), m.c.src.Describe()
	name := "cancel"
	if pr.kind == promptTerminate {
		name = "terminate"
	}
	now := m.c.now
	if sg, ok := m.nav.cur.(signaler); ok {
		sg.sent()
	}
	return func() tea.Msg {
		var done, moved []string
		var firstErr error
		for _, r := range pr.targets {
			t := pgactivity.Target{PID: r.PID, QueryStart: r.QueryStart, BackendStart: r.BackendStart}
			var err error
			if pr.kind == promptTerminate {
				if strings.HasPrefix(r.State, "idle in transaction") {
					t.XactStart = r.XactStart // the transaction that holds the lock
				}
				err = ss.TerminateSession(ctx, t, who)
			} else {
				err = ss.CancelStatement(ctx, t, who)
			}
			a := action{Time: now().UTC(), User: who, Source: desc, Action: name, PID: r.PID, QueryStart: r.QueryStart,
				XactStart: t.XactStart, BackendStart: r.BackendStart, Tenant: r.Tenant, Query: r.Query, Result: "done"}
			pid := strconv.Itoa(int(r.PID))
			switch {
			case err == nil:
				done = append(done, pid)
			case errors.Is(err, pgactivity.ErrMovedOn):
				moved = append(moved, pid)
				a.Result, a.Error = "moved on", err.Error()
			default:
				a.Result, a.Error = "error", err.Error()
				if firstErr == nil {
					firstErr = err
				}
			}
			log.write(a)
		}
		var parts []string
		if len(done) > 0 {
			parts = append(parts, name+" sent to backend "+strings.Join(done, ", "))
		}
		if len(moved) > 0 {
			parts = append(parts, "backend "+strings.Join(moved, ", ")+" moved on to another statement or session: nothing done")
		}
		if firstErr != nil {
			parts = append(parts, firstErr.Error())
		}
		text := strings.Join(parts, " · ")
		if len(done) == 0 {
			return actionMsg{err: errors.New(text)}
		}
		return actionMsg{text: text}
	}
}

// actor names who acts, for the logs: "qtop (alice)".
func (m *Model) actor() string {
	if m.user == "" {
		return "qtop"
	}
	return "qtop (" + m.user + ")"
}

func (m *Model) promptKey(msg tea.KeyMsg) tea.Cmd {
	p := &m.prompt
	if msg.Type == tea.KeyCtrlC {
		return tea.Quit
	}
	if msg.Type == tea.KeyEsc {
		m.state, m.prompt = stateBrowse, prompt{}
		return m.c.setStatus("nothing done", true)
	}
	if p.kind == promptHistory {
		cmd, done := p.historyPromptKey(&m.c, &m.nav, msg)
		if done {
			m.state, m.prompt = stateBrowse, prompt{}
		}
		return cmd
	}
	if p.kind == promptThrottle && !p.confirm {
		switch msg.Type {
		case tea.KeyTab, tea.KeyShiftTab, tea.KeyUp, tea.KeyDown:
			p.focus = 1 - p.focus
		case tea.KeyEnter:
			if _, _, err := p.parseThrottle(); err != nil {
				p.err = err.Error()
				return nil
			}
			p.err, p.confirm = "", true
		default:
			f := &p.ru
			if p.focus == 1 {
				f = &p.dur
			}
			if f.edit(msg) {
				p.err = ""
			}
		}
		return nil
	}
	switch msg.String() {
	case "y", "Y":
	case "n", "N":
		m.state, m.prompt = stateBrowse, prompt{}
		return m.c.setStatus("nothing done", true)
	default:
		return nil
	}
	m.state = stateBrowse
	pr := *p
	m.prompt = prompt{}
	src, ctx, loc := m.c.src, m.c.ctx, m.c.loc
	switch pr.kind {
	case promptThrottle:
		rule, err := pr.rule(m.c.now(), m.user)
		if err != nil {
			return m.c.setStatus(err.Error(), false)
		}
		log, who, desc, now := m.log, m.actor(), m.c.src.Describe(), m.c.now
		return func() tea.Msg {
			a := action{Time: now().UTC(), User: who, Source: desc, Action: "throttle", Tenant: rule.Tenant, Result: "done"}
			if err := src.Throttle(ctx, rule); err != nil {
				a.Result, a.Error = "error", err.Error()
				log.write(a)
				return actionMsg{err: fmt.Errorf("throttle %s: %w", rule.Tenant, err)}
			}
			log.write(a)
			return actionMsg{text: fmt.Sprintf("%s throttled to %s RU/s until %s (policy posted; see Enforcement, 5)",
				rule.Tenant, fmtNum(rule.RUPerSecond), rule.Expires.In(loc).Format("15:04:05"))}
		}
	case promptCancel, promptTerminate:
		return m.signal(pr)
	case promptAutopilotPause, promptAutopilotResume, promptAutopilotCancel:
		return autopilotCommand(&m.c, m.log, m.actor(), pr)
	case promptLift:
		return liftRule(&m.c, m.log, m.actor(), pr.lifted)
	}
	return nil
}

// liftRule posts rule again, expiring now, and logs it in log as who's:
// the collector drops it, and the processes stop applying it with their
// next report.
func liftRule(c *common, log *actionLog, who string, rule policy.Rule) tea.Cmd {
	src, ctx, desc, now := c.src, c.ctx, c.src.Describe(), c.now
	rule.Expires = now().UTC().Add(time.Second)
	rule.Reason = "lifted in qtop by " + who
	return func() tea.Msg {
		a := action{Time: now().UTC(), User: who, Source: desc, Action: "lift", ID: rule.ID, Tenant: rule.Tenant, Result: "done"}
		if err := src.Throttle(ctx, rule); err != nil {
			a.Result, a.Error = "error", err.Error()
			log.write(a)
			return actionMsg{err: fmt.Errorf("lift %s: %w", rule.ID, err)}
		}
		log.write(a)
		return actionMsg{text: fmt.Sprintf("rule %s on %s lifted (it expires within a second; see Enforcement, 5)", rule.ID, ruleTarget(rule))}
	}
}
