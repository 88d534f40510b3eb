package tui

import (
	"bytes"
	"io"
	"strings"

	"github.com/charmbracelet/x/ansi"
)

// wideTab aligns tab-terminated cells as text/tabwriter does (a column's
// width is that of its widest cell over the block of consecutive lines
// that have a cell there, plus padding; the text after a line's last tab
// is not a cell), but by display width: a CJK character takes two columns
// and an emoji two, where tabwriter counts one a rune, so tables of
// tenants named in Japanese went askew. Write it all, then Flush.
type wideTab struct {
	out     io.Writer
	padding int
	buf     bytes.Buffer
}

func newWideTab(out io.Writer, padding int) *wideTab { return &wideTab{out: out, padding: padding} }

func (t *wideTab) Write(p []byte) (int, error) { return t.buf.Write(p) }

// Flush writes the aligned text to out.
func (t *wideTab) Flush() error {
	text := t.buf.String()
	t.buf.Reset()
	trailing := strings.HasSuffix(text, "\n")
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	cells := make([][]string, len(lines))
	for i, l := range lines {
		cells[i] = strings.Split(l, "\t") // the last one is not a cell
	}
	widths := make([][]int, len(lines)) // widths[i][c]: column c's width on line i
	for i := range cells {
		widths[i] = make([]int, len(cells[i])-1)
	}
	t.columns(cells, widths, 0, len(cells), 0)
	var out strings.Builder
	for i, cs := range cells {
		for c, cell := range cs {
			out.WriteString(cell)
			if c < len(cs)-1 {
				out.WriteString(strings.Repeat(" ", widths[i][c]-ansi.StringWidth(cell)))
			}
		}
		if i < len(cells)-1 || trailing {
			out.WriteByte('\n')
		}
	}
	_, err := io.WriteString(t.out, out.String())
	return err
}

// columns sets the widths of column col over lines from..to: each block
// of consecutive lines with a cell in col takes its widest cell's width
// plus padding, and the block's next column is set the same way.
func (t *wideTab) columns(cells [][]string, widths [][]int, from, to, col int) {
	for i := from; i < to; {
		if len(cells[i])-1 <= col {
			i++
			continue
		}
		end, w := i, 0
		for end < to && len(cells[end])-1 > col {
			w = max(w, ansi.StringWidth(cells[end][col]))
			end++
		}
		for j := i; j < end; j++ {
			widths[j][col] = w + t.padding
		}
		t.columns(cells, widths, i, end, col+1)
		i = end
	}
}
