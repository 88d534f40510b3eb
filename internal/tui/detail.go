package tui

import (
	"slices"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/qtop-dev/qtop/api"
)

// detailView is the drill-in of one tenant: its numbers, its history
// sparkline and waits, its routes, its hot keys and its statements.
type detailView struct {
	tenant   string // the tenant, or the value of the grouping
	untagged bool   // the untagged row
	group    string // the grouping the row was opened under
	source   string
	row      *api.TenantRow // nil when the tenant has no load in the window
	measure  string
	keys     []api.HotKeyRow
	stmts    []*api.StatementRow
	scroll   int
	hist     storeHistory
	// canHistory: the source has a store (Historian).
	canHistory bool
	snap       *api.Snapshot // the last one applied
}

func (v *detailView) name() string            { return "Tenant" }
func (v *detailView) key(*KeyMap) key.Binding { return key.Binding{} } // enter on a row opens it
func (v *detailView) title(*common) string    { return "" }

// selection is the row shown (selector): t throttles it.
func (v *detailView) selection() (target, bool) {
	return target{key: v.tenant, untagged: v.untagged}, true
}

// drill opens the view on row t of the last snapshot (drillIn).
func (v *detailView) drill(c *common, t target) {
	_, v.canHistory = c.src.(Historian)
	group := api.GroupTenant
	if v.snap != nil && v.snap.GroupBy != "" {
		group = v.snap.GroupBy
	}
	v.tenant, v.untagged, v.group, v.scroll = t.key, t.untagged, group, 0
	v.load(v.snap)
}

// set keeps the snapshot, and takes the row's parts of it when shown.
func (v *detailView) set(_ *common, s *api.Snapshot, shown bool) tea.Cmd {
	v.snap = s
	if shown {
		v.load(s)
	}
	return nil
}

// update shows or hides the row's history from the store (h), moves it
// ([ ]), scrolls, and takes a fetched history.
func (v *detailView) update(c *common, msg tea.Msg) (tea.Cmd, bool) {
	switch msg := msg.(type) {
	case historyMsg:
		v.gotHistory(msg)
		return nil, true
	case tea.KeyMsg:
		if matches(msg, c.keys.History) {
			if v.hist.tenant == v.tenant && v.hist.h != nil {
				v.hist = storeHistory{}
				return nil, true
			}
			return v.fetchHistory(c), true
		}
		return nil, v.historyKey(c, msg) || v.scrollKey(c, msg)
	}
	return nil, false
}

// mine reports whether statement r belongs to the row shown.
func (v *detailView) mine(s *api.Snapshot, r *api.StatementRow) bool {
	if s.GroupBy != "" {
		return r.Group == v.tenant
	}
	if v.untagged {
		return r.Tenant == ""
	}
	return r.Tenant == v.tenant
}

// load takes the row's parts of a snapshot.
func (v *detailView) load(s *api.Snapshot) {
	v.row, v.keys, v.stmts = nil, v.keys[:0], v.stmts[:0]
	if s == nil {
		return
	}
	v.measure, v.source = s.Measure, s.Source
	if g := s.GroupBy; g != "" && g != v.group {
		// The grouping changed under the drill-in: nothing matches.
		return
	}
	for i := range s.Tenants {
		if s.Tenants[i].Tenant == v.tenant && s.Tenants[i].Untagged == v.untagged {
			r := s.Tenants[i]
			v.row = &r
			break
		}
	}
	if !v.untagged && (s.GroupBy == "" || s.GroupBy == api.GroupTenant) {
		for _, k := range s.HotKeys {
			if k.Tenant == v.tenant {
				v.keys = append(v.keys, k)
			}
		}
	}
	for i := range s.Statements {
		if v.mine(s, &s.Statements[i]) {
			v.stmts = append(v.stmts, &s.Statements[i])
		}
	}
}

// scrollKey scrolls the view; it reports whether msg was a movement key.
func (v *detailView) scrollKey(c *common, msg keyMsg) bool {
	page := c.page
	switch {
	case matches(msg, c.keys.Up):
		v.scroll = max(v.scroll-1, 0)
	case matches(msg, c.keys.Down):
		v.scroll++
	case matches(msg, c.keys.PageUp):
		v.scroll = max(v.scroll-page, 0)
	case matches(msg, c.keys.PageDown):
		v.scroll += page
	case matches(msg, c.keys.Home):
		v.scroll = 0
	default:
		return false
	}
	return true
}

func (v *detailView) view(c *common, h int) string {
	label := rowLabel(v.group, &api.TenantRow{Tenant: v.tenant, Untagged: v.untagged})
	kind := "Tenant "
	if v.group != "" && v.group != api.GroupTenant {
		kind = strings.ToUpper(v.group[:1]) + v.group[1:] + " "
	}
	if v.row == nil {
		lines := []string{c.st.title.Render(clip(kind+label, c.width)),
			c.st.dim.Render(clip("no load in the window (or beyond the top tenants the source sends)", c.width))}
		lines = append(lines, v.historyLines(c)...)
		if v.untagged || len(v.stmts) > 0 {
			lines = append(lines, v.statements(c)...)
		}
		return v.scrolled(lines, h)
	}
	lines := v.numbers(c, kind+label)
	lines = append(lines, v.historyLines(c)...)
	if w := waitsLine(v.row.Waits); w != "" {
		lines = append(lines, clip(w, c.width))
	}
	lines = append(lines, v.routes(c)...)
	lines = append(lines, v.hotKeys(c)...)
	lines = append(lines, v.statements(c)...)
	return v.scrolled(lines, h)
}

// shareOf is a row's share as the drill-in says it, of the measure the
// list is sorted by (the snapshot's), which it names; none for p95,
// which has no total.
func shareOf(measure string, share float64) string {
	what := map[string]string{api.MeasureRU: "RU", api.MeasureDB: "DB load", api.MeasureReq: "requests", api.MeasureErr: "errors"}[measure]
	if what == "" {
		return ""
	}
	return " · " + fmtShare(share) + " of all " + what
}

// numbers renders the row's title, its numbers and its sparkline.
func (v *detailView) numbers(c *common, head string) []string {
	r := v.row
	if r.Tier != "" {
		head += " (" + r.Tier + ")"
	}
	if r.Throttled {
		head += "  THROTTLED"
	}
	lines := []string{c.st.title.Render(clip(head, c.width))}
	if v.source == api.SourcePostgres {
		// PostgreSQL knows neither RU, nor requests, nor their latency.
		lines = append(lines, clip("DB load "+fmtNum(r.DBLoad)+" AAS"+shareOf(api.MeasureDB, r.Share)+" · RU/s, req/s, p95, err/s n/a (pg_stat_activity only)", c.width))
	} else {
		lines = append(lines, clip("DB load "+fmtNum(r.DBLoad)+" AAS · "+fmtNum(r.RUPerSec)+" RU/s · "+fmtNum(r.ReqPerSec)+" req/s · p95 "+
			fmtSeconds(r.P95Seconds)+" · "+fmtNum(r.ErrPerSec)+" err/s"+shareOf(v.measure, r.Share), c.width))
	}
	what := "RU/s"
	if v.measure == api.MeasureDB {
		what = "DB load"
	}
	top := 0.0
	for _, x := range r.History {
		top = max(top, x)
	}
	return append(lines, c.st.dim.Render(clip(what+", last "+fmtCount(uint64(len(r.History)))+" s (peak "+fmtNum(top)+")", c.width)),
		c.st.good.Render(sparkline(r.History, max(c.width-2, 1), top)))
}

// waitsLine is the row's waits, the largest first, or "" when it has none.
func waitsLine(waits map[string]float64) string {
	if len(waits) == 0 {
		return ""
	}
	type wait struct {
		name string
		v    float64
	}
	ws := make([]wait, 0, len(waits))
	for k, x := range waits {
		ws = append(ws, wait{k, x})
	}
	slices.SortFunc(ws, func(a, b wait) int {
		if a.v != b.v {
			if a.v > b.v {
				return -1
			}
			return 1
		}
		return strings.Compare(a.name, b.name)
	})
	parts := make([]string, len(ws))
	for i, w := range ws {
		parts[i] = clean(w.name) + " " + fmtNum(w.v)
	}
	return "Waits (AAS): " + strings.Join(parts, " · ")
}

// routes renders the row's routes; PostgreSQL fills DB load only.
func (v *detailView) routes(c *common) []string {
	pg := v.source == api.SourcePostgres
	rw := max(min(c.width-(8*5+5), 40), 10)
	app := func(s string) string {
		if pg {
			return "n/a"
		}
		return s
	}
	lines := []string{"", c.st.title.Render("Routes"), c.st.header.Render(clip(fit("ROUTE", rw, false)+" "+fit("DB LOAD", 8, true)+" "+fit("RU/s", 8, true)+" "+
		fit("REQ/s", 8, true)+" "+fit("ERR/s", 8, true)+" "+fit("P95", 8, true), c.width))}
	for _, x := range v.row.Routes {
		route := routeName(x.Route)
		lines = append(lines, clip(fit(route, rw, false)+" "+fit(fmtNum(x.DBLoad), 8, true)+" "+fit(app(fmtNum(x.RUPerSec)), 8, true)+" "+
			fit(app(fmtNum(x.ReqPerSec)), 8, true)+" "+fit(app(fmtNum(x.ErrPerSec)), 8, true)+" "+fit(app(fmtSeconds(x.P95Seconds)), 8, true), c.width))
	}
	if len(v.row.Routes) == 0 {
		lines = append(lines, c.st.dim.Render("no route in the window"))
	}
	return lines
}

// hotKeys renders the row's keys among the hottest (none for PostgreSQL,
// whose pg_stat_activity has no keys).
func (v *detailView) hotKeys(c *common) []string {
	if v.source == api.SourcePostgres {
		return nil
	}
	lines := []string{"", c.st.title.Render("Hot keys")}
	if len(v.keys) == 0 {
		return append(lines, c.st.dim.Render("none among the hottest keys"))
	}
	kw := max(min(c.width-30, 50), 10)
	lines = append(lines, c.st.header.Render(clip(fit("KEY", kw, false)+" "+fit("COUNT", 9, true)+" "+fit("± ERR", 9, true)+" "+fit("SHARE", 8, true), c.width)))
	for _, k := range v.keys {
		lines = append(lines, clip(fit(clean(k.Key), kw, false)+" "+fit(fmtCount(k.Count), 9, true)+" "+fit(fmtCount(k.Err), 9, true)+" "+fit(fmtShare(k.Share), 8, true), c.width))
	}
	return lines
}

// statements renders the row's statements, and for the untagged row how
// to tag them.
func (v *detailView) statements(c *common) []string {
	lines := []string{"", c.st.title.Render("Statements")}
	if len(v.stmts) == 0 {
		lines = append(lines, c.st.dim.Render("none running"))
	} else {
		lines = append(lines, strings.Split(statementLines(c, v.stmts, 0, len(v.stmts), -1, nil), "\n")...)
	}
	if v.untagged && (v.group == "" || v.group == api.GroupTenant) {
		lines = append(lines, "", c.st.title.Render("How to tag them"))
		for _, l := range []string{
			"These statements carry no /*tenant='…'*/ comment, so their load has no tenant.",
			"· Go: wrap the driver (sqlcomment.WrapConnector, or pgxcomment for pgx) and set tenant.With(ctx, tags) at the edge.",
			"· Other stacks: any sqlcommenter (Rails query log tags, Django, knex, Datadog DBM) adding a tenant key.",
			"· Jobs and scripts: set application_name (PGAPPNAME=batchjob) and press b to group by application.",
		} {
			lines = append(lines, clip(l, c.width))
		}
	}
	return lines
}

func (v *detailView) scrolled(lines []string, h int) string {
	v.scroll = min(v.scroll, max(len(lines)-h, 0))
	lines = lines[v.scroll:]
	if len(lines) > h {
		lines = lines[:h]
	}
	return strings.Join(lines, "\n")
}
