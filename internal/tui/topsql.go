package tui

import (
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/qtop-dev/qtop/api"
)

// topSQLView is the Top SQL page (key 9, qtop --postgres): the
// statements of pg_stat_statements by execution time per second over the
// last interval — calls, time, mean, rows and shared blocks per second —
// with the tenants the sampler saw running each (by query_id), which
// pg_stat_statements alone cannot tell.
type topSQLView struct {
	rows []api.TopSQLRow
	err  string
	list list
}

func (v *topSQLView) name() string              { return "Top SQL" }
func (v *topSQLView) key(k *KeyMap) key.Binding { return k.TopSQL }
func (v *topSQLView) title(*common) string      { return "" }

func (v *topSQLView) set(_ *common, s *api.Snapshot, _ bool) tea.Cmd {
	v.rows, v.err = s.TopSQL, s.TopSQLError
	v.list.setLen(len(v.rows))
	return nil
}

func (v *topSQLView) update(c *common, msg tea.Msg) (tea.Cmd, bool) {
	return nil, navigate(c, &v.list, msg, c.page)
}

func (v *topSQLView) view(c *common, h int) string {
	var out strings.Builder
	out.WriteString(c.st.title.Render(clip("Top SQL · pg_stat_statements per second over the last interval, by time · tenants from pg_stat_activity", c.width)))
	// Narrow screens keep TIME, CALLS, MEAN, DATABASE, TENANTS and QUERY.
	wide := c.width >= 130
	tw, nw := 18, 9
	if !wide {
		tw = 12
	}
	fixed := 2 + 3*(nw+1) + 9 + tw + 1
	if wide {
		fixed += 3 * (nw + 1)
	}
	qw := max(c.width-fixed, 16)
	num := func(cells ...string) string {
		var out []string
		for i, s := range cells {
			if wide || i < 3 {
				out = append(out, fit(s, nw, true))
			}
		}
		return strings.Join(out, " ")
	}
	out.WriteString("\n" + c.st.header.Render(clip("  "+num("TIME ms/s", "CALLS/s", "MEAN ms", "ROWS/s", "HIT/s", "READ/s")+" "+
		fit("DATABASE", 8, false)+" "+fit("TENANTS", tw, false)+" "+fit("QUERY", qw, false), c.width)))
	switch {
	case v.err != "":
		out.WriteString("\n" + wrapped(c.st.bad, clean(v.err), c.width))
		return out.String()
	case len(v.rows) == 0 && !c.feats.Signal:
		out.WriteString("\n" + wrapped(c.st.dim, "Top SQL reads pg_stat_statements: run qtop --postgres DSN", c.width))
		return out.String()
	case len(v.rows) == 0:
		out.WriteString("\n" + wrapped(c.st.dim, "no statement ran in the last interval (or this is the first sample)", c.width))
		return out.String()
	}
	from, to := v.list.window(max(h-2, 1))
	for i := from; i < to; i++ {
		r := &v.rows[i]
		q := strings.Join(strings.Fields(r.Query), " ")
		line := clip(gutter(num(fmtNum(r.TimeMsPerSec), fmtNum(r.CallsPerSec), fmtNum(r.MeanMs), fmtNum(r.RowsPerSec), fmtNum(r.SharedHitPerSec),
			fmtNum(r.SharedReadPerSec))+" "+fit(orDash(clean(r.Database)), 8, false)+" "+fit(orDash(clean(strings.Join(r.Tenants, ","))), tw, false)+" "+
			fit(clean(q), qw, false), i == v.list.cursor), c.width)
		if i == v.list.cursor {
			line = c.st.selected.Render(line)
		}
		out.WriteString("\n" + line)
	}
	return out.String()
}
