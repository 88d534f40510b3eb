package tui

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/qtop-dev/qtop/internal/live"
)

// state is who has the keyboard.
type state int

const (
	stateBrowse state = iota // the views
	stateFilter              // typing a / filter
	statePrompt              // a throttle or cancel/terminate prompt
	stateHelp                // the ? overlay
)

// viewID is the view shown.
type viewID int

const (
	viewTenants viewID = iota
	viewHotKeys
	viewStatements
	viewLatency
	viewEnforcement
	numTabs
	viewDetail    = numTabs     // the drill-in of one tenant, reached by enter
	viewFreshness = numTabs + 1 // the Freshness view, reached by 6 (freshness.go)
)

var viewNames = [numTabs]string{"Tenants", "Hot keys", "Statements", "Latency", "Enforcement"}

// Backoff bounds of reconnecting to a lost source.
const (
	minBackoff = time.Second
	maxBackoff = 15 * time.Second
	statusTTL  = 6 * time.Second
)

// Messages.
type (
	snapshotMsg  struct{ snap live.Snapshot }
	sourceErrMsg struct{ err error }
	retryMsg     struct{}
	actionMsg    struct {
		text string
		err  error
	}
	clearStatusMsg struct{ id int }
)

// Option configures a Model.
type Option func(*Model)

// WithRenderer sets the lipgloss renderer (and so the colour profile) of
// the styles; default: a renderer of standard output.
func WithRenderer(r *lipgloss.Renderer) Option { return func(m *Model) { m.renderer = r } }

// WithClock sets the clock used for throttle expiries (default time.Now).
func WithClock(now func() time.Time) Option { return func(m *Model) { m.c.now = now } }

// WithLocation sets the time zone of the times shown (default Local).
func WithLocation(loc *time.Location) Option { return func(m *Model) { m.c.loc = loc } }

// WithUser names who throttles, for the rule's reason.
func WithUser(name string) Option { return func(m *Model) { m.user = name } }

// WithTop sets how many tenants the source sends before "other".
func WithTop(n int) Option { return func(m *Model) { m.query.Top = n } }

// WithSort sets the initial sort column by its measure (live.MeasureRU,
// MeasureDB, …).
func WithSort(measure string) Option {
	return func(m *Model) {
		for col := range numColumns {
			if col.measure() == measure {
				m.tenants.col = col
			}
		}
	}
}

// WithKeyMap replaces the default key bindings.
func WithKeyMap(k KeyMap) Option { return func(m *Model) { m.c.keys = k } }

// WithContext sets the context of the source calls (default: Background).
func WithContext(ctx context.Context) Option { return func(m *Model) { m.ctx = ctx } }

// Model is the root model of qtop. Create it with New; run it with
// tea.NewProgram(m, tea.WithAltScreen()).
type Model struct {
	src      Source
	feats    Features
	ctx      context.Context
	renderer *lipgloss.Renderer
	c        common
	user     string
	query    Query

	state state
	view  viewID
	back  viewID // the view enter came from

	tenants     tenantsView
	hotKeys     hotKeysView
	statements  statementsView
	latency     latencyView
	enforcement enforcementView
	detail      detailView
	fresh       freshnessView

	snap     *live.Snapshot // shown
	pending  *live.Snapshot // arrived while paused
	paused   bool
	fetching bool

	filter field
	prompt prompt

	err      error // the source's last error; nil while it answers
	failures int
	backoff  time.Duration

	status   string
	statusOK bool
	statusID int
}

// New returns the root model reading from src.
func New(src Source, opts ...Option) *Model {
	m := &Model{
		src:     src,
		feats:   src.Features(),
		ctx:     context.Background(),
		c:       common{width: 80, height: 24, keys: DefaultKeyMap(), now: time.Now, loc: time.Local},
		query:   Query{Measure: live.MeasureRU, Top: DefaultTop},
		tenants: newTenantsView(colRU),
		filter:  field{limit: 64},
	}
	for _, o := range opts {
		o(m)
	}
	if m.renderer == nil {
		m.renderer = lipgloss.DefaultRenderer()
	}
	m.c.st = newStyles(m.renderer)
	m.c.help = newHelp(m.renderer, m.c.st)
	if ms := m.tenants.col.measure(); ms != "" {
		m.query.Measure = ms
	}
	return m
}

// Init starts following the source.
func (m *Model) Init() tea.Cmd { return m.fetch() }

// fetch asks the source for its next snapshot, in a command.
func (m *Model) fetch() tea.Cmd {
	if m.fetching {
		return nil
	}
	m.fetching = true
	src, ctx, q := m.src, m.ctx, m.query
	return func() tea.Msg {
		s, err := src.Next(ctx, q)
		if err != nil {
			return sourceErrMsg{err}
		}
		return snapshotMsg{s}
	}
}

// Update handles one message.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	if cmd, ok := m.freshnessUpdate(msg); ok {
		return m, cmd
	}
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.c.width, m.c.height = max(msg.Width, 20), max(msg.Height, 6)
		m.c.help.Width = m.c.width
		return m, nil
	case snapshotMsg:
		m.fetching = false
		m.err, m.failures, m.backoff = nil, 0, 0
		s := msg.snap
		if m.paused {
			m.pending = &s
		} else {
			m.apply(&s)
		}
		return m, tea.Batch(m.fetch(), m.fetchFreshness())
	case sourceErrMsg:
		m.fetching = false
		m.err = msg.err
		m.failures++
		m.backoff = min(max(m.backoff*2, minBackoff), maxBackoff)
		if errors.Is(msg.err, ErrClosed) {
			return m, nil
		}
		return m, tea.Tick(m.backoff, func(time.Time) tea.Msg { return retryMsg{} })
	case retryMsg:
		return m, m.fetch()
	case actionMsg:
		if msg.err != nil {
			return m, m.setStatus(msg.err.Error(), false)
		}
		return m, m.setStatus(msg.text, true)
	case clearStatusMsg:
		if msg.id == m.statusID {
			m.status = ""
		}
		return m, nil
	case tea.KeyMsg:
		return m, m.key(msg)
	}
	return m, nil
}

func (m *Model) setStatus(s string, ok bool) tea.Cmd {
	m.status, m.statusOK = s, ok
	m.statusID++
	id := m.statusID
	return tea.Tick(statusTTL, func(time.Time) tea.Msg { return clearStatusMsg{id} })
}

// apply shows snapshot s.
func (m *Model) apply(s *live.Snapshot) {
	m.snap = s
	m.tenants.dbOnly = s.Source == live.SourcePostgres
	if m.tenants.hidden(m.tenants.col) {
		m.tenants.col, m.tenants.reverse, m.query.Measure = colDB, false, live.MeasureDB
	}
	m.tenants.setRows(s.Tenants)
	m.hotKeys.setRows(s.HotKeys)
	m.statements.setRows(s.Statements)
	m.latency.setRows(s.Services)
	m.enforcement.set(s)
	if m.view == viewDetail {
		m.detail.set(s)
	}
}

// page is the number of rows a view shows.
func (m *Model) page() int { return max(m.bodyHeight()-1, 1) }

func (m *Model) key(msg tea.KeyMsg) tea.Cmd {
	k := m.c.keys
	switch m.state {
	case stateHelp:
		if matches(msg, k.Quit) && msg.String() == "ctrl+c" {
			return tea.Quit
		}
		m.state = stateBrowse
		return nil
	case stateFilter:
		return m.filterKey(msg)
	case statePrompt:
		return m.promptKey(msg)
	}
	if cmd, ok := m.freshnessKey(msg); ok {
		return cmd
	}
	switch {
	case matches(msg, k.Quit):
		return tea.Quit
	case matches(msg, k.Help):
		m.state = stateHelp
	case matches(msg, k.Tenants):
		m.view = viewTenants
	case matches(msg, k.HotKeys):
		m.view = viewHotKeys
	case matches(msg, k.Statements):
		m.view = viewStatements
	case matches(msg, k.Latency):
		m.view = viewLatency
	case matches(msg, k.Enforcement):
		m.view = viewEnforcement
	case matches(msg, k.Freshness):
		if m.view != viewFreshness {
			m.back, m.view = m.tab(), viewFreshness
		}
		return m.fetchFreshness()
	case matches(msg, k.NextView):
		m.view = (m.tab() + 1) % numTabs
	case matches(msg, k.PrevView):
		m.view = (m.tab() + numTabs - 1) % numTabs
	case matches(msg, k.Pause):
		m.paused = !m.paused
		if !m.paused && m.pending != nil {
			m.apply(m.pending)
			m.pending = nil
		}
	case matches(msg, k.Sort, k.Reverse):
		if m.view != viewTenants {
			return m.setStatus("s and S sort the Tenants view (1)", false)
		}
		if matches(msg, k.Sort) {
			m.tenants.sortNext()
		} else {
			m.tenants.sortReverse()
		}
		if ms := m.tenants.col.measure(); ms != "" && ms != m.query.Measure {
			m.query.Measure = ms // the next Next asks the source for the top tenants by it
		}
	case matches(msg, k.Filter):
		if m.view == viewTenants || m.view == viewHotKeys || m.view == viewStatements {
			m.state = stateFilter
			m.filter.value = m.currentFilter()
		} else {
			return m.setStatus("/ filters the Tenants, Hot keys and Statements views", false)
		}
	case matches(msg, k.Enter):
		return m.drill()
	case matches(msg, k.Back):
		switch {
		case m.view == viewDetail || m.view == viewFreshness:
			m.view = m.back
		case m.currentFilter() != "":
			m.setFilter("")
		}
	case matches(msg, k.Throttle):
		return m.startThrottle()
	case matches(msg, k.Cancel, k.Terminate):
		return m.startSignal(matches(msg, k.Terminate))
	default:
		m.navigate(msg)
	}
	return nil
}

// tab is the tab of the view shown (the drill-in's is the one it came from).
func (m *Model) tab() viewID {
	if m.view == viewDetail || m.view == viewFreshness {
		return m.back
	}
	return m.view
}

func (m *Model) navigate(msg tea.KeyMsg) {
	p := m.page()
	switch m.view {
	case viewTenants:
		m.tenants.update(&m.c, msg, p)
	case viewHotKeys:
		m.hotKeys.update(&m.c, msg, p)
	case viewStatements:
		m.statements.update(&m.c, msg, p)
	case viewLatency:
		m.latency.update(&m.c, msg, p)
	case viewEnforcement:
		m.enforcement.update(&m.c, msg, p)
	case viewDetail:
		m.detail.update(&m.c, msg, p)
	case viewFreshness:
		m.fresh.update(&m.c, msg, p)
	}
}

func (m *Model) currentFilter() string {
	switch m.view {
	case viewTenants:
		return m.tenants.filter
	case viewHotKeys:
		return m.hotKeys.filter
	case viewStatements:
		return m.statements.filter
	}
	return ""
}

func (m *Model) setFilter(f string) {
	switch m.view {
	case viewTenants:
		m.tenants.setFilter(f)
	case viewHotKeys:
		m.hotKeys.setFilter(f)
	case viewStatements:
		m.statements.setFilter(f)
	}
}

func (m *Model) filterKey(msg tea.KeyMsg) tea.Cmd {
	switch msg.Type {
	case tea.KeyEnter:
		m.state = stateBrowse
	case tea.KeyEsc:
		m.state = stateBrowse
		m.setFilter("")
	case tea.KeyCtrlC:
		return tea.Quit
	default:
		if m.filter.edit(msg) {
			m.setFilter(m.filter.value)
		}
	}
	return nil
}

// selectedTenant is the tenant the current view points at.
func (m *Model) selectedTenant() (name string, ru float64) {
	switch m.view {
	case viewTenants:
		if r := m.tenants.selected(); r != nil {
			return r.Tenant, r.RUPerSec
		}
	case viewHotKeys:
		if r := m.hotKeys.selected(); r != nil {
			name = r.Tenant
		}
	case viewStatements:
		if r := m.statements.selected(); r != nil {
			name = r.Tenant
		}
	case viewDetail:
		name = m.detail.tenant
	}
	if name != "" && m.snap != nil {
		for i := range m.snap.Tenants {
			if m.snap.Tenants[i].Tenant == name {
				return name, m.snap.Tenants[i].RUPerSec
			}
		}
	}
	return name, 0
}

func (m *Model) drill() tea.Cmd {
	if m.view == viewDetail || m.view == viewLatency || m.view == viewEnforcement {
		return nil
	}
	name, _ := m.selectedTenant()
	switch name {
	case "":
		return m.setStatus("no tenant selected", false)
	case live.OtherTenant:
		return m.setStatus(`"other" sums the tenants beyond the top ones; it has no routes of its own`, false)
	}
	m.back = m.view
	m.view = viewDetail
	m.detail.open(name, m.snap)
	return nil
}

func (m *Model) startThrottle() tea.Cmd {
	if !m.feats.Throttle {
		return m.setStatus("throttling needs a collector (qtop --collector URL, or qtop demo): qtop --postgres only reads PostgreSQL", false)
	}
	name, ru := m.selectedTenant()
	switch name {
	case "":
		return m.setStatus("no tenant selected", false)
	case live.OtherTenant:
		return m.setStatus(`"other" is many tenants; throttle them one by one`, false)
	}
	m.prompt = throttlePrompt(name, ru)
	m.state = statePrompt
	return nil
}

func (m *Model) startSignal(terminate bool) tea.Cmd {
	if !m.feats.Signal {
		return m.setStatus("c and k signal PostgreSQL backends: run qtop --postgres DSN", false)
	}
	if m.view != viewStatements {
		return m.setStatus("c and k act on the statement selected in the Statements view (3)", false)
	}
	r := m.statements.selected()
	if r == nil {
		return m.setStatus("no statement selected", false)
	}
	kind := promptCancel
	if terminate {
		kind = promptTerminate
	}
	m.prompt = prompt{kind: kind, pid: r.PID, tenant: r.Tenant, query: r.Query}
	m.state = statePrompt
	return nil
}

func (m *Model) promptKey(msg tea.KeyMsg) tea.Cmd {
	p := &m.prompt
	if msg.Type == tea.KeyCtrlC {
		return tea.Quit
	}
	if msg.Type == tea.KeyEsc {
		m.state, m.prompt = stateBrowse, prompt{}
		return m.setStatus("nothing done", true)
	}
	if p.kind == promptThrottle && !p.confirm {
		switch msg.Type {
		case tea.KeyTab, tea.KeyShiftTab, tea.KeyUp, tea.KeyDown:
			p.focus = 1 - p.focus
		case tea.KeyEnter:
			if _, _, err := p.parseThrottle(); err != nil {
				p.err = err.Error()
				return nil
			}
			p.err, p.confirm = "", true
		default:
			f := &p.ru
			if p.focus == 1 {
				f = &p.dur
			}
			if f.edit(msg) {
				p.err = ""
			}
		}
		return nil
	}
	switch msg.String() {
	case "y", "Y":
	case "n", "N":
		m.state, m.prompt = stateBrowse, prompt{}
		return m.setStatus("nothing done", true)
	default:
		return nil
	}
	m.state = stateBrowse
	pr := *p
	m.prompt = prompt{}
	src, ctx, loc := m.src, m.ctx, m.c.loc
	switch pr.kind {
	case promptThrottle:
		rule, err := pr.rule(m.c.now(), m.user)
		if err != nil {
			return m.setStatus(err.Error(), false)
		}
		return func() tea.Msg {
			if err := src.Throttle(ctx, rule); err != nil {
				return actionMsg{err: fmt.Errorf("throttle %s: %w", rule.Tenant, err)}
			}
			return actionMsg{text: fmt.Sprintf("%s throttled to %s RU/s until %s (policy posted; see Enforcement, 5)",
				rule.Tenant, fmtNum(rule.RUPerSecond), rule.Expires.In(loc).Format("15:04:05"))}
		}
	case promptCancel:
		return func() tea.Msg {
			if err := src.Cancel(ctx, pr.pid); err != nil {
				return actionMsg{err: err}
			}
			return actionMsg{text: fmt.Sprintf("cancel sent to backend %d", pr.pid)}
		}
	case promptTerminate:
		return func() tea.Msg {
			if err := src.Terminate(ctx, pr.pid); err != nil {
				return actionMsg{err: err}
			}
			return actionMsg{text: fmt.Sprintf("terminate sent to backend %d", pr.pid)}
		}
	}
	return nil
}

// chrome is the rendered lines around the body: title, tabs, banner;
// then status or prompt, and the footer.
func (m *Model) top() string {
	c := &m.c
	var b strings.Builder
	title := "qtop · " + m.src.Describe()
	if m.snap != nil {
		title += " · " + m.snap.Time.In(m.c.loc).Format("15:04:05") + " · " + fmtCount(uint64(m.snap.TenantsSeen)) + " tenants"
	}
	if m.view == viewTenants {
		col := m.tenants.col
		dir := "↓"
		if m.tenants.reverse != (col == colTenant || col == colTier) {
			dir = "↑"
		}
		title += " · sort " + col.String() + dir
	}
	if f := m.currentFilter(); f != "" || m.state == stateFilter {
		title += " · /" + clean(f)
	}
	line := c.st.title.Render(clip(title, c.width))
	if m.paused {
		line += c.st.bad.Render(clip(" PAUSED", max(c.width-lipgloss.Width(line), 0)))
	}
	b.WriteString(line + "\n")
	var tabs strings.Builder
	for i := range numTabs {
		name := fmt.Sprintf("%d %s", i+1, viewNames[i])
		if i == m.tab() {
			tabs.WriteString(c.st.tabActive.Render(name))
		} else {
			tabs.WriteString(c.st.tab.Render(name))
		}
		tabs.WriteString("  ")
	}
	b.WriteString(clip(tabs.String(), c.width))
	if m.err != nil {
		// The error says what to do: wrap it (three lines at most)
		// rather than cut it.
		ls := strings.Split(ansi.Wrap("⚠ "+clean(m.err.Error()), c.width, " "), "\n")
		if len(ls) > 3 {
			ls = ls[:3]
		}
		ls = append(ls, m.retryText())
		for _, l := range ls {
			b.WriteString("\n" + c.st.banner.Render(fit(l, c.width, false)))
		}
	}
	return b.String()
}

func (m *Model) retryText() string {
	when := "showing the last snapshot"
	if m.snap == nil {
		when = "no data yet"
	}
	return fmt.Sprintf("  retrying in %s (attempt %d) · %s", m.backoff, m.failures, when)
}

func (m *Model) bottom() string {
	c := &m.c
	switch {
	case m.state == statePrompt:
		return m.prompt.line(c)
	case m.state == stateFilter:
		return c.st.prompt.Render(clip("/"+m.filter.value+"▏ enter keep · esc clear", c.width))
	}
	var status string
	if m.status != "" {
		st := c.st.bad
		if m.statusOK {
			st = c.st.good
		}
		status = st.Render(clip(clean(m.status), c.width))
	}
	return status + "\n" + clip(c.help.ShortHelpView(c.keys.ShortHelp()), c.width)
}

// bodyHeight is the number of lines left for the view.
func (m *Model) bodyHeight() int {
	return max(m.c.height-lines(m.top())-lines(m.bottom()), 1)
}

func lines(s string) int { return strings.Count(s, "\n") + 1 }

// View renders the screen: exactly height lines, none wider than width.
func (m *Model) View() string {
	c := &m.c
	top, bottom := m.top(), m.bottom()
	h := max(c.height-lines(top)-lines(bottom), 1)
	var body string
	switch {
	case m.state == stateHelp:
		body = c.st.title.Render("Keys") + "\n\n" + c.help.FullHelpView(c.keys.FullHelp()) + "\n\n" +
			c.st.dim.Render(clip("Tenants are ranked by the source (top "+fmtCount(uint64(m.query.Top))+" + other); any key closes this help.", c.width))
	case m.snap == nil:
		body = c.st.dim.Render(clip("waiting for the first snapshot from "+m.src.Describe()+" …", c.width))
	default:
		switch m.view {
		case viewTenants:
			body = m.tenants.view(c, h)
		case viewHotKeys:
			body = m.hotKeys.view(c, h)
		case viewStatements:
			body = m.statements.view(c, h, m.feats.Signal)
		case viewLatency:
			body = m.latency.view(c, h)
		case viewEnforcement:
			body = m.enforcement.view(c, h)
		case viewDetail:
			body = m.detail.view(c, h)
		case viewFreshness:
			_, ok := m.src.(FreshnessSource)
			body = m.fresh.view(c, h, ok)
		}
	}
	n := lines(body)
	switch {
	case n > h:
		body = strings.Join(strings.SplitN(body, "\n", h+1)[:h], "\n")
	case n < h:
		body += strings.Repeat("\n", h-n)
	}
	return top + "\n" + body + "\n" + bottom
}
