package tui

import (
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/qtop-dev/qtop/api"
)

// hotKeysView is the Hot keys view: the hottest keys over the window with
// their Space-Saving error bounds (the true count is in [count−err, count]).
type hotKeysView struct {
	rows    []api.HotKeyRow
	order   []int
	pattern string
	list    list
}

func (v *hotKeysView) name() string              { return "Hot keys" }
func (v *hotKeysView) shortName() string         { return "Keys" }
func (v *hotKeysView) key(k *KeyMap) key.Binding { return k.HotKeys }
func (v *hotKeysView) title(*common) string      { return "" }

func (v *hotKeysView) set(_ *common, s *api.Snapshot, _ bool) tea.Cmd {
	v.rows = s.HotKeys
	v.rebuild()
	return nil
}

// selection is the tenant of the key under the cursor (selector).
func (v *hotKeysView) selection() (target, bool) {
	r := v.selected()
	if r == nil || r.Tenant == "" {
		return target{}, false
	}
	return target{key: r.Tenant}, true
}

// filter is the view's / filter (filterable).
func (v *hotKeysView) filter() string { return v.pattern }

func (v *hotKeysView) setFilter(f string) {
	v.pattern = f
	v.rebuild()
}

func (v *hotKeysView) rebuild() {
	v.order = v.order[:0]
	f := strings.ToLower(v.pattern)
	for i, r := range v.rows {
		if f == "" || strings.Contains(strings.ToLower(r.Key), f) || strings.Contains(strings.ToLower(r.Tenant), f) {
			v.order = append(v.order, i)
		}
	}
	v.list.setLen(len(v.order))
}

func (v *hotKeysView) selected() *api.HotKeyRow {
	if v.list.cursor < len(v.order) {
		return &v.rows[v.order[v.list.cursor]]
	}
	return nil
}

func (v *hotKeysView) update(c *common, msg tea.Msg) (tea.Cmd, bool) {
	return nil, navigate(c, &v.list, msg, c.page)
}

func (v *hotKeysView) view(c *common, h int) string {
	kw := min(max(c.width-(20+10+10+8+6), 12), 48)
	tw := 20
	var out strings.Builder
	out.WriteString(c.st.header.Render(clip("  "+fit("KEY", kw, false)+" "+fit("TENANT", tw, false)+" "+
		fit("COUNT", 10, true)+" "+fit("± ERR", 10, true)+" "+fit("SHARE", 8, true), c.width)))
	from, to := v.list.window(h - 1)
	for i := from; i < to; i++ {
		r := &v.rows[v.order[i]]
		s := clip(gutter(fit(clean(r.Key), kw, false)+" "+fitName(clean(r.Tenant), tw)+" "+
			fit(fmtCount(r.Count), 10, true)+" "+fit(fmtCount(r.Err), 10, true)+" "+fit(fmtShare(r.Share), 8, true), i == v.list.cursor), c.width)
		if i == v.list.cursor {
			s = c.st.selected.Render(s)
		}
		out.WriteString("\n" + s)
	}
	if len(v.order) == 0 {
		out.WriteString("\n" + c.st.dim.Render("no keyed work in the window (processes report keys with tenant.Tags.Key)"))
	}
	return out.String()
}
