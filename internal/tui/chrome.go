package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/qtop-dev/qtop/api"
)

// The chrome is the lines around the view's body: above, the title, the
// tabs, the incident summary and the banner of a lost source; below, the
// status line or the prompt, and the footer.

// top renders the lines above the body.
func (m *Model) top() string {
	c := &m.c
	var b strings.Builder
	title := "qtop · " + clean(c.src.Describe())
	if m.snap != nil {
		what := " tenants"
		if g := m.snap.GroupBy; g != "" && g != api.GroupTenant {
			what = " groups by " + g
		}
		title += " · " + m.snap.Time.In(m.c.loc).Format("15:04:05") + " · " + fmtCount(uint64(m.snap.TenantsSeen)) + what
		if u := unreadTags(m.snap); u != "" {
			title += " · ⚠ " + u
		}
	}
	title += m.nav.cur.title(c)
	if f := m.currentFilter(); f != "" || m.state == stateFilter {
		title += " · /" + clean(f)
	}
	line := c.st.title.Render(clip(title, c.width))
	if m.paused {
		line += c.st.bad.Render(clip(" PAUSED", max(c.width-lipgloss.Width(line), 0)))
	}
	b.WriteString(line + "\n")
	b.WriteString(tabBar(c, m.nav.views[:m.nav.tabs], m.nav.tabIndex()))
	if m.snap != nil && m.summary.line != "" {
		st := c.st.dim
		if m.summary.alert {
			st = c.st.warn
		}
		// Up to maxHeadlineLines lines, fewer on a short screen: the
		// view keeps room for its rows.
		n := min(maxHeadlineLines, max((c.height-6)/3, 1))
		for _, l := range headlineLines(clean(m.summary.line), c.width, n) {
			b.WriteString("\n" + st.Render(l))
		}
	}
	if m.snap != nil {
		if line, warn := autopilotHeadline(m.snap.Autopilot, m.snap.Unapplied, m.snap.Time); line != "" {
			st := c.st.dim
			if warn {
				st = c.st.warn
			}
			b.WriteString("\n" + st.Render(clip("⚙ "+line, c.width)))
		}
	}
	if m.snap != nil && m.snap.Server != nil {
		b.WriteString("\n" + c.st.dim.Render(clip(serverLine(m.snap.Server), c.width)))
	}
	if m.err != nil {
		// The error says what to do: wrap it (three lines at most)
		// rather than cut it.
		ls := strings.Split(ansi.Wrap("⚠ "+clean(m.err.Error()), c.width, " "), "\n")
		if len(ls) > 3 {
			ls = ls[:3]
		}
		ls = append(ls, m.retryText())
		for _, l := range ls {
			b.WriteString("\n" + c.st.banner.Render(fit(l, c.width, false)))
		}
	}
	return b.String()
}

// maxHeadlineLines bounds the lines of the headline on screen.
const maxHeadlineLines = 3

// headlineLines lays the headline out in width columns, "⚑ " first: its
// parts (an offender, "+1 more", the victims), split at " · ", most
// important first, fill a line each until the next does not fit, then go
// on to the next line, so that an offender's name and share are never cut
// at the screen's edge; a part wider than a line wraps at its spaces. At
// most n lines; what is left after them ends in "…".
func headlineLines(line string, width, n int) []string {
	const mark, indent = "⚑ ", "  "
	if n <= 1 || ansi.StringWidth(mark+line) <= width {
		return []string{ansi.Truncate(mark+line, width, "…")}
	}
	w := max(width-ansi.StringWidth(indent), 1)
	var out []string
	cur := ""
	for _, part := range strings.Split(line, " · ") {
		switch {
		case cur == "":
			cur = part
		case ansi.StringWidth(cur+" · "+part) <= w:
			cur += " · " + part
		default:
			out = append(out, cur)
			cur = part
		}
		if ansi.StringWidth(cur) > w {
			ls := strings.Split(ansi.Wrap(cur, w, ""), "\n")
			out = append(out, ls[:len(ls)-1]...)
			cur = ls[len(ls)-1]
		}
	}
	if cur != "" {
		out = append(out, cur)
	}
	if len(out) > n {
		out = out[:n]
		out[len(out)-1] = ansi.Truncate(out[len(out)-1], w-1, "") + "…"
	}
	for i := range out {
		if i == 0 {
			out[i] = mark + out[i]
		} else {
			out[i] = indent + out[i]
		}
	}
	return out
}

func (m *Model) retryText() string {
	when := "showing the last snapshot"
	if m.snap == nil {
		when = "no data yet"
	}
	return fmt.Sprintf("  retrying in %s (attempt %d) · %s", m.backoff, m.failures, when)
}

func (m *Model) bottom() string {
	c := &m.c
	switch {
	case m.state == statePrompt:
		return m.prompt.line(c)
	case m.state == stateFilter:
		return c.st.prompt.Render(clip("/"+m.filter.value+"▏ enter keep · esc clear", c.width))
	case m.state == stateHelp:
		// No status line: the keys need the room more.
		return clip(c.help.ShortHelpView(c.keys.ShortHelp()), c.width)
	}
	var status string
	if c.status.text != "" {
		st := c.st.bad
		if c.status.ok {
			st = c.st.good
		}
		status = st.Render(clip(clean(c.status.text), c.width))
		if !c.status.ok {
			// A failure says what to do: wrapped whole (six lines at
			// most), never cut at the screen's edge.
			ls := strings.Split(ansi.Wrap(clean(c.status.text), c.width, " "), "\n")
			for i, l := range ls[:min(len(ls), 6)] {
				ls[i] = st.Render(clip(l, c.width))
			}
			status = strings.Join(ls[:min(len(ls), 6)], "\n")
		}
	}
	return status + "\n" + clip(c.help.ShortHelpView(c.keys.ShortHelp()), c.width)
}

// bodyHeight is the number of lines left for the view.
func (m *Model) bodyHeight() int {
	return max(m.c.height-lines(m.top())-lines(m.bottom()), 1)
}

func lines(s string) int { return strings.Count(s, "\n") + 1 }

// View renders the screen: exactly height lines, none wider than width.
func (m *Model) View() string {
	c := &m.c
	top, bottom := m.top(), m.bottom()
	h := max(c.height-lines(top)-lines(bottom), 1)
	var body string
	switch {
	case m.state == stateHelp:
		body = m.help.view(c, helpLines(c, m.fullHelp(), h), h)
	case m.snap == nil:
		body = c.st.dim.Render(clip("waiting for the first snapshot from "+clean(c.src.Describe())+" …", c.width))
	default:
		body = m.nav.cur.view(c, h)
	}
	n := lines(body)
	switch {
	case n > h:
		body = strings.Join(strings.SplitN(body, "\n", h+1)[:h], "\n")
	case n < h:
		body += strings.Repeat("\n", h-n)
	}
	return top + "\n" + body + "\n" + bottom
}

// unreadTags says how many sampled statements lost their tags (a
// malformed comment, a text cut at track_activity_query_size), or "".
func unreadTags(s *api.Snapshot) string {
	var parts []string
	if n := s.Collector.MalformedComments; n > 0 {
		parts = append(parts, fmtCount(n)+" comments unread")
	}
	if n := s.Collector.TruncatedStatements; n > 0 {
		parts = append(parts, fmtCount(n)+" statements cut (track_activity_query_size)")
	}
	return strings.Join(parts, ", ")
}

// fullHelp is the ? overlay: the keys of the views, in their order, then
// the rest of the keymap's.
func (m *Model) fullHelp() [][]key.Binding {
	k := m.c.keys
	var views []key.Binding
	for _, v := range m.nav.views {
		if b := v.key(&k); b.Enabled() {
			views = append(views, b)
		}
	}
	full := k.FullHelp()
	full[0] = append(views, k.NextView, k.PrevView)
	return full
}
