package tui

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
)

// fmtNum formats a rate compactly in at most 6 columns: 0.42, 12.3, 842,
// 12.3k, 4.5M.
func fmtNum(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	neg := v < 0
	if neg {
		v = -v
	}
	var s string
	switch {
	case v == 0:
		s = "0"
	case v < 10:
		s = strconv.FormatFloat(v, 'f', 2, 64)
	case v < 100:
		s = strconv.FormatFloat(v, 'f', 1, 64)
	case v < 10_000:
		s = strconv.FormatFloat(v, 'f', 0, 64)
	case v < 1e6:
		s = strconv.FormatFloat(v/1e3, 'f', 1, 64) + "k"
	case v < 1e9:
		s = strconv.FormatFloat(v/1e6, 'f', 1, 64) + "M"
	default:
		s = strconv.FormatFloat(v/1e9, 'f', 1, 64) + "G"
	}
	if neg {
		return "-" + s
	}
	return s
}

// fmtCount formats a count: 842, 12.3k, 4.5M.
func fmtCount(n uint64) string {
	if n < 10_000 {
		return strconv.FormatUint(n, 10)
	}
	return fmtNum(float64(n))
}

// fmtSeconds formats a latency given in seconds: 850µs, 12ms, 1.25s, 3m20s.
func fmtSeconds(s float64) string {
	if s <= 0 || math.IsNaN(s) {
		return "-"
	}
	return fmtDuration(time.Duration(s * float64(time.Second)))
}

// fmtDuration formats a duration with about three significant digits.
func fmtDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Millisecond:
		return strconv.FormatInt(int64(d/time.Microsecond), 10) + "µs"
	case d < 100*time.Millisecond:
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + "ms"
	case d < time.Second:
		return strconv.FormatInt(int64(d/time.Millisecond), 10) + "ms"
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + "s"
	case d < time.Hour:
		return d.Truncate(time.Second).String()
	}
	return d.Truncate(time.Minute).String()
}

// fmtShare formats a 0–1 share as a percentage.
func fmtShare(v float64) string {
	if v <= 0 || math.IsNaN(v) {
		return "-"
	}
	return strconv.FormatFloat(v*100, 'f', 1, 64) + "%"
}

// clean makes text from the wire safe to print on one line: what
// api.Printable replaces (unsafeRune).
func clean(s string) string { return safeText(s, false) }

// routeName is a route as the views show it: "(no route tag)" for the
// load of processes that record none (a gate, an agent wrapping a whole
// handler that is not a ServeMux), rather than a blank.
func routeName(s string) string {
	if s == "" {
		return "(no route tag)"
	}
	return clean(s)
}

// fit truncates s (already clean) to w columns with an ellipsis, and pads
// it with spaces to exactly w columns, on the right or, with right set,
// on the left.
func fit(s string, w int, right bool) string {
	if w <= 0 {
		return ""
	}
	sw := ansi.StringWidth(s)
	if sw > w {
		s = ansi.Truncate(s, w, "…")
		sw = ansi.StringWidth(s)
	}
	if sw == w {
		return s
	}
	pad := strings.Repeat(" ", w-sw)
	if right {
		return pad + s
	}
	return s + pad
}

// fitName is fit for a name (already clean) on the left of its column:
// cut in the middle, so that names alike but for their end (a long
// tenant's number, a stand-in's #hash) stay apart on screen.
func fitName(s string, w int) string {
	sw := ansi.StringWidth(s)
	if sw <= w || w < 10 {
		return fit(s, w, false)
	}
	rs := []rune(s)
	i, tw := len(rs), 0 // the tail: rs[i:], tw columns, at most w/3
	for i > 0 {
		cw := ansi.StringWidth(string(rs[i-1]))
		if tw+cw > w/3 {
			break
		}
		tw += cw
		i--
	}
	return fit(ansi.Truncate(s, w-1-tw, "")+"…"+string(rs[i:]), w, false)
}

// clip cuts a rendered line to w columns (escape sequences kept intact).
func clip(s string, w int) string {
	if w <= 0 {
		return ""
	}
	if ansi.StringWidth(s) <= w {
		return s
	}
	return ansi.Truncate(s, w, "")
}

// wrapped wraps each line of s (already clean but for its newlines) at
// its spaces in w columns, and renders each line with st: a message that
// says what to do is never cut at the screen's edge. Words are broken
// only where wider than w, never at a hyphen: "--collector" stays whole,
// to be copied.
func wrapped(st lipgloss.Style, s string, w int) string {
	w = max(w, 1)
	var ls []string
	for _, p := range strings.Split(s, "\n") {
		ls = append(ls, wrapLine(p, w)...)
	}
	for i, l := range ls {
		ls[i] = st.Render(l)
	}
	return strings.Join(ls, "\n")
}

// wrapLine wraps s at its spaces in w columns.
func wrapLine(s string, w int) []string {
	var ls []string
	cur := ""
	for _, word := range strings.Fields(s) {
		switch {
		case cur == "":
		case ansi.StringWidth(cur+" "+word) <= w:
			word = cur + " " + word
		default:
			ls = append(ls, cur)
		}
		cur = word
		for ansi.StringWidth(cur) > w {
			head := ansi.Truncate(cur, w, "")
			if head == "" { // a rune wider than w
				head = string([]rune(cur)[:1])
			}
			ls = append(ls, head)
			cur = cur[len(head):]
		}
	}
	return append(ls, cur)
}

// gutter prefixes a table line with the selection mark, visible without
// colours too.
func gutter(s string, selected bool) string {
	if selected {
		return "› " + s
	}
	return "  " + s
}

var sparks = []rune("▁▂▃▄▅▆▇█")

// sparkline draws the last w values of vs, scaled from 0 to top (the
// largest value when top ≤ 0), one column each; missing points (NaN or
// before the series starts) are blank.
func sparkline(vs []float64, w int, top float64) string {
	if w <= 0 {
		return ""
	}
	if len(vs) > w {
		vs = vs[len(vs)-w:]
	}
	if top <= 0 {
		for _, v := range vs {
			top = max(top, v)
		}
	}
	var b strings.Builder
	b.Grow(w * 3)
	for range w - len(vs) {
		b.WriteByte(' ')
	}
	for _, v := range vs {
		switch {
		case math.IsNaN(v) || v < 0:
			b.WriteByte(' ')
		case top <= 0 || v == 0:
			b.WriteRune(sparks[0])
		default:
			i := int(v / top * float64(len(sparks)-1))
			b.WriteRune(sparks[min(max(i, 0), len(sparks)-1)])
		}
	}
	return b.String()
}
