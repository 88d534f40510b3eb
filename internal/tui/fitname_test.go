package tui

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
)

// TestFitNameKeepsEnds: names alike but for their end — a long tenant's
// number, a stand-in's #hash — stay apart when their column is too
// narrow for them, at the column's width exactly.
func TestFitNameKeepsEnds(t *testing.T) {
	a := strings.Repeat("a", 70)
	for _, pair := range [][2]string{
		{a + "1", a + "2"},
		{"(untagged)#bca5491ed84464fe", "(untagged)#bca5491ed84464ff"},
		{"데이터베이스-팀-서울-본사-운영-환경-1", "데이터베이스-팀-서울-본사-운영-환경-2"},
	} {
		for _, w := range []int{10, 16, 18, 28} {
			x, y := fitName(pair[0], w), fitName(pair[1], w)
			if x == y {
				t.Errorf("width %d: %q and %q both show as %q", w, pair[0], pair[1], x)
			}
			if ansi.StringWidth(x) != w || ansi.StringWidth(y) != w {
				t.Errorf("width %d: %q (%d), %q (%d)", w, x, ansi.StringWidth(x), y, ansi.StringWidth(y))
			}
		}
	}
	if got := fitName("acme", 10); got != "acme      " {
		t.Errorf("a short name: %q", got)
	}
}
