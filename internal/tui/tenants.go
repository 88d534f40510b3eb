package tui

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/qtop-dev/qtop/api"
	incidents "github.com/qtop-dev/qtop/incident"
)

// column is a column of the Tenants view, each one a sort order.
type column int

const (
	colTenant column = iota
	colTier
	colDB
	colRU
	colReq
	colP95
	colErr
	colShare
	colThrottle
	numColumns
)

var columnNames = [numColumns]string{"TENANT", "TIER", "DB LOAD", "RU/s", "REQ/s", "P95", "ERR/s", "SHARE", "THROTTLE"}

// columnWidths are the widths of the columns after the tenant's, which
// takes what is left (within tenantMin…tenantMax).
var columnWidths = [numColumns]int{0, 5, 8, 8, 8, 8, 7, 7, 9}

const (
	tenantMin = 10
	tenantMax = 28
)

func (c column) String() string { return columnNames[c] }

// measure is the live measure the source should order tenants by when the
// view is sorted by c, or "" when the column is not one.
func (c column) measure() string {
	switch c {
	case colDB:
		return api.MeasureDB
	case colRU:
		return api.MeasureRU
	case colReq:
		return api.MeasureReq
	case colP95:
		return api.MeasureP95
	case colErr:
		return api.MeasureErr
	}
	return ""
}

// tenantsView is the Tenants view: one row per tenant, the "other" row
// last, sorted by any column, filtered by name.
type tenantsView struct {
	rows    []api.TenantRow // the snapshot's, "other" excluded
	other   *api.TenantRow
	order   []int // indices into rows, sorted and filtered
	col     column
	reverse bool
	pattern string
	list    list
	sel     string // the selected tenant, kept across snapshots once pinned
	// selUntagged: the selected row is the untagged one.
	selUntagged bool
	// pinned is set once the user moves the cursor: until then it stays
	// on the first row, the worst offender, as in top.
	pinned bool
	// dbOnly: the source measures database load only (qtop --postgres),
	// so the request columns are left out.
	dbOnly bool
	// group is what the rows are grouped by (live.GroupTenant …).
	group string
	// workers is the snapshot's count of parallel workers (a note under
	// the rows says what they do to DB load).
	workers int
}

// rowLabel is the name a row is shown with: its tenant (or group value),
// or the untagged row's label, which no tenant name can be mistaken for
// (it is drawn apart, and its row is never merged with a tenant's).
func rowLabel(group string, r *api.TenantRow) string { return incidents.Label(group, r) }

// groupName is the header of the first column.
func groupName(group string) string {
	if group == "" {
		return "TENANT"
	}
	return strings.ToUpper(group)
}

// tenantText is what the filter matches in a row: every column shown.
func (v *tenantsView) tenantText(r *api.TenantRow) string {
	th := ""
	if r.Throttled {
		th = "throttled"
	}
	return strings.ToLower(strings.Join([]string{rowLabel(v.group, r), r.Tier, fmtNum(r.DBLoad), fmtNum(r.RUPerSec),
		fmtNum(r.ReqPerSec), fmtSeconds(r.P95Seconds), fmtNum(r.ErrPerSec), fmtShare(r.Share), th}, "\x00"))
}

// appOnly are the columns only application reports fill.
var appOnly = [numColumns]bool{colRU: true, colReq: true, colP95: true, colErr: true, colThrottle: true}

// hidden reports whether col is left out of the view whatever the width.
func (v *tenantsView) hidden(col column) bool { return v.dbOnly && appOnly[col] }

func newTenantsView(col column) *tenantsView { return &tenantsView{col: col} }

// columnOf returns the column sorted by measure, or colRU when none is.
func columnOf(measure string) (column, bool) {
	for col := range numColumns {
		if col.measure() != "" && col.measure() == measure {
			return col, true
		}
	}
	return colRU, false
}

func (v *tenantsView) name() string              { return "Tenants" }
func (v *tenantsView) key(k *KeyMap) key.Binding { return k.Tenants }
func (v *tenantsView) setGroup(g string)         { v.group, v.pinned = g, false }

// set takes the snapshot's tenants; a column the source cannot fill
// (qtop --postgres has no RU) gives way to DB load, which the source is
// asked to order by.
func (v *tenantsView) set(c *common, s *api.Snapshot, _ bool) tea.Cmd {
	v.dbOnly = s.Source == api.SourcePostgres
	v.group = s.GroupBy
	v.workers = s.ParallelWorkers
	if v.hidden(v.col) {
		v.col, v.reverse, c.query.Measure = colDB, false, api.MeasureDB
	}
	v.setRows(s.Tenants)
	return nil
}

// title says the sort order.
func (v *tenantsView) title(*common) string {
	dir := "↓"
	if v.reverse != (v.col == colTenant || v.col == colTier) {
		dir = "↑"
	}
	return " · sort " + v.col.String() + dir
}

// selection is the tenant under the cursor (selector).
func (v *tenantsView) selection() (target, bool) {
	if r := v.selected(); r != nil {
		return target{key: r.Tenant, untagged: r.Untagged, ru: r.RUPerSec}, true
	}
	return target{}, false
}

// setRows takes the tenants of a snapshot.
func (v *tenantsView) setRows(rows []api.TenantRow) {
	v.rows = v.rows[:0]
	v.other = nil
	for i := range rows {
		if rows[i].Tenant == api.OtherTenant {
			o := rows[i]
			v.other = &o
			continue
		}
		v.rows = append(v.rows, rows[i])
	}
	v.rebuild()
}

// less orders two rows by the view's column: names ascending, numbers
// descending, ties by name; reverse flips it.
func (v *tenantsView) compare(a, b *api.TenantRow) int {
	var c int
	switch v.col {
	case colTenant:
		c = strings.Compare(a.Tenant, b.Tenant)
	case colTier:
		c = cmp.Compare(tierKey(a.Tier), tierKey(b.Tier))
	case colDB:
		c = cmp.Compare(b.DBLoad, a.DBLoad)
	case colRU:
		c = cmp.Compare(b.RUPerSec, a.RUPerSec)
	case colReq:
		c = cmp.Compare(b.ReqPerSec, a.ReqPerSec)
	case colP95:
		c = cmp.Compare(b.P95Seconds, a.P95Seconds)
	case colErr:
		c = cmp.Compare(b.ErrPerSec, a.ErrPerSec)
	case colShare:
		c = cmp.Compare(b.Share, a.Share)
	case colThrottle:
		c = cmp.Compare(btoi(b.Throttled), btoi(a.Throttled))
	}
	if c == 0 && v.col != colTenant {
		c = strings.Compare(a.Tenant, b.Tenant)
	}
	if v.reverse {
		c = -c
	}
	return c
}

// tierKey orders tiers T0 first and unknown tiers last.
func tierKey(t string) string {
	if t == "" {
		return "~"
	}
	return t
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// rebuild recomputes the order after new rows, a new sort or a new filter,
// keeping the selected tenant selected.
func (v *tenantsView) rebuild() {
	v.order = v.order[:0]
	f := strings.ToLower(v.pattern)
	for i := range v.rows {
		if f == "" || strings.Contains(v.tenantText(&v.rows[i]), f) {
			v.order = append(v.order, i)
		}
	}
	slices.SortFunc(v.order, func(a, b int) int { return v.compare(&v.rows[a], &v.rows[b]) })
	n := len(v.order)
	if v.other != nil && f == "" {
		n++
	}
	v.list.setLen(n)
	if v.pinned {
		for i, j := range v.order {
			if v.rows[j].Tenant == v.sel && v.rows[j].Untagged == v.selUntagged {
				v.list.cursor = i
				return
			}
		}
	}
	if !v.pinned {
		v.list.cursor = 0
	}
	v.remember()
}

// remember notes the tenant under the cursor.
func (v *tenantsView) remember() {
	if r := v.selected(); r != nil {
		v.sel, v.selUntagged = r.Tenant, r.Untagged
	}
}

// selected returns the row under the cursor (the "other" row included),
// or nil.
func (v *tenantsView) selected() *api.TenantRow {
	c := v.list.cursor
	switch {
	case c < len(v.order):
		return &v.rows[v.order[c]]
	case c == len(v.order) && v.other != nil && v.pattern == "":
		return v.other
	}
	return nil
}

func (v *tenantsView) sortNext() {
	v.col = (v.col + 1) % numColumns
	for v.hidden(v.col) {
		v.col = (v.col + 1) % numColumns
	}
	v.reverse = false
	v.rebuild()
}

func (v *tenantsView) sortReverse() {
	v.reverse = !v.reverse
	v.rebuild()
}

// filter is the view's / filter (filterable).
func (v *tenantsView) filter() string { return v.pattern }

func (v *tenantsView) setFilter(f string) {
	v.pattern = f
	v.rebuild()
}

// update sorts (s, S; the source is then asked for the top tenants by
// the column's measure) and moves the cursor.
func (v *tenantsView) update(c *common, msg tea.Msg) (tea.Cmd, bool) {
	km, ok := msg.(tea.KeyMsg)
	switch {
	case !ok:
		return nil, false
	case matches(km, c.keys.Sort):
		v.sortNext()
	case matches(km, c.keys.Reverse):
		v.sortReverse()
	case v.list.navigate(c.keys, km, c.page):
		v.pinned = v.list.cursor != 0
		v.remember()
		return nil, true
	default:
		return nil, false
	}
	if ms := v.col.measure(); ms != "" {
		c.query.Measure = ms
	}
	return nil, true
}

// dropOrder is the order in which columns leave a narrow screen.
var dropOrder = []column{colTier, colThrottle, colErr, colReq, colP95, colDB}

// layout returns which columns a screen of width w shows, and the width of
// the tenant column: the least useful columns go first when the screen is
// too narrow for all of them.
func (v *tenantsView) layout(w int) (shown [numColumns]bool, tw int) {
	rest := 2 // the gutter
	for col := colTier; col < numColumns; col++ {
		if v.hidden(col) {
			continue
		}
		shown[col] = true
		rest += columnWidths[col] + 1
	}
	shown[colTenant] = true
	for _, col := range dropOrder {
		if w-rest >= tenantMin {
			break
		}
		if !shown[col] {
			continue
		}
		shown[col] = false
		rest -= columnWidths[col] + 1
	}
	return shown, min(max(w-rest, tenantMin), tenantMax)
}

func (v *tenantsView) header(c *common) string {
	shown, tw := v.layout(c.width)
	var b strings.Builder
	for col := range numColumns {
		if !shown[col] {
			continue
		}
		name := columnNames[col]
		if col == colTenant {
			name = groupName(v.group)
		}
		if col == v.col {
			if v.reverse == (col == colTenant || col == colTier) {
				name += "↓"
			} else {
				name += "↑"
			}
		}
		w := columnWidths[col]
		if col == colTenant {
			b.WriteString(fit(name, tw, false))
			continue
		}
		b.WriteByte(' ')
		b.WriteString(fit(name, w, col != colTier && col != colThrottle))
	}
	return c.st.header.Render(clip(gutter(b.String(), false), c.width))
}

// line renders one tenant row (plain text, no styles).
func (v *tenantsView) line(b *strings.Builder, c *common, r *api.TenantRow) {
	shown, tw := v.layout(c.width)
	b.WriteString(fitName(rowLabel(v.group, r), tw))
	cell := func(s string, col column, right bool) {
		if !shown[col] {
			return
		}
		b.WriteByte(' ')
		b.WriteString(fit(s, columnWidths[col], right))
	}
	cell(r.Tier, colTier, false)
	cell(fmtNum(r.DBLoad), colDB, true)
	cell(v.app(fmtNum(r.RUPerSec)), colRU, true)
	cell(v.app(fmtNum(r.ReqPerSec)), colReq, true)
	cell(v.app(fmtSeconds(r.P95Seconds)), colP95, true)
	cell(v.app(fmtNum(r.ErrPerSec)), colErr, true)
	cell(fmtShare(r.Share), colShare, true)
	th := ""
	if r.Throttled {
		th = "THROTTLED"
	}
	cell(th, colThrottle, false)
}

// view renders the rows, and the note on parallel workers when there
// are some and room for it.
func (v *tenantsView) view(c *common, h int) string {
	if n := v.workers; n > 0 && h > 3 {
		return v.table(c, h-1) + "\n" + c.st.dim.Render(clip("DB load counts "+strconv.Itoa(n)+
			" parallel workers: a parallel query keeps several backends busy, so DB load can exceed the number of client sessions", c.width))
	}
	return v.table(c, h)
}

// table renders the header and h−1 rows.
func (v *tenantsView) table(c *common, h int) string {
	var out strings.Builder
	out.WriteString(v.header(c))
	from, to := v.list.window(h - 1)
	var b strings.Builder
	for i := from; i < to; i++ {
		out.WriteByte('\n')
		b.Reset()
		var r *api.TenantRow
		isOther := i >= len(v.order)
		if isOther {
			r = v.other
		} else {
			r = &v.rows[v.order[i]]
		}
		v.line(&b, c, r)
		s := clip(gutter(b.String(), i == v.list.cursor), c.width)
		switch {
		case i == v.list.cursor:
			s = c.st.selected.Render(s)
		case isOther, r.Untagged:
			s = c.st.other.Render(s)
		case r.Throttled:
			s = c.st.warn.Render(s)
		}
		out.WriteString(s)
	}
	if len(v.order) == 0 && (v.other == nil || v.pattern != "") {
		out.WriteByte('\n')
		if v.pattern != "" {
			out.WriteString(c.st.dim.Render("no row matches /" + clean(v.pattern)))
		} else {
			out.WriteString(c.st.dim.Render("no tenant has load yet"))
		}
	}
	return out.String()
}

// app is a cell of a column only application reports fill: "n/a" when
// the source cannot know it (qtop --postgres reads the database only).
func (v *tenantsView) app(s string) string {
	if v.dbOnly {
		return "n/a"
	}
	return s
}
