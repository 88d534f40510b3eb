package tui

import (
	"bytes"
	"strings"
	"testing"
	"text/tabwriter"
)

// wideTab lays out ASCII as text/tabwriter does, and aligns cells of CJK
// characters and emoji by the columns they take on a terminal.
func TestWideTab(t *testing.T) {
	ascii := "title line\nTENANT\tRU/S\tP95\t\nacme\t12.5\t3ms\t\nglobex-long\t1\t10ms\t\n\nafter\ta\t\n"
	var want, got bytes.Buffer
	tw := tabwriter.NewWriter(&want, 0, 0, 2, ' ', 0)
	tw.Write([]byte(ascii))
	tw.Flush()
	wt := newWideTab(&got, 2)
	wt.Write([]byte(ascii))
	if err := wt.Flush(); err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() {
		t.Errorf("ASCII:\n%q\nwant (tabwriter)\n%q", got.String(), want.String())
	}
	got.Reset()
	wt.Write([]byte("TENANT\tRU/S\t\n日本語テナント\t12\t\nacme\t3\t\n🚀x\t4\t\n"))
	wt.Flush()
	lines := strings.Split(got.String(), "\n")
	col := strings.Index(lines[0], "RU/S") // display columns before it, ASCII line
	for _, l := range lines[1:4] {
		cells := strings.Fields(l)
		before := l[:strings.LastIndex(l, cells[len(cells)-1])]
		if w := displayWidth(before); w != col {
			t.Errorf("%q: the second column starts at %d, want %d", l, w, col)
		}
	}
}

func displayWidth(s string) int {
	w := 0
	for _, r := range s {
		switch {
		case r >= 0x3000 && r <= 0x9fff, r >= 0x1f300:
			w += 2
		default:
			w++
		}
	}
	return w
}
