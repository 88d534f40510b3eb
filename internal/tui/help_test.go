package tui

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
)

// TestHelpEveryKeyReachable: at 80×24 the ? screen shows every key of
// the keymap at once; at 60×20 and other sizes from there up, every key
// is on screen or a j away, and the screen says that there is more
// until the last one; below 60×20 it says the window is too small.
func TestHelpEveryKeyReachable(t *testing.T) {
	for _, size := range [][2]int{{80, 24}, {60, 20}, {70, 20}, {61, 22}, {100, 30}, {200, 50}, {120, 20}} {
		t.Run(fmt.Sprintf("%dx%d", size[0], size[1]), func(t *testing.T) {
			w, h := size[0], size[1]
			m, _ := newTestModel(t, Features{Throttle: true})
			m.Update(tea.WindowSizeMsg{Width: w, Height: h})
			press(m, "?")
			var screens []string
			for range 100 {
				screen := m.View()
				lines := strings.Split(screen, "\n")
				if len(lines) != h {
					t.Fatalf("%d lines, want %d:\n%s", len(lines), h, screen)
				}
				for i, l := range lines {
					if ansi.StringWidth(l) > w {
						t.Fatalf("line %d is %d wide:\n%s", i, ansi.StringWidth(l), screen)
					}
				}
				screens = append(screens, screen)
				if !strings.Contains(screen, "more ↓") && !strings.Contains(screen, "more ↑↓") {
					break
				}
				if !strings.Contains(screen, "(j/k to scroll)") {
					t.Fatalf("more below, and no word of how to scroll:\n%s", screen)
				}
				press(m, "j")
				if m.state != stateHelp {
					t.Fatal("j closed the help instead of scrolling it")
				}
			}
			if w == 80 && len(screens) != 1 {
				t.Errorf("at 80×24 the keys need %d screens:\n%s", len(screens), screens[0])
			}
			all := strings.Join(screens, "\n")
			for _, g := range m.fullHelp() {
				for _, b := range g {
					k, d := regexp.QuoteMeta(b.Help().Key), regexp.QuoteMeta(b.Help().Desc)
					if !regexp.MustCompile(`(^|\n|  )` + k + ` +` + d + `( |\n|$)`).MatchString(all) {
						t.Errorf("key %q (%s) never on screen:\n%s", b.Help().Key, b.Help().Desc, all)
					}
				}
			}
			press(m, "k")
			if m.state != stateHelp {
				t.Fatal("k closed the help instead of scrolling it back")
			}
			press(m, "x")
			if m.state != stateBrowse {
				t.Fatal("x did not close the help")
			}
		})
	}
	for _, size := range [][2]int{{59, 20}, {60, 19}, {30, 10}} {
		m, _ := newTestModel(t, Features{Throttle: true})
		m.Update(tea.WindowSizeMsg{Width: size[0], Height: size[1]})
		press(m, "?")
		screen := m.View()
		if !strings.Contains(strings.Join(strings.Fields(screen), " "), fmt.Sprintf("This window is %d×%d: the list of keys needs at least 60×20.", size[0], size[1])) {
			t.Errorf("%dx%d: no word of the window being too small:\n%s", size[0], size[1], screen)
		}
		if len(strings.Split(screen, "\n")) != size[1] {
			t.Errorf("%dx%d: %d lines", size[0], size[1], len(strings.Split(screen, "\n")))
		}
		press(m, "j")
		if m.state != stateBrowse {
			t.Errorf("%dx%d: a key did not close the too-small help", size[0], size[1])
		}
	}
}

// TestHeadlineWrapsAtNarrowWidths: from 60 to 80 columns a headline too
// long for one line wraps between its parts, so every offender's name
// and share stay whole on one line and the victims are still said; the
// screen keeps its height and width. A headline too long for its three
// lines keeps its offenders whole and says with "…" that it goes on.
func TestHeadlineWrapsAtNarrowWidths(t *testing.T) {
	cases := []struct {
		line  string
		whole []string // each on one line of the screen
	}{
		{"bigcorp 61% of RU, ×28 its baseline of 4m ago · globex-analytics 22% of RU, ×3.1 its baseline of 4m ago · +1 more · " +
			"victims: 32 tenants, p95 ×2.1 (key 8)",
			[]string{"⚑ bigcorp 61% of RU, ×28 its baseline of 4m ago", "globex-analytics 22% of RU, ×3.1 its baseline of 4m ago", "+1 more",
				"victims: 32 tenants, p95 ×2.1 (key 8)"}},
		{"northwind-traders-emea 61% of RU, ×28 its baseline of 4m ago · contoso-catalog-import 22% of RU, ×3.1 its baseline of 4m ago · " +
			"+1 more · victims: 32 tenants, p95 ×2.1 (key 8)",
			[]string{"⚑ northwind-traders-emea 61% of RU", "contoso-catalog-import 22% of RU"}},
	}
	for _, c := range cases {
		for w := 60; w <= 80; w++ {
			for _, h := range []int{20, 24} {
				m, _ := newTestModel(t, Features{Throttle: true})
				m.Update(tea.WindowSizeMsg{Width: w, Height: h})
				m.summary.line, m.summary.alert = c.line, true
				screen := m.View()
				lines := strings.Split(screen, "\n")
				if len(lines) != h {
					t.Fatalf("%dx%d: %d lines:\n%s", w, h, len(lines), screen)
				}
				for i, l := range lines {
					if ansi.StringWidth(l) > w {
						t.Fatalf("%dx%d: line %d is %d wide:\n%s", w, h, i, ansi.StringWidth(l), screen)
					}
				}
				if !strings.HasPrefix(lines[2], c.whole[0]) {
					t.Errorf("%dx%d: the headline does not start with the offender and its share:\n%s", w, h, screen)
				}
				mustContain(t, screen, c.whole...)
			}
		}
	}
	// A short screen keeps the headline to one line, cut at its end.
	m, _ := newTestModel(t, Features{Throttle: true})
	m.Update(tea.WindowSizeMsg{Width: 60, Height: 8})
	m.summary.line, m.summary.alert = cases[1].line, true
	if l := strings.Split(m.View(), "\n")[2]; !strings.HasPrefix(l, "⚑ northwind-traders-emea 61% of RU") || !strings.HasSuffix(l, "…") {
		t.Errorf("60x8: headline %q", l)
	}
}
