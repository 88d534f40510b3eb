package tui

import (
	"context"
	"time"

	"github.com/charmbracelet/bubbles/help"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
)

// common is what the root model shares with every view: the terminal
// size, the styles, the keymap, the clock, the source and what is asked
// of it, and the status line.
type common struct {
	width, height int
	page          int // the rows of a page of the view shown
	st            styles
	keys          KeyMap
	help          help.Model
	now           func() time.Time
	loc           *time.Location // of the times shown
	src           Source
	feats         Features
	ctx           context.Context // of the source calls
	query         Query           // what the next Next asks for
	status        status
}

// status is the line under the view: the outcome of the last action or
// why a key did nothing, cleared after statusTTL.
type status struct {
	text string
	ok   bool
	id   int
}

// clearStatusMsg clears the status line it was set with.
type clearStatusMsg struct{ id int }

// setStatus shows s on the status line (ok: in green) for statusTTL.
func (c *common) setStatus(s string, ok bool) tea.Cmd {
	c.status.text, c.status.ok = s, ok
	c.status.id++
	id := c.status.id
	return tea.Tick(statusTTL, func(time.Time) tea.Msg { return clearStatusMsg{id} })
}

// styles are the UI's lipgloss styles, bound to one renderer so that the
// colour profile is the renderer's (ASCII in golden tests), not a global.
type styles struct {
	title, tab, tabActive, header, selected, dim, warn, bad, good, banner, prompt, other lipgloss.Style
	// plain: the renderer draws no colour nor attribute (NO_COLOR, a dumb
	// terminal), so what a style alone marks needs a mark of its own.
	plain bool
}

func newStyles(r *lipgloss.Renderer) styles {
	accent := lipgloss.AdaptiveColor{Light: "#5A3FC0", Dark: "#B8A8FF"}
	warn := lipgloss.AdaptiveColor{Light: "#B35900", Dark: "#FFB454"}
	bad := lipgloss.AdaptiveColor{Light: "#C0002A", Dark: "#FF6B81"}
	good := lipgloss.AdaptiveColor{Light: "#17803D", Dark: "#7EE2A8"}
	dim := lipgloss.AdaptiveColor{Light: "#8A8A8A", Dark: "#7A7A7A"}
	return styles{
		title:     r.NewStyle().Bold(true).Foreground(accent),
		tab:       r.NewStyle().Foreground(dim),
		tabActive: r.NewStyle().Bold(true).Underline(true).Foreground(accent),
		header:    r.NewStyle().Bold(true),
		selected:  r.NewStyle().Reverse(true),
		dim:       r.NewStyle().Foreground(dim),
		warn:      r.NewStyle().Foreground(warn),
		bad:       r.NewStyle().Bold(true).Foreground(bad),
		good:      r.NewStyle().Foreground(good),
		banner:    r.NewStyle().Bold(true).Foreground(lipgloss.Color("#FFFFFF")).Background(bad),
		prompt:    r.NewStyle().Bold(true).Foreground(warn),
		other:     r.NewStyle().Italic(true).Foreground(dim),
		plain:     r.ColorProfile() == termenv.Ascii,
	}
}

func newHelp(r *lipgloss.Renderer, st styles) help.Model {
	h := help.New()
	h.Styles = help.Styles{
		Ellipsis:       st.dim,
		ShortKey:       r.NewStyle().Bold(true),
		ShortDesc:      st.dim,
		ShortSeparator: st.dim,
		FullKey:        r.NewStyle().Bold(true),
		FullDesc:       r.NewStyle(),
		FullSeparator:  st.dim,
	}
	return h
}
