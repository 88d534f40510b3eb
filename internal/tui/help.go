package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/x/ansi"
)

// The ? screen lists every key with what it does. The keys flow down
// as many columns as the width takes (in the keymap's order: the views,
// moving, the rows, the actions); what the height cannot show scrolls,
// and its last line says so. No key is ever cut: below minHelpWidth ×
// minHelpHeight the screen says the window is too small instead.

// The smallest window the ? screen lays its keys out in.
const (
	minHelpWidth  = 60
	minHelpHeight = 20
)

// helpTooSmall reports whether the window is too small for the ? screen.
func helpTooSmall(c *common) bool { return c.width < minHelpWidth || c.height < minHelpHeight }

// helpColumnGap is the space between two columns of keys.
const helpColumnGap = 2

// helpScreen is the ? overlay's own state: how far it is scrolled.
type helpScreen struct {
	top int // the first line shown
}

// scrollKeys are the keys that scroll the ? screen besides ↑ ↓ pgup pgdn
// home end; any other key closes it.
var scrollKeys = struct{ down, up key.Binding }{
	down: key.NewBinding(key.WithKeys("j")),
	up:   key.NewBinding(key.WithKeys("k")),
}

// key scrolls the screen by a movement key (content lines shown in h
// lines); it reports whether msg was one.
func (hs *helpScreen) key(k KeyMap, msg keyMsg, content, h int) bool {
	page := max(h-1, 1)
	switch {
	case matches(msg, k.Down, scrollKeys.down):
		hs.top++
	case matches(msg, k.Up, scrollKeys.up):
		hs.top--
	case matches(msg, k.PageDown):
		hs.top += page
	case matches(msg, k.PageUp):
		hs.top -= page
	case matches(msg, k.Home):
		hs.top = 0
	case matches(msg, k.End):
		hs.top = content
	default:
		return false
	}
	hs.top = hs.clamp(content, h)
	return true
}

// clamp is top kept in [0, the last top that still fills h lines].
func (hs *helpScreen) clamp(content, h int) int {
	if content <= h {
		return 0
	}
	return min(max(hs.top, 0), content-(h-1))
}

// helpLines lays out the ? screen's content in c.width columns: a
// title, the keys of groups in columns, and a note on the ranking (left
// out when it alone would make the keys scroll in h lines).
func helpLines(c *common, groups [][]key.Binding, h int) []string {
	note := "Tenants are ranked by the source (top " + fmtCount(uint64(c.query.Top)) + " + other)."
	var keys, descs []string
	for _, g := range groups {
		for _, b := range g {
			if b.Enabled() && b.Help().Key != "" {
				keys = append(keys, clean(b.Help().Key))
				descs = append(descs, clean(b.Help().Desc))
			}
		}
	}
	out := []string{c.st.title.Render("Keys") + c.st.dim.Render(" · any other key closes this screen")}
	out = append(out, keyColumns(c, keys, descs)...)
	ns := strings.Split(wrapped(c.st.dim, note, c.width), "\n")
	if len(out) <= h && len(out)+len(ns) > h {
		return out
	}
	return append(out, ns...)
}

// keyColumns flows keys (with their descriptions) down the most columns
// that fit in c.width, and returns the rows.
func keyColumns(c *common, keys, descs []string) []string {
	n := len(keys)
	if n == 0 {
		return nil
	}
	type column struct{ from, to, kw, dw int }
	var cols []column
	for ncol := n; ncol >= 1; ncol-- {
		rows := (n + ncol - 1) / ncol
		cols = cols[:0]
		total := 0
		for from := 0; from < n; from += rows {
			col := column{from: from, to: min(from+rows, n)}
			for i := col.from; i < col.to; i++ {
				col.kw = max(col.kw, ansi.StringWidth(keys[i]))
				col.dw = max(col.dw, ansi.StringWidth(descs[i]))
			}
			if len(cols) > 0 {
				total += helpColumnGap
			}
			total += col.kw + 1 + col.dw
			cols = append(cols, col)
		}
		if total <= c.width {
			break
		}
	}
	if len(cols) == 1 {
		return keyColumn(c, keys, descs, cols[0].kw)
	}
	rows := cols[0].to - cols[0].from
	out := make([]string, rows)
	for r := range rows {
		var b strings.Builder
		for j, col := range cols {
			i := col.from + r
			if i >= col.to {
				break
			}
			if j > 0 {
				b.WriteString(strings.Repeat(" ", helpColumnGap))
			}
			d := descs[i]
			if j < len(cols)-1 {
				d = fit(d, col.dw, false)
			}
			b.WriteString(c.help.Styles.FullKey.Render(fit(keys[i], col.kw, false)) + " " + c.help.Styles.FullDesc.Render(d))
		}
		out[r] = strings.TrimRight(b.String(), " ")
	}
	return out
}

// keyColumn is the keys in one column, a description too wide for the
// screen wrapped under itself rather than cut.
func keyColumn(c *common, keys, descs []string, kw int) []string {
	kw = min(kw, max(c.width/3, 1))
	dw := max(c.width-kw-1, 1)
	var out []string
	for i := range keys {
		k := c.help.Styles.FullKey.Render(fit(keys[i], kw, false))
		for j, l := range strings.Split(ansi.Wrap(descs[i], dw, " "), "\n") {
			if j > 0 {
				k = strings.Repeat(" ", kw)
			}
			out = append(out, k+" "+c.help.Styles.FullDesc.Render(l))
		}
	}
	return out
}

// view renders content in h lines: all of it, or the lines from top and
// a last line saying that there is more, and how to scroll to it.
func (hs *helpScreen) view(c *common, content []string, h int) string {
	if helpTooSmall(c) {
		msg := fmt.Sprintf("This window is %d×%d: the list of keys needs at least %d×%d. Enlarge the window, or see qtop --help; any key closes this screen.",
			c.width, c.height, minHelpWidth, minHelpHeight)
		return wrapped(c.st.warn, msg, c.width)
	}
	if len(content) <= h {
		return strings.Join(content, "\n")
	}
	top := hs.clamp(len(content), h)
	shown := content[top:min(top+h-1, len(content))]
	more := "more ↓"
	switch below := top+len(shown) < len(content); {
	case top > 0 && below:
		more = "more ↑↓"
	case top > 0:
		more = "more ↑"
	}
	hint := fmt.Sprintf("%s (j/k to scroll) · lines %d–%d of %d", more, top+1, top+len(shown), len(content))
	return strings.Join(shown, "\n") + "\n" + c.st.warn.Render(clip(hint, c.width))
}
