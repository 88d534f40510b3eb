package tui

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/policy"
)

// field is a one-line text input: printable characters append, backspace
// deletes, ctrl+u clears. It has no cursor blink, so an idle prompt costs
// nothing.
type field struct {
	value string
	limit int
}

// edit applies msg and reports whether it changed the field.
func (f *field) edit(msg tea.KeyMsg) bool {
	switch msg.Type {
	case tea.KeyRunes, tea.KeySpace:
		s := string(msg.Runes)
		if msg.Type == tea.KeySpace {
			s = " "
		}
		s = clean(s)
		lim := f.limit
		if lim <= 0 {
			lim = 64
		}
		if utf8.RuneCountInString(f.value)+utf8.RuneCountInString(s) > lim {
			return false
		}
		f.value += s
		return true
	case tea.KeyBackspace:
		if f.value == "" {
			return false
		}
		_, n := utf8.DecodeLastRuneInString(f.value)
		f.value = f.value[:len(f.value)-n]
		return true
	case tea.KeyCtrlU:
		f.value = ""
		return true
	}
	return false
}

// promptKind is what a prompt asks for.
type promptKind int

const (
	promptNone promptKind = iota
	promptThrottle
	promptCancel
	promptTerminate
	promptAutopilotPause
	promptAutopilotResume
	promptAutopilotCancel
	promptHistory
	promptLift // a policy rule, ended now
)

// MaxThrottle is the longest throttle the prompt accepts.
const MaxThrottle = 7 * 24 * time.Hour

// prompt is the confirmation of an action: a throttle (with its RU/s cap
// and duration, then a y/n), the cancel / terminate of a backend (y/n),
// or a command to the autopilot (y/n).
type prompt struct {
	kind    promptKind
	tenant  string
	pid     int32
	query   string
	targets []api.StatementRow // of a cancel or terminate
	action  api.AutopilotRow   // of an autopilot cancel
	lifted  policy.Rule        // of a lift
	ru, dur field
	name    field // of a history
	focus   int   // 0: RU/s cap, 1: duration
	confirm bool  // the y/n step
	err     string
}

func throttlePrompt(tenantName string, ruPerSec float64) prompt {
	cap := math.Max(1, ruPerSec/10)
	if cap >= 10 {
		cap = math.Round(cap)
	} else {
		cap = math.Round(cap*10) / 10
	}
	return prompt{
		kind: promptThrottle, tenant: tenantName,
		ru:  field{value: strconv.FormatFloat(cap, 'f', -1, 64), limit: 16},
		dur: field{value: "15m", limit: 16},
	}
}

// parseThrottle reads the prompt's cap and duration.
func (p *prompt) parseThrottle() (float64, time.Duration, error) {
	ru, err := strconv.ParseFloat(strings.TrimSpace(p.ru.value), 64)
	if err != nil || ru < 0 || math.IsNaN(ru) || math.IsInf(ru, 0) || ru > policy.MaxRUPerSecond {
		return 0, 0, fmt.Errorf("%w: RU/s cap %q: want a number from 0 to %g (0 rejects all of the tenant's work)", ErrInput, p.ru.value, float64(policy.MaxRUPerSecond))
	}
	d, err := time.ParseDuration(strings.TrimSpace(p.dur.value))
	if err != nil || d <= 0 || d > MaxThrottle {
		return 0, 0, fmt.Errorf("%w: duration %q: want e.g. 15m or 2h, at most %s", ErrInput, p.dur.value, MaxThrottle)
	}
	return ru, d, nil
}

// rule builds the policy rule of a confirmed throttle prompt.
func (p *prompt) rule(now time.Time, user string) (policy.Rule, error) {
	ru, d, err := p.parseThrottle()
	if err != nil {
		return policy.Rule{}, err
	}
	who := "qtop"
	if user != "" {
		who = "qtop (" + user + ")"
	}
	r := policy.Rule{
		Tenant: p.tenant, Action: policy.Throttle, RUPerSecond: ru,
		Expires: now.Add(d).UTC(), Reason: "throttled from " + who + " for " + d.String(),
	}
	if err := r.Validate(); err != nil {
		return policy.Rule{}, fmt.Errorf("%w: %w", ErrInput, err)
	}
	return r, nil
}

// line renders the prompt on one line.
func (p *prompt) line(c *common) string {
	var s string
	switch p.kind {
	case promptThrottle:
		if p.confirm {
			ru, d, _ := p.parseThrottle()
			s = fmt.Sprintf("Throttle %s to %s RU/s for %s? y confirm · n/esc cancel", clean(p.tenant), fmtNum(ru), d)
			break
		}
		mark := func(f *field, i int) string {
			if p.focus == i {
				return "[" + f.value + "▏]"
			}
			return "[" + f.value + "]"
		}
		s = "Throttle " + clean(p.tenant) + ": RU/s cap " + mark(&p.ru, 0) + " for " + mark(&p.dur, 1) +
			" · tab next field · enter continue · esc cancel"
	case promptCancel, promptTerminate:
		what := "Cancel the statement of backend"
		if p.kind == promptTerminate {
			what = "Terminate backend"
		}
		if n := len(p.targets); n > 1 {
			pids := make([]string, n)
			for i, t := range p.targets {
				pids[i] = strconv.Itoa(int(t.PID))
			}
			what = "Cancel the statements of " + strconv.Itoa(n) + " backends"
			if p.kind == promptTerminate {
				what = "Terminate " + strconv.Itoa(n) + " backends"
			}
			s = fmt.Sprintf("%s (%s)? only those still running what was shown · y confirm · n/esc keep them", what, strings.Join(pids, ", "))
			break
		}
		s = fmt.Sprintf("%s %d? only if it still runs this · y confirm · n/esc keep it · %s", what, p.pid, clean(p.query))
	case promptHistory:
		s = "History of tenant [" + p.name.value + "▏] from the store, per minute, last 24 h · enter open · esc cancel"
	case promptAutopilotPause:
		s = "Pause the autopilot? no new action starts; those in force still relax and lift · y confirm · n/esc keep it running"
	case promptAutopilotResume:
		s = "Resume the autopilot? its rules may start actions again · y confirm · n/esc keep it paused"
	case promptAutopilotCancel:
		a := &p.action
		s = fmt.Sprintf("End autopilot action %s (%s %s %s)? its limit lifts now · y confirm · n/esc keep it",
			clean(a.ID), a.Action, clean(a.Tenant), fmtLimit(a.Limit, a.Unit))
	case promptLift:
		s = fmt.Sprintf("Lift rule %s (%s on %s) now, before it expires? · y confirm · n/esc keep it",
			clean(p.lifted.ID), p.lifted.Action, clean(ruleTarget(p.lifted)))
	}
	out := c.st.prompt.Render(clip(s, c.width))
	if p.err != "" {
		out = c.st.bad.Render(clip(p.err, c.width)) + "\n" + out
	}
	return out
}
