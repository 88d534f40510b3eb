package tui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/pgactivity"
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
	viewLocks
	numTabs
	viewDetail    = numTabs     // the drill-in of one tenant, reached by enter
	viewFreshness = numTabs + 1 // the Freshness view, reached by 7 (freshness.go)
)

var viewNames = [numTabs]string{"Tenants", "Hot keys", "Statements", "Latency", "Enforcement", "Locks"}

// Backoff bounds of reconnecting to a lost source.
const (
	minBackoff = time.Second
	maxBackoff = 15 * time.Second
	statusTTL  = 6 * time.Second
)

// Messages.
type (
	snapshotMsg  struct{ snap api.Snapshot }
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

// WithActionLog writes one JSON line per action carried out (throttle,
// cancel, terminate) to w: when, who, on what, and how it ended.
func WithActionLog(w io.Writer) Option { return func(m *Model) { m.log = &actionLog{w: w} } }

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

// WithGroupBy sets the initial grouping (live.GroupTenant …; only
// qtop --postgres groups by anything but tenant).
func WithGroupBy(g string) Option { return func(m *Model) { m.query.GroupBy = g } }

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
	log      *actionLog

	state state
	view  viewID
	back  viewID // the view enter came from

	tenants     tenantsView
	hotKeys     hotKeysView
	statements  statementsView
	latency     latencyView
	enforcement enforcementView
	locks       locksView
	detail      detailView
	summary     summary
	fresh       freshnessView

	snap     *api.Snapshot // shown
	pending  *api.Snapshot // arrived while paused
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
		query:   Query{Measure: api.MeasureRU, Top: DefaultTop},
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
	case historyMsg:
		if msg.tenant == m.detail.hist.tenant {
			m.detail.hist.loading = false
			if msg.err != nil {
				m.detail.hist.err = msg.err.Error()
			} else {
				h := msg.h
				m.detail.hist.h = &h
			}
		}
		return m, nil
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
func (m *Model) apply(s *api.Snapshot) {
	m.snap = s
	m.tenants.dbOnly = s.Source == api.SourcePostgres
	m.tenants.group = s.GroupBy
	if m.tenants.hidden(m.tenants.col) {
		m.tenants.col, m.tenants.reverse, m.query.Measure = colDB, false, api.MeasureDB
	}
	m.tenants.setRows(s.Tenants)
	m.hotKeys.setRows(s.HotKeys)
	m.statements.setRows(s.Statements)
	m.latency.setRows(s.Services)
	m.enforcement.set(s)
	m.locks.set(s)
	m.summary.add(s)
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
	case matches(msg, k.Locks):
		m.view = viewLocks
	case matches(msg, k.Select):
		if m.view != viewStatements {
			return m.setStatus("space marks statements in the Statements view (3), for c and k", false)
		}
		m.statements.toggle()
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
	case matches(msg, k.GroupBy):
		return m.nextGroup()
	case matches(msg, k.History):
		if m.view != viewDetail {
			return m.setStatus("h shows a tenant's history: enter on it first", false)
		}
		if m.detail.hist.tenant == m.detail.tenant && m.detail.hist.h != nil {
			m.detail.hist = storeHistory{}
			return nil
		}
		return m.fetchHistory()
	case m.view == viewDetail && m.detail.historyKey(&m.c, msg):
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
	case viewLocks:
		m.locks.update(&m.c, msg, p)
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

// target is the row a view points at: a tenant (or group value), or the
// untagged row.
type target struct {
	key      string
	untagged bool
	ru       float64
}

// selectedRow returns the row the current view points at.
func (m *Model) selectedRow() (target, bool) {
	var t target
	switch m.view {
	case viewTenants:
		if r := m.tenants.selected(); r != nil {
			return target{key: r.Tenant, untagged: r.Untagged, ru: r.RUPerSec}, true
		}
		return t, false
	case viewHotKeys:
		r := m.hotKeys.selected()
		if r == nil || r.Tenant == "" {
			return t, false
		}
		t.key = r.Tenant
	case viewStatements:
		r := m.statements.selected()
		if r == nil {
			return t, false
		}
		t.key = r.Tenant
		if m.snap != nil && m.snap.GroupBy != "" {
			t.key = r.Group
		}
		t.untagged = t.key == ""
	case viewDetail:
		t.key, t.untagged = m.detail.tenant, m.detail.untagged
	default:
		return t, false
	}
	if m.snap != nil {
		for i := range m.snap.Tenants {
			if r := &m.snap.Tenants[i]; r.Tenant == t.key && r.Untagged == t.untagged {
				t.ru = r.RUPerSec
			}
		}
	}
	return t, true
}

// group is the grouping shown.
func (m *Model) group() string {
	if m.snap != nil && m.snap.GroupBy != "" {
		return m.snap.GroupBy
	}
	return api.GroupTenant
}

func (m *Model) drill() tea.Cmd {
	if m.view == viewDetail || m.view == viewLatency || m.view == viewEnforcement || m.view == viewLocks {
		return nil
	}
	t, ok := m.selectedRow()
	switch {
	case !ok:
		return m.setStatus("no tenant selected", false)
	case t.key == api.OtherTenant && !t.untagged:
		return m.setStatus(`"other" sums the tenants beyond the top ones; it has no routes of its own`, false)
	}
	m.back = m.view
	m.view = viewDetail
	_, m.detail.canHistory = m.src.(Historian)
	m.detail.open(t.key, t.untagged, m.group(), m.snap)
	return nil
}

// nextGroup switches the grouping of the Tenants view.
func (m *Model) nextGroup() tea.Cmd {
	if !m.feats.Group {
		return m.setStatus("b groups the load by application, user, database, client or statement: run qtop --postgres DSN (a collector groups by tenant)", false)
	}
	i := max(groupIndex(m.query.GroupBy), 0)
	m.query.GroupBy = api.Groups[(i+1)%len(api.Groups)]
	m.tenants.group = m.query.GroupBy
	m.tenants.pinned = false
	return m.setStatus("grouping by "+m.query.GroupBy+" from the next sample (b again: "+api.Groups[(i+2)%len(api.Groups)]+")", true)
}

func (m *Model) startThrottle() tea.Cmd {
	if !m.feats.Throttle {
		return m.setStatus("throttling needs a collector (qtop --collector URL, or qtop demo): qtop --postgres only reads PostgreSQL", false)
	}
	t, ok := m.selectedRow()
	switch {
	case !ok:
		return m.setStatus("no tenant selected", false)
	case t.untagged:
		return m.setStatus("untagged load has no tenant to throttle: enter on it shows how to tag it", false)
	case m.group() != api.GroupTenant:
		return m.setStatus("t throttles a tenant: press b until the grouping is tenant", false)
	case t.key == api.OtherTenant:
		return m.setStatus(`"other" is many tenants; throttle them one by one`, false)
	}
	m.prompt = throttlePrompt(t.key, t.ru)
	m.state = statePrompt
	return nil
}

func (m *Model) startSignal(terminate bool) tea.Cmd {
	if !m.feats.Signal {
		return m.setStatus("c and k signal PostgreSQL backends: run qtop --postgres DSN", false)
	}
	if m.view != viewStatements && m.view != viewLocks {
		return m.setStatus("c and k act on the statements marked (space) or selected in the Statements view (3), or on the session selected in Locks (6)", false)
	}
	if _, ok := m.src.(SafeSignaler); !ok {
		return m.setStatus("this source cannot check that a backend still runs the statement shown; nothing done", false)
	}
	ts := m.statements.targets()
	if m.view == viewLocks {
		ts = nil
		if r := m.locks.selected(); r != nil {
			ts = []api.StatementRow{*r}
		}
	}
	if len(ts) == 0 {
		return m.setStatus("no statement selected", false)
	}
	kind := promptCancel
	if terminate {
		kind = promptTerminate
	}
	m.prompt = prompt{kind: kind, pid: ts[0].PID, tenant: ts[0].Tenant, query: ts[0].Query, targets: ts}
	m.state = statePrompt
	return nil
}

// signal carries out a confirmed cancel or terminate of every target, each
// only if its backend still runs what was shown, and logs each one.
func (m *Model) signal(pr prompt) tea.Cmd {
	ss, ok := m.src.(SafeSignaler)
	if !ok {
		return nil
	}
	ctx, log, who, desc := m.ctx, m.log, m.actor(), m.src.Describe()
	name := "cancel"
	if pr.kind == promptTerminate {
		name = "terminate"
	}
	now := m.c.now
	if m.view == viewStatements {
		m.statements.marked = nil
	}
	return func() tea.Msg {
		var done, moved []string
		var firstErr error
		for _, r := range pr.targets {
			t := pgactivity.Target{PID: r.PID, QueryStart: r.QueryStart, BackendStart: r.BackendStart}
			var err error
			if pr.kind == promptTerminate {
				if strings.HasPrefix(r.State, "idle in transaction") {
					t.XactStart = r.XactStart // the transaction that holds the lock
				}
				err = ss.TerminateSession(ctx, t, who)
			} else {
				err = ss.CancelStatement(ctx, t, who)
			}
			a := action{Time: now().UTC(), User: who, Source: desc, Action: name, PID: r.PID, QueryStart: r.QueryStart,
				XactStart: t.XactStart, BackendStart: r.BackendStart, Tenant: r.Tenant, Query: r.Query, Result: "done"}
			pid := strconv.Itoa(int(r.PID))
			switch {
			case err == nil:
				done = append(done, pid)
			case errors.Is(err, pgactivity.ErrMovedOn):
				moved = append(moved, pid)
				a.Result, a.Error = "moved on", err.Error()
			default:
				a.Result, a.Error = "error", err.Error()
				if firstErr == nil {
					firstErr = err
				}
			}
			log.write(a)
		}
		var parts []string
		if len(done) > 0 {
			parts = append(parts, name+" sent to backend "+strings.Join(done, ", "))
		}
		if len(moved) > 0 {
			parts = append(parts, "backend "+strings.Join(moved, ", ")+" moved on to another statement or session: nothing done")
		}
		if firstErr != nil {
			parts = append(parts, firstErr.Error())
		}
		text := strings.Join(parts, " · ")
		if len(done) == 0 {
			return actionMsg{err: errors.New(text)}
		}
		return actionMsg{text: text}
	}
}

// actor names who acts, for the logs: "qtop (alice)".
func (m *Model) actor() string {
	if m.user == "" {
		return "qtop"
	}
	return "qtop (" + m.user + ")"
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
		log, who, desc, now := m.log, m.actor(), m.src.Describe(), m.c.now
		return func() tea.Msg {
			a := action{Time: now().UTC(), User: who, Source: desc, Action: "throttle", Tenant: rule.Tenant, Result: "done"}
			if err := src.Throttle(ctx, rule); err != nil {
				a.Result, a.Error = "error", err.Error()
				log.write(a)
				return actionMsg{err: fmt.Errorf("throttle %s: %w", rule.Tenant, err)}
			}
			log.write(a)
			return actionMsg{text: fmt.Sprintf("%s throttled to %s RU/s until %s (policy posted; see Enforcement, 5)",
				rule.Tenant, fmtNum(rule.RUPerSecond), rule.Expires.In(loc).Format("15:04:05"))}
		}
	case promptCancel, promptTerminate:
		return m.signal(pr)
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
		what := " tenants"
		if g := m.snap.GroupBy; g != "" && g != api.GroupTenant {
			what = " groups by " + g
		}
		title += " · " + m.snap.Time.In(m.c.loc).Format("15:04:05") + " · " + fmtCount(uint64(m.snap.TenantsSeen)) + what
		if u := unreadTags(m.snap); u != "" {
			title += " · ⚠ " + u
		}
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
	if m.snap != nil && m.summary.line != "" {
		st := c.st.dim
		if m.summary.alert {
			st = c.st.warn
		}
		b.WriteString("\n" + st.Render(clip("⚑ "+clean(m.summary.line), c.width)))
	}
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
			if n := m.snap.ParallelWorkers; n > 0 && h > 3 {
				body = m.tenants.view(c, h-1) + "\n" + c.st.dim.Render(clip("DB load counts "+strconv.Itoa(n)+
					" parallel workers: a parallel query keeps several backends busy, so DB load can exceed the number of client sessions", c.width))
			} else {
				body = m.tenants.view(c, h)
			}
		case viewHotKeys:
			body = m.hotKeys.view(c, h)
		case viewStatements:
			body = m.statements.view(c, h, m.feats.Signal)
		case viewLatency:
			body = m.latency.view(c, h)
		case viewEnforcement:
			body = m.enforcement.view(c, h)
		case viewLocks:
			body = m.locks.view(c, h)
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

// unreadTags says how many sampled statements lost their tags (a
// malformed comment, a text cut at track_activity_query_size), or "".
func unreadTags(s *api.Snapshot) string {
	var parts []string
	if n := s.Collector.MalformedComments; n > 0 {
		parts = append(parts, fmtCount(n)+" comments unread")
	}
	if n := s.Collector.TruncatedStatements; n > 0 {
		parts = append(parts, fmtCount(n)+" statements cut (track_activity_query_size)")
	}
	return strings.Join(parts, ", ")
}
