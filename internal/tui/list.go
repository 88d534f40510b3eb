package tui

import tea "github.com/charmbracelet/bubbletea"

// list is the cursor and scroll position of a view's rows.
type list struct {
	cursor, offset, n int
}

// setLen sets the number of rows and keeps the cursor on one.
func (l *list) setLen(n int) {
	l.n = n
	l.move(0)
}

func (l *list) move(d int) {
	l.cursor = min(max(l.cursor+d, 0), max(l.n-1, 0))
}

func (l *list) top()    { l.cursor = 0 }
func (l *list) bottom() { l.cursor = max(l.n-1, 0) }

// window returns the rows [from, to) shown in h lines, scrolling the
// offset so that the cursor stays in sight.
func (l *list) window(h int) (from, to int) {
	if h <= 0 || l.n == 0 {
		return 0, 0
	}
	if l.cursor < l.offset {
		l.offset = l.cursor
	}
	if l.cursor >= l.offset+h {
		l.offset = l.cursor - h + 1
	}
	l.offset = min(l.offset, max(l.n-h, 0))
	l.offset = max(l.offset, 0)
	return l.offset, min(l.offset+h, l.n)
}

// navigate applies msg to l if it is a movement key (see list.navigate).
func navigate(c *common, l *list, msg tea.Msg, page int) bool {
	km, ok := msg.(tea.KeyMsg)
	return ok && l.navigate(c.keys, km, page)
}

// navigate applies a movement key to l; page is the page height. It
// reports whether the key was one.
func (l *list) navigate(k KeyMap, msg keyMsg, page int) bool {
	switch {
	case matches(msg, k.Up):
		l.move(-1)
	case matches(msg, k.Down):
		l.move(1)
	case matches(msg, k.PageUp):
		l.move(-max(page, 1))
	case matches(msg, k.PageDown):
		l.move(max(page, 1))
	case matches(msg, k.Home):
		l.top()
	case matches(msg, k.End):
		l.bottom()
	default:
		return false
	}
	return true
}
