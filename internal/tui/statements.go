package tui

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/qtop-dev/qtop/api"
)

// statementsView is the Statements view: the running statements sampled
// from pg_stat_activity, grouped by tenant (the tenant with the most
// statement time first), longest first within a tenant.
type statementsView struct {
	rows    []api.StatementRow
	order   []int
	pattern string
	list    list
	sel     int32 // the selected pid, kept across snapshots
	// marked are the statements marked with space for c and k, by pid,
	// as they were when marked (a cancel acts on that statement only).
	marked map[int32]api.StatementRow
	group  string     // the snapshot's grouping
	full   bool       // v: the selected statement's whole text below the table
	plan   explainMsg // e: the plan of a statement, asked for
}

// toggle marks or unmarks the selected statement.
func (v *statementsView) toggle() {
	r := v.selected()
	if r == nil {
		return
	}
	if v.marked == nil {
		v.marked = map[int32]api.StatementRow{}
	}
	if _, ok := v.marked[r.PID]; ok {
		delete(v.marked, r.PID)
	} else {
		v.marked[r.PID] = *r
	}
	v.list.move(1)
	v.remember()
}

// targets returns the marked statements, by pid, or the selected one.
func (v *statementsView) targets() []api.StatementRow {
	if len(v.marked) == 0 {
		if r := v.selected(); r != nil {
			return []api.StatementRow{*r}
		}
		return nil
	}
	out := make([]api.StatementRow, 0, len(v.marked))
	for _, r := range v.marked {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b api.StatementRow) int { return cmp.Compare(a.PID, b.PID) })
	return out
}

// statementText is what the filter matches in a statement: every field.
func statementText(r *api.StatementRow) string {
	tn := r.Tenant
	if tn == "" {
		tn = "(untagged)"
	}
	return strings.ToLower(strings.Join([]string{strconv.Itoa(int(r.PID)), tn, r.Route, r.Application, r.User, r.Database,
		r.Client, fmtDuration(r.Duration), r.State, waitText(r), r.Query}, "\x00"))
}

// waitText is a statement's wait: "Lock:transactionid", "blocked by 42",
// "" when it waits on nothing.
func waitText(r *api.StatementRow) string {
	if len(r.BlockedBy) > 0 {
		return "blocked by " + strconv.Itoa(int(r.BlockedBy[0]))
	}
	switch {
	case r.WaitEventType != "" && r.WaitEvent != "":
		return r.WaitEventType + ":" + r.WaitEvent
	case r.WaitEventType != "":
		return r.WaitEventType
	}
	return r.WaitEvent
}

func (v *statementsView) name() string              { return "Statements" }
func (v *statementsView) shortName() string         { return "Stmts" }
func (v *statementsView) key(k *KeyMap) key.Binding { return k.Statements }
func (v *statementsView) title(*common) string      { return "" }

func (v *statementsView) set(_ *common, s *api.Snapshot, _ bool) tea.Cmd {
	v.rows = s.Statements
	v.group = s.GroupBy
	v.rebuild()
	return nil
}

// selection is the tenant (or group value) of the statement under the
// cursor (selector).
func (v *statementsView) selection() (target, bool) {
	r := v.selected()
	if r == nil {
		return target{}, false
	}
	t := target{key: r.Tenant}
	if v.group != "" {
		t.key = r.Group
	}
	t.untagged = t.key == ""
	return t, true
}

// sent forgets the marks once c or k acted on them (signaler).
func (v *statementsView) sent() { v.marked = nil }

// filter is the view's / filter (filterable).
func (v *statementsView) filter() string { return v.pattern }

func (v *statementsView) setFilter(f string) {
	v.pattern = f
	v.rebuild()
}

func (v *statementsView) rebuild() {
	v.order = v.order[:0]
	f := strings.ToLower(v.pattern)
	total := make(map[string]int64)
	for i, r := range v.rows {
		if f == "" || strings.Contains(statementText(&r), f) {
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

func (v *statementsView) selected() *api.StatementRow {
	if v.list.cursor < len(v.order) {
		return &v.rows[v.order[v.list.cursor]]
	}
	return nil
}

// update marks statements (space) and moves the cursor.
func (v *statementsView) update(c *common, msg tea.Msg) (tea.Cmd, bool) {
	if km, ok := msg.(tea.KeyMsg); ok && matches(km, c.keys.Select) {
		v.toggle()
		return nil, true
	}
	if pm, ok := msg.(explainMsg); ok {
		if pm.pid == v.plan.pid {
			v.plan = pm
		}
		return nil, true
	}
	if km, ok := msg.(tea.KeyMsg); ok && matches(km, c.keys.Explain) {
		return v.explain(c), true
	}
	if km, ok := msg.(tea.KeyMsg); ok && matches(km, c.keys.Full) {
		v.full = !v.full
		return nil, true
	}
	if navigate(c, &v.list, msg, c.page) {
		v.remember()
		return nil, true
	}
	return nil, false
}

// stmtCols are the widths of the statement table's columns; 0 leaves a
// column out. The QUERY column stays at every width: narrow screens drop
// APP, then ROUTE, then narrow TENANT, DATABASE and WAIT.
type stmtCols struct{ tenant, db, app, route, wait, query int }

func stmtWidths(width int) stmtCols {
	w := stmtCols{tenant: 16, db: 8, app: 12, route: 16, wait: 16}
	fixed := func() int {
		n := 2 + 9 + 10 + 9 // gutter, PID, DURATION, STATE and their spaces
		for _, c := range []int{w.tenant, w.db, w.app, w.route, w.wait} {
			if c > 0 {
				n += c + 1
			}
		}
		return n
	}
	for _, drop := range []func(){func() { w.app = 0 }, func() { w.route = 0 }, func() { w.tenant, w.db, w.wait = 10, 8, 12 }} {
		if width-fixed() >= 16 {
			break
		}
		drop()
	}
	w.query = max(width-fixed(), 10)
	return w
}

// cols joins the cells whose width is not 0.
func cols(cells ...string) string {
	var out []string
	for _, c := range cells {
		if c != "" {
			out = append(out, c)
		}
	}
	return strings.Join(out, " ")
}

func cell(s string, w int, right bool) string {
	if w == 0 {
		return ""
	}
	return fit(s, w, right)
}

// statementLines renders statements (already ordered) as table lines;
// cursor < 0 selects none; marked statements show a '*'. The DATABASE
// column tells apart the same statement run in two databases.
func statementLines(c *common, rows []*api.StatementRow, from, to, cursor int, marked map[int32]api.StatementRow) string {
	var out strings.Builder
	w := stmtWidths(c.width)
	out.WriteString(c.st.header.Render(clip("  "+cols(fit("PID", 8, true), cell("TENANT", w.tenant, false), cell("DATABASE", w.db, false),
		cell("APP", w.app, false), cell("ROUTE", w.route, false), fit("DURATION", 9, true), fit("STATE", 8, false),
		cell("WAIT", w.wait, false), fit("QUERY", w.query, false)), c.width)))
	for i := from; i < to; i++ {
		r := rows[i]
		tn := r.Tenant
		if tn == "" {
			tn = "(untagged)"
		}
		pid := strconv.Itoa(int(r.PID))
		if _, ok := marked[r.PID]; ok {
			pid = "*" + pid
		}
		q := clean(r.Query)
		if r.Workers > 0 {
			q = "[+" + strconv.Itoa(r.Workers) + " workers] " + q
		}
		s := clip(gutter(cols(fit(pid, 8, true), fitName(clean(tn), w.tenant), cell(orDash(clean(r.Database)), w.db, false),
			cell(clean(r.Application), w.app, false), cell(clean(r.Route), w.route, false), fit(fmtDuration(r.Duration), 9, true),
			fit(clean(r.State), 8, false), cell(clean(waitText(r)), w.wait, false), fit(q, w.query, false)), i == cursor), c.width)
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

func (v *statementsView) view(c *common, h int) string {
	signal := c.feats.Signal
	var full []string
	if r := v.selected(); v.full && r != nil {
		full = fullText(c, r, max(h/2, 3))
	}
	full = append(full, v.planLines(c, max(h/2, 3))...)
	from, to := v.list.window(h - 1 - len(full))
	rows := make([]*api.StatementRow, len(v.order))
	for i, j := range v.order {
		rows[i] = &v.rows[j]
	}
	s := statementLines(c, rows, from, to, v.list.cursor, v.marked)
	if len(v.order) == 0 {
		msg := "no statement running"
		if !signal {
			msg = "no statements: the collector samples pg_stat_activity only when started with --postgres (or run qtop --postgres DSN)"
		}
		s += "\n" + c.st.dim.Render(clip(msg, c.width))
	}
	for _, l := range full {
		s += "\n" + l
	}
	return s
}

// fullText is the whole text of r (v), wrapped in at most n lines under a
// line naming the session.
func fullText(c *common, r *api.StatementRow, n int) []string {
	head := "pid " + strconv.Itoa(int(r.PID)) + " · database " + orDash(clean(r.Database)) + " · user " + orDash(clean(r.User))
	if !r.QueryStart.IsZero() {
		head += " · started " + r.QueryStart.In(c.loc).Format("15:04:05")
	}
	lines := []string{c.st.title.Render(clip(head+" · v hides", c.width))}
	q := strings.Join(strings.Fields(strings.ReplaceAll(r.Query, "\n", " ")), " ")
	ws := strings.Split(ansi.Wrap(clean(q), max(c.width-2, 10), " "), "\n")
	if len(ws) > n-1 {
		ws = append(ws[:n-2], "… ("+strconv.Itoa(len([]rune(q)))+" characters; --once --format json has them all)")
	}
	for _, l := range ws {
		lines = append(lines, clip("  "+l, c.width))
	}
	return lines
}
