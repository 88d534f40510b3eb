package tui

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/qtop-dev/qtop/internal/live"
)

// statementsView is the Statements view: the running statements sampled
// from pg_stat_activity, grouped by tenant (the tenant with the most
// statement time first), longest first within a tenant.
type statementsView struct {
	rows   []live.StatementRow
	order  []int
	filter string
	list   list
	sel    int32 // the selected pid, kept across snapshots
}

func (v *statementsView) setRows(rows []live.StatementRow) {
	v.rows = rows
	v.rebuild()
}

func (v *statementsView) setFilter(f string) {
	v.filter = f
	v.rebuild()
}

func (v *statementsView) rebuild() {
	v.order = v.order[:0]
	f := strings.ToLower(v.filter)
	total := make(map[string]int64)
	for i, r := range v.rows {
		if f == "" || strings.Contains(strings.ToLower(r.Tenant), f) || strings.Contains(strings.ToLower(r.Route), f) {
			v.order = append(v.order, i)
			total[r.Tenant] += int64(r.Duration)
		}
	}
	slices.SortFunc(v.order, func(a, b int) int {
		ra, rb := &v.rows[a], &v.rows[b]
		if ra.Tenant != rb.Tenant {
			if c := cmp.Compare(total[rb.Tenant], total[ra.Tenant]); c != 0 {
				return c
			}
			return strings.Compare(ra.Tenant, rb.Tenant)
		}
		if c := cmp.Compare(rb.Duration, ra.Duration); c != 0 {
			return c
		}
		return cmp.Compare(ra.PID, rb.PID)
	})
	v.list.setLen(len(v.order))
	for i, j := range v.order {
		if v.rows[j].PID == v.sel {
			v.list.cursor = i
			return
		}
	}
	v.remember()
}

func (v *statementsView) remember() {
	if r := v.selected(); r != nil {
		v.sel = r.PID
	}
}

func (v *statementsView) selected() *live.StatementRow {
	if v.list.cursor < len(v.order) {
		return &v.rows[v.order[v.list.cursor]]
	}
	return nil
}

func (v *statementsView) update(c *common, msg keyMsg, page int) {
	if v.list.navigate(c.keys, msg, page) {
		v.remember()
	}
}

// statementLines renders statements (already ordered) as table lines;
// cursor < 0 selects none.
func statementLines(c *common, rows []*live.StatementRow, from, to, cursor int) string {
	var out strings.Builder
	tw, rw := 16, 18
	qw := max(c.width-(8+tw+rw+9+8+16+8), 10)
	out.WriteString(c.st.header.Render(clip("  "+fit("PID", 8, true)+" "+fit("TENANT", tw, false)+" "+fit("ROUTE", rw, false)+" "+
		fit("DURATION", 9, true)+" "+fit("STATE", 8, false)+" "+fit("WAIT", 16, false)+" "+fit("QUERY", qw, false), c.width)))
	for i := from; i < to; i++ {
		r := rows[i]
		wait := r.WaitEventType
		if r.WaitEvent != "" {
			wait += ":" + r.WaitEvent
		}
		if len(r.BlockedBy) > 0 {
			wait = "blocked by " + strconv.Itoa(int(r.BlockedBy[0]))
		}
		tn := r.Tenant
		if tn == "" {
			tn = "(untagged)"
		}
		s := clip(gutter(fit(strconv.Itoa(int(r.PID)), 8, true)+" "+fit(clean(tn), tw, false)+" "+fit(clean(r.Route), rw, false)+" "+
			fit(fmtDuration(r.Duration), 9, true)+" "+fit(clean(r.State), 8, false)+" "+fit(clean(wait), 16, false)+" "+
			fit(clean(r.Query), qw, false), i == cursor), c.width)
		switch {
		case i == cursor:
			s = c.st.selected.Render(s)
		case len(r.BlockedBy) > 0:
			s = c.st.warn.Render(s)
		}
		out.WriteString("\n" + s)
	}
	return out.String()
}

func (v *statementsView) view(c *common, h int, signal bool) string {
	from, to := v.list.window(h - 1)
	rows := make([]*live.StatementRow, len(v.order))
	for i, j := range v.order {
		rows[i] = &v.rows[j]
	}
	s := statementLines(c, rows, from, to, v.list.cursor)
	if len(v.order) == 0 {
		msg := "no statement running"
		if !signal {
			msg = "no statements: the collector samples pg_stat_activity only when started with --postgres (or run qtop --postgres DSN)"
		}
		s += "\n" + c.st.dim.Render(clip(msg, c.width))
	}
	return s
}
