package tui

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/qtop-dev/qtop/api"
)

// The autopilot in qtop: its status comes with every snapshot
// (api.Snapshot.Autopilot, the one truth shown); a line under the
// headline says what it does or would do, the Enforcement view (5) shows
// its rules, actions and newest decisions, A pauses or resumes it and x
// ends the action selected, each after a prompt, with the admin token.

// AutopilotSource is a Source that takes the autopilot's commands: pause,
// resume, or cancel an action (a collector, and a recording of one). A
// cancel that a collector passed to the fleet's holder of the autopilot's
// lock returns what the collector said of it (api.AutopilotState's
// Forwarded); otherwise forwarded is empty.
type AutopilotSource interface {
	AutopilotCommand(ctx context.Context, cmd api.AutopilotCommand) (forwarded string, err error)
}

var (
	_ AutopilotSource = (*Collector)(nil)
	_ AutopilotSource = (*Recorder)(nil)
	_ AutopilotSource = (*Fleet)(nil)
)

// AutopilotCommand posts cmd to the collector's autopilot with the admin
// token.
func (c *Collector) AutopilotCommand(ctx context.Context, cmd api.AutopilotCommand) (string, error) {
	if c.isClosed() {
		return "", ErrClosed
	}
	st, err := c.client(Query{}).AutopilotCommand(ctx, cmd, c.token)
	if err != nil {
		return "", c.refused("the autopilot command", err)
	}
	return st.Forwarded, nil
}

// AutopilotCommand passes through to a source that takes it.
func (r *Recorder) AutopilotCommand(ctx context.Context, cmd api.AutopilotCommand) (string, error) {
	if a, ok := r.Source.(AutopilotSource); ok {
		return a.AutopilotCommand(ctx, cmd)
	}
	return "", fmt.Errorf("%w: the autopilot's keys need a collector", ErrUnsupported)
}

// AutopilotCommand sends a pause or resume to every collector (each reads
// its own policy; with --shared-policy the later ones change nothing),
// and a cancel to each in turn until one takes it: with the autopilot's
// lock in Redis the first does (the holder ends the action, another
// passes the cancel to it); without, only the collector that acts has
// any action. A pause or resume that some collectors did not take says
// how many did, and why not.
func (f *Fleet) AutopilotCommand(ctx context.Context, cmd api.AutopilotCommand) (string, error) {
	var errs []error
	for _, c := range f.members {
		fwd, err := c.AutopilotCommand(ctx, cmd)
		switch {
		case err == nil && cmd.Cancel != "":
			return fwd, nil
		case err != nil:
			errs = append(errs, err)
		}
	}
	if cmd.Cancel == "" && len(errs) > 0 && len(errs) < len(f.members) {
		return "", fmt.Errorf("%d of %d collectors took it: %w", len(f.members)-len(errs), len(f.members), errors.Join(errs...))
	}
	return "", errors.Join(errs...)
}

// fleetPilot is the fleet's autopilot status: that of the collector that
// acts, else the first one's that has one.
func fleetPilot(snaps []api.Snapshot) *api.AutopilotStatus {
	var st *api.AutopilotStatus
	for i := range snaps {
		a := snaps[i].Autopilot
		switch {
		case a == nil:
		case a.Acting:
			return a
		case st == nil:
			st = a
		}
	}
	return st
}

// autopilotOf returns src's autopilot, if it (or the source a Recorder
// records) has one: a replay has none, it is read only.
func autopilotOf(src Source) (AutopilotSource, bool) { return through[AutopilotSource](src) }

// through returns src as a T when it (or the source a Recorder records)
// is one: a Recorder passes T's methods through to its source, so it is
// a T only when its source is.
func through[T any](src Source) (T, bool) {
	inner := src
	if r, ok := src.(*Recorder); ok {
		inner = r.Source
	}
	var zero T
	if _, ok := inner.(T); !ok {
		return zero, false
	}
	t, ok := src.(T)
	return t, ok
}

// autopilotHeadline is the line under the headline: the action in force
// (the newest enforced one, else the newest shadow one) and how many
// more, or that the autopilot is paused; "" when it has nothing to say.
// warn is set while an action is enforced.
func autopilotHeadline(st *api.AutopilotStatus, un []api.Unapplied, now time.Time) (line string, warn bool) {
	if st == nil {
		return "", false
	}
	head := "autopilot"
	if st.Paused {
		head += " paused"
	}
	if len(st.Active) == 0 {
		if st.Paused {
			return head, false
		}
		return "", false
	}
	a := st.Active[len(st.Active)-1]
	for i := len(st.Active) - 1; i >= 0; i-- {
		if !st.Active[i].Shadow {
			a, warn = st.Active[i], true
			break
		}
	}
	what := a.Action + " " + clean(a.Tenant) + " " + fmtLimit(a.Limit, a.Unit)
	if a.Shadow {
		line = head + ": would " + what + " (shadow, " + fmtLeft(a.Expires.Sub(now)) + " left)"
	} else {
		line = head + ": " + what + " (enforce, " + fmtLeft(a.Expires.Sub(now)) + " left)"
		if slices.ContainsFunc(un, func(u api.Unapplied) bool { return u.Tenant == a.Tenant }) {
			line += " · NO EFFECT: its load is database sessions no agent or gate reports"
		}
	}
	if n := len(st.Active) - 1; n == 1 {
		line += " · 1 more action"
	} else if n > 1 {
		line += " · " + strconv.Itoa(n) + " more actions"
	}
	return line, warn
}

// fmtLimit is an action's limit with its unit: "32.0 RU/s", "×4.00".
func fmtLimit(limit float64, unit string) string {
	if unit == "×" {
		return "×" + fmtNum(limit)
	}
	return fmtNum(limit) + " " + unit
}

// fmtLeft is the time an action has left, to the minute above one:
// "3m", "1h5m", "42s".
func fmtLeft(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Minute:
		return strconv.Itoa(int(d/time.Second)) + "s"
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + "m"
	}
	h := int(d / time.Hour)
	return strconv.Itoa(h) + "h" + strconv.Itoa(int((d-time.Duration(h)*time.Hour)/time.Minute)) + "m"
}

// autopilotBlock renders the Enforcement view's Autopilot part: its
// status, its actions (row i selected when cursor is i) with the
// selected one's evidence whole, and as many of its newest decisions as
// room (the lines it may take) leaves. It returns nil without a status.
func autopilotBlock(c *common, st *api.AutopilotStatus, stamp time.Time, cursor, room int) []string {
	if st == nil {
		return nil
	}
	rules := strconv.Itoa(st.Rules) + " rules"
	if st.Rules == 1 {
		rules = "1 rule"
	}
	title := "Autopilot — " + rules + " (" + strconv.Itoa(st.Enforcing) + " enforce, " + strconv.Itoa(st.Rules-st.Enforcing) + " shadow)"
	switch {
	case st.Paused:
		title += " · PAUSED: no new action (A resumes)"
	case st.Acting:
		title += " · acting (A pauses)"
	case st.HeldBy != "":
		title += " · collector " + clean(st.HeldBy) + " acts (A pauses)"
	default:
		title += " · not acting"
	}
	out := []string{"", c.st.title.Render(clip(title, c.width))}
	if st.Note != "" {
		out = append(out, c.st.warn.Render(clip(clean(st.Note), c.width)))
	}
	if len(st.Active) == 0 {
		out = append(out, c.st.dim.Render(clip("no action in force or in shadow", c.width)))
	} else {
		ew := max(c.width-(12+18+15+13+5+8+2*7+2), 8)
		out = append(out, c.st.header.Render(clip("  "+fit("RULE", 12, false)+" "+fit("TENANT", 18, false)+" "+fit("ACTION", 15, false)+" "+
			fit("LIMIT", 13, true)+" "+fit("LEVEL", 5, true)+" "+fit("LEFT", 8, true)+" "+fit("EVIDENCE (x ends the action)", ew, false), c.width)))
		for i, a := range st.Active {
			action := a.Action
			if a.Shadow {
				action += " (shadow)"
			}
			left := "-"
			if !stamp.IsZero() {
				left = fmtDuration(a.Expires.Sub(stamp).Truncate(time.Second))
			}
			line := clip(gutter(fit(clean(a.Rule), 12, false)+" "+fitName(clean(a.Tenant), 18)+" "+fit(action, 15, false)+" "+
				fit(fmtLimit(a.Limit, a.Unit), 13, true)+" "+fit(strconv.Itoa(a.Level), 5, true)+" "+fit(left, 8, true)+" "+
				fit(clean(a.Evidence), ew, false), i == cursor), c.width)
			switch {
			case i == cursor:
				line = c.st.selected.Render(line)
			case !a.Shadow:
				line = c.st.warn.Render(line)
			}
			out = append(out, line)
		}
	}
	if cursor >= 0 && cursor < len(st.Active) {
		a := st.Active[cursor]
		ls := strings.Split(ansi.Wrap("evidence: "+clean(a.Evidence), max(c.width-4, 8), " "), "\n")
		for _, l := range ls[:min(len(ls), 2)] {
			out = append(out, c.st.dim.Render(clip("    "+l, c.width)))
		}
		if a.Now != "" {
			// What its next relax, lift or cancel states.
			out = append(out, c.st.dim.Render(clip("    now: "+clean(a.Now), c.width)))
		}
	}
	if n := min(room-len(out)-1, len(st.Recent)); n > 0 {
		out = append(out, c.st.header.Render(clip(fit("  DECISIONS, NEWEST FIRST", c.width, false), c.width)))
		for _, d := range st.Recent[:n] {
			out = append(out, c.st.dim.Render(clip("  "+decisionLine(d, c.loc), c.width)))
		}
	}
	return out
}

// decisionLine shows a decision's line with its time as the clock of
// loc ("09:13:52 apply quota …") rather than a full UTC date.
func decisionLine(d string, loc *time.Location) string {
	d = clean(d)
	stamp, rest, ok := strings.Cut(d, " ")
	if t, err := time.Parse(time.RFC3339, stamp); ok && err == nil {
		return t.In(loc).Format("15:04:05") + " " + rest
	}
	return d
}

// noPilotRules is the answer of A and x when the snapshot has no
// autopilot.
const noPilotRules = "the collector has no autopilot rules (POST /v1/policy/autopilot, see the README's Autopilot)"

// startAutopilotPause asks to pause the autopilot, or to resume it when
// the last snapshot says it is paused.
func (m *Model) startAutopilotPause() tea.Cmd {
	if _, ok := autopilotOf(m.c.src); !ok {
		return m.c.setStatus("A pauses the autopilot of a collector (qtop --collector URL); "+noAutopilot(m.c.src), false)
	}
	if m.snap == nil || m.snap.Autopilot == nil {
		return m.c.setStatus(noPilotRules, false)
	}
	kind := promptAutopilotPause
	if m.snap.Autopilot.Paused {
		kind = promptAutopilotResume
	}
	m.prompt = prompt{kind: kind}
	m.state = statePrompt
	return nil
}

// startAutopilotCancel asks to end the autopilot action selected in the
// Enforcement view.
func (m *Model) startAutopilotCancel() tea.Cmd {
	if ev, ok := m.nav.cur.(*enforcementView); ok && m.c.feats.Throttle {
		if r, ok := ev.selectedRule(); ok {
			if ev.ap != nil && slices.ContainsFunc(ev.ap.Active, func(a api.AutopilotRow) bool { return a.ID == r.ID }) {
				return m.c.setStatus("rule "+clean(r.ID)+" is an autopilot action's: x on the action, above, ends it", false)
			}
			// A rule posted by hand (t, POST /v1/policy), or one an
			// autopilot no longer follows (after its restart): x lifts it.
			m.prompt = prompt{kind: promptLift, tenant: r.Tenant, lifted: r}
			m.state = statePrompt
			return nil
		}
	}
	if _, ok := autopilotOf(m.c.src); !ok {
		return m.c.setStatus("x ends an action of a collector's autopilot (qtop --collector URL); "+noAutopilot(m.c.src), false)
	}
	if m.snap == nil || m.snap.Autopilot == nil {
		return m.c.setStatus(noPilotRules, false)
	}
	ev, ok := m.nav.cur.(*enforcementView)
	if !ok {
		return m.c.setStatus("x ends the autopilot action selected in the Enforcement view (5)", false)
	}
	a, ok := ev.selectedAction()
	if !ok {
		return m.c.setStatus("no autopilot action selected (they head the Enforcement view's autopilot part)", false)
	}
	m.prompt = prompt{kind: promptAutopilotCancel, tenant: a.Tenant, action: a}
	m.state = statePrompt
	return nil
}

// NoAutopilotHinter is implemented by sources without an autopilot that
// can say how to get one (the demo).
type NoAutopilotHinter interface {
	NoAutopilotHint() string
}

// noAutopilot says why src has no autopilot.
func noAutopilot(src Source) string {
	if _, ok := src.(*Replay); ok {
		return "a replay is read only"
	}
	if h, ok := src.(NoAutopilotHinter); ok {
		return h.NoAutopilotHint()
	}
	return "this source has none"
}

// autopilotCommand carries out a confirmed pause, resume or cancel and
// logs it in log as who's.
func autopilotCommand(c *common, log *actionLog, who string, pr prompt) tea.Cmd {
	ap, ok := autopilotOf(c.src)
	if !ok {
		return nil
	}
	var cmd api.AutopilotCommand
	var name, done string
	switch pr.kind {
	case promptAutopilotPause:
		cmd, name, done = api.AutopilotCommand{Pause: true}, "autopilot-pause", "autopilot paused: no new action starts; those in force still relax and lift"
	case promptAutopilotResume:
		cmd, name, done = api.AutopilotCommand{Resume: true}, "autopilot-resume", "autopilot resumed"
	default:
		cmd, name = api.AutopilotCommand{Cancel: pr.action.ID}, "autopilot-cancel"
		done = "autopilot action " + pr.action.ID + " ended: " + pr.action.Action + " " + clean(pr.tenant) + " lifts now"
	}
	ctx, desc, now := c.ctx, c.src.Describe(), c.now
	return func() tea.Msg {
		a := action{Time: now().UTC(), User: who, Source: desc, Action: name, Tenant: pr.tenant, ID: cmd.Cancel, Result: "done"}
		fwd, err := ap.AutopilotCommand(ctx, cmd)
		if err != nil {
			a.Result, a.Error = "error", err.Error()
			log.write(a)
			return actionMsg{err: fmt.Errorf("%s: %w", name, err)}
		}
		if fwd != "" { // another collector holds the lock: it ends the action
			a.Result = "forwarded"
			done = "autopilot action " + pr.action.ID + ": cancel " + fwd
		}
		log.write(a)
		return actionMsg{text: done}
	}
}
