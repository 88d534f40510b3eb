package tui

import (
	"context"
	"fmt"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/tenant"
)

var _ Historian = (*Collector)(nil)

// errNoHistory is what h says on a source without a store.
var errNoHistory = fmt.Errorf("%w: h shows the store's history: it needs a collector (qtop --collector URL)", ErrUnsupported)

// History asks the collector for tenant's per-minute history.
func (c *Collector) History(ctx context.Context, tenant string, minutes int) (api.History, error) {
	if c.isClosed() {
		return api.History{}, ErrClosed
	}
	h, err := c.client(Query{}).History(ctx, tenant, minutes)
	if err != nil {
		return api.History{}, c.explain(err)
	}
	return h, nil
}

// historyMsg carries a fetched history to the drill-in.
type historyMsg struct {
	tenant string
	h      api.History
	err    error
}

// storeHistory is the drill-in's history from the store: one point per
// minute over the last 24 h, shown a screen width at a time, ending
// `back` minutes before the newest.
type storeHistory struct {
	tenant  string
	h       *api.History
	err     string
	loading bool
	back    int  // minutes before the newest the view ends at
	placed  bool // back was set to show the tenant's last minutes
}

// fetchHistory asks the source for the drill-in tenant's history.
func (d *detailView) fetchHistory(c *common) tea.Cmd {
	hs, ok := c.src.(Historian)
	if !ok || !hasHistory(c.src) {
		return c.setStatus(errNoHistory.Error(), false)
	}
	if d.untagged {
		return c.setStatus("untagged load has no per-tenant history", false)
	}
	d.hist = storeHistory{tenant: d.tenant, loading: true}
	ctx, name := c.ctx, d.tenant
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		h, err := hs.History(ctx, name, api.MaxHistoryMinutes)
		return historyMsg{tenant: name, h: h, err: err}
	}
}

// gotHistory takes a fetched history, if it is still the one asked for.
func (v *detailView) gotHistory(msg historyMsg) {
	if msg.tenant != v.hist.tenant {
		return
	}
	v.hist.loading = false
	if msg.err != nil {
		v.hist.err = msg.err.Error()
	} else {
		h := msg.h
		v.hist.h = &h
	}
}

// historyLines renders the history section for width w.
func (v *detailView) historyLines(c *common) []string {
	hs := &v.hist
	if hs.tenant != v.tenant || (hs.h == nil && !hs.loading && hs.err == "") {
		if !v.canHistory || v.untagged {
			return nil
		}
		return []string{"", c.st.dim.Render(clip("h: history from the store (per minute, last 24 h)", c.width))}
	}
	out := []string{"", c.st.title.Render("History") + c.st.dim.Render(clip(" · from the store, per minute · [ earlier · ] later · h hide", max(c.width-7, 0)))}
	switch {
	case hs.loading:
		return append(out, c.st.dim.Render("loading…"))
	case hs.err != "":
		return append(out, c.st.bad.Render(clip(clean(hs.err), c.width)))
	case len(hs.h.Points) == 0:
		return append(out, c.st.dim.Render("no minute of this tenant in the store over the last 24 h"))
	}
	h := hs.h
	// One column per minute, from h.From to h.To.
	n := int(h.To.Sub(h.From) / time.Minute)
	series := make([]float64, n)
	what, db := "RU/s", v.measure == api.MeasureDB
	if db {
		what = "DB load"
	}
	for _, p := range h.Points {
		i := int(p.Minute.Sub(h.From) / time.Minute)
		if i < 0 || i >= n {
			continue
		}
		series[i] = p.RUPerSec
		if db {
			series[i] = p.DBLoad
		}
	}
	w := max(c.width-2, 10)
	if !hs.placed && len(h.Points) > 0 {
		// A tenant no longer live: open on its last minutes.
		hs.placed = true
		last := int(h.Points[len(h.Points)-1].Minute.Sub(h.From) / time.Minute)
		hs.back = max(n-1-last-w/8, 0)
	}
	hs.back = min(max(hs.back, 0), max(n-w, 0))
	end := n - hs.back
	start := max(end-w, 0)
	part := series[start:end]
	peak := 0.0
	for _, x := range part {
		peak = max(peak, x)
	}
	from := h.From.Add(time.Duration(start) * time.Minute).In(c.loc)
	to := h.From.Add(time.Duration(end) * time.Minute).In(c.loc)
	out = append(out, c.st.dim.Render(clip(what+" "+from.Format("Jan 2 15:04")+" – "+to.Format("15:04")+" (peak "+fmtNum(peak)+")", c.width)),
		c.st.good.Render(sparkline(part, w, peak)))
	return append(out, p95Lines(c, h, start, end, w)...)
}

// p95Lines is the history's p95 per minute over the same columns, when
// the store has latency for the tenant.
func p95Lines(c *common, h *api.History, start, end, w int) []string {
	series := make([]float64, end-start)
	peak := 0.0
	for _, p := range h.Points {
		i := int(p.Minute.Sub(h.From)/time.Minute) - start
		if i >= 0 && i < len(series) {
			series[i] = p.P95Seconds
			peak = max(peak, p.P95Seconds)
		}
	}
	if peak <= 0 {
		return nil
	}
	return []string{c.st.dim.Render(clip("p95 (peak "+fmtSeconds(peak)+")", c.width)), c.st.warn.Render(sparkline(series, w, peak))}
}

// historyKey moves the history window: [ earlier, ] later, by half a
// screen. It reports whether the key was one of them.
func (v *detailView) historyKey(c *common, msg keyMsg) bool {
	if v.hist.h == nil {
		return false
	}
	step := max((c.width-2)/2, 1)
	switch strings.TrimSpace(msg.String()) {
	case "[":
		v.hist.back += step
	case "]":
		v.hist.back = max(v.hist.back-step, 0)
	default:
		return false
	}
	return true
}

// startHistory asks for a tenant by name (the selected one's to start
// with) and opens its drill-in with its history from the store: any
// tenant the store has, live or not.
func (m *Model) startHistory() tea.Cmd {
	if !hasHistory(m.c.src) {
		return m.c.setStatus(errNoHistory.Error(), false)
	}
	name := ""
	if t, ok := m.selectedRow(); ok && !t.untagged && t.key != api.OtherTenant && m.group() == api.GroupTenant {
		name = t.key
	}
	m.prompt = prompt{kind: promptHistory, name: field{value: clean(name), limit: tenant.MaxTenantLen}}
	m.state = statePrompt
	return nil
}

// historyPromptKey edits the prompt's tenant name; enter opens the
// tenant's drill-in and fetches its history. It reports whether the
// prompt is done.
func (p *prompt) historyPromptKey(c *common, nav *router, msg tea.KeyMsg) (tea.Cmd, bool) {
	if msg.Type != tea.KeyEnter {
		if p.name.edit(msg) {
			p.err = ""
		}
		return nil, false
	}
	name := strings.TrimSpace(p.name.value)
	if err := tenant.ValidateTenant(name); err != nil || name == "" {
		p.err = fmt.Sprintf("%v: tenant %q: want a tenant's name as the store keeps it", ErrInput, name)
		return nil, false
	}
	// "other" is the tenant of that name: its row, live and stored, has
	// its stand-in's name; the overflow row has no history of its own.
	name = tenant.Escape(name)
	d, ok := nav.drillIn().(*detailView)
	if !ok {
		return nil, true
	}
	if nav.isTab(nav.cur) {
		nav.back = nav.cur
	}
	nav.cur = d
	d.drill(c, target{key: name})
	return d.fetchHistory(c), true
}
