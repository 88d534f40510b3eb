package tui

import (
	"time"

	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/lipgloss"
)

// common is what every sub-model shares: the terminal size, the styles,
// the keymap and the clock.
type common struct {
	width, height int
	st            styles
	keys          KeyMap
	help          help.Model
	now           func() time.Time
	loc           *time.Location // of the times shown
}

// styles are the UI's lipgloss styles, bound to one renderer so that the
// colour profile is the renderer's (ASCII in golden tests), not a global.
type styles struct {
	title, tab, tabActive, header, selected, dim, warn, bad, good, banner, prompt, other lipgloss.Style
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
