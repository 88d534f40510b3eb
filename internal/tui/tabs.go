package tui

import (
	"strconv"
	"strings"

	"github.com/charmbracelet/x/ansi"
)

// The tab bar names every tab with its key: "1 Tenants  2 Hot keys  …".
// When the names do not fit the width, the tabs not shown give way, the
// longest (then the last) first, one step at a time — their short name (shortNamer),
// then one space between tabs instead of two, then the first three
// letters of the short name, then the key alone — until the bar fits;
// the tab shown keeps its whole name while any other can still shrink.

// shortNamer is a view whose name has a shorter form for a narrow tab
// bar ("Stmts" for "Statements").
type shortNamer interface{ shortName() string }

// tabLabel is one tab's label at each step of shrinking.
type tabLabel struct {
	forms [4]string // whole name, short name, three letters, key alone
	at    int       // the form used
}

func (l *tabLabel) text() string { return l.forms[l.at] }

func newTabLabel(i int, v view) tabLabel {
	n := strconv.Itoa(i + 1)
	short := v.name()
	if s, ok := v.(shortNamer); ok {
		short = s.shortName()
	}
	three := short
	if r := []rune(short); len(r) > 3 {
		three = string(r[:3])
	}
	return tabLabel{forms: [4]string{n + " " + v.name(), n + " " + short, n + " " + three, n}}
}

// tabBar renders the tabs in width columns, the one at index active
// highlighted.
func tabBar(c *common, tabs []view, active int) string {
	labels := make([]tabLabel, len(tabs))
	for i, v := range tabs {
		labels[i] = newTabLabel(i, v)
	}
	sep := 2
	mark := 0 // the active tab's brackets when no style shows it
	if c.st.plain && active >= 0 && active < len(labels) {
		mark = 2
	}
	width := func() int {
		w := sep*max(len(labels)-1, 0) + mark
		for i := range labels {
			w += ansi.StringWidth(labels[i].text())
		}
		return w
	}
	// shrinkTo takes the other tabs' labels to form, the longest first,
	// until the bar fits.
	shrinkTo := func(form int) {
		for width() > c.width {
			i := longest(labels, active, form)
			if i < 0 {
				return
			}
			labels[i].at++
		}
	}
	shrinkTo(1)
	if width() > c.width {
		sep = 1
	}
	shrinkTo(2)
	shrinkTo(3)
	if width() > c.width && active >= 0 && active < len(labels) {
		labels[active].at = 1
	}
	var b strings.Builder
	for i := range labels {
		if i > 0 {
			b.WriteString(strings.Repeat(" ", sep))
		}
		if i == active && mark > 0 {
			b.WriteString("[" + labels[i].text() + "]")
		} else if i == active {
			b.WriteString(c.st.tabActive.Render(labels[i].text()))
		} else {
			b.WriteString(c.st.tab.Render(labels[i].text()))
		}
	}
	return clip(b.String(), c.width)
}

// longest is the index of the widest label other than skip whose form
// is before form (of two as wide, the later tab), or -1.
func longest(labels []tabLabel, skip, form int) int {
	best, bw := -1, -1
	for i := range labels {
		l := &labels[i]
		if i == skip || l.at >= form {
			continue
		}
		if w := ansi.StringWidth(l.text()); w >= bw {
			best, bw = i, w
		}
	}
	return best
}
