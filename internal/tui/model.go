package tui

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/qtop-dev/qtop/api"
)

// state is who has the keyboard.
type state int

const (
	stateBrowse state = iota // the views
	stateFilter              // typing a / filter
	statePrompt              // a throttle or cancel/terminate prompt
	stateHelp                // the ? overlay
)

// Backoff bounds of reconnecting to a lost source: a collector that comes
// back is followed again within maxBackoff (plus a connect), so a restart
// costs a second or two of the incident, not fifteen.
const (
	minBackoff = 250 * time.Millisecond
	maxBackoff = time.Second
	statusTTL  = 6 * time.Second
)

// Messages.
type (
	snapshotMsg struct{ snap api.Snapshot }
	// warnMsg is a snapshot that came with a failure beside it (the
	// recording stopped): shown, and the failure said.
	warnMsg struct {
		snap api.Snapshot
		err  error
	}
	sourceErrMsg struct{ err error }
	retryMsg     struct{}
	actionMsg    struct {
		text string
		err  error
	}
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
func WithTop(n int) Option { return func(m *Model) { m.c.query.Top = n } }

// WithSort sets the initial sort column by its measure (live.MeasureRU,
// MeasureDB, …).
func WithSort(measure string) Option {
	return func(m *Model) {
		if col, ok := columnOf(measure); ok {
			m.c.query.Measure = col.measure()
		}
	}
}

// WithGroupBy sets the initial grouping (live.GroupTenant …; only
// qtop --postgres groups by anything but tenant).
func WithGroupBy(g string) Option { return func(m *Model) { m.c.query.GroupBy = g } }

// WithKeyMap replaces the default key bindings.
func WithKeyMap(k KeyMap) Option { return func(m *Model) { m.c.keys = k } }

// WithContext sets the context of the source calls (default: Background).
func WithContext(ctx context.Context) Option { return func(m *Model) { m.c.ctx = ctx } }

// Model is the root model of qtop. Create it with New; run it with
// tea.NewProgram(m, tea.WithAltScreen()).
type Model struct {
	c        common
	renderer *lipgloss.Renderer
	user     string
	log      *actionLog

	state   state
	nav     router
	summary summary

	snap     *api.Snapshot // shown
	pending  *api.Snapshot // arrived while paused
	paused   bool
	fetching bool

	filter field
	prompt prompt
	help   helpScreen

	err      error // the source's last error; nil while it answers
	failures int
	backoff  time.Duration
}

// New returns the root model reading from src.
func New(src Source, opts ...Option) *Model {
	m := &Model{
		c: common{width: 80, height: 24, keys: DefaultKeyMap(), now: time.Now, loc: time.Local,
			src: src, feats: src.Features(), ctx: context.Background(),
			query: Query{Measure: api.MeasureRU, Top: DefaultTop}},
		filter: field{limit: 64},
	}
	for _, o := range opts {
		o(m)
	}
	col, _ := columnOf(m.c.query.Measure)
	m.c.query.Measure = col.measure()
	tenants := newTenantsView(col)
	m.nav.register(true, tenants, &hotKeysView{}, &statementsView{}, &latencyView{}, &enforcementView{}, &locksView{},
		&freshnessView{}, &victimsView{sum: &m.summary}, &topSQLView{})
	m.nav.register(false, &detailView{})
	if m.renderer == nil {
		m.renderer = lipgloss.DefaultRenderer()
	}
	m.c.st = newStyles(m.renderer)
	m.c.help = newHelp(m.renderer, m.c.st)
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
	src, ctx, q := m.c.src, m.c.ctx, m.c.query
	return func() tea.Msg {
		s, err := src.Next(ctx, q)
		if errors.Is(err, ErrRecordingStopped) {
			return warnMsg{s, err}
		}
		if err != nil {
			return sourceErrMsg{err}
		}
		return snapshotMsg{s}
	}
}

// playback says whether src plays a recording (qtop replay), whose
// time stops while paused.
func playback(src Source) bool {
	_, ok := src.(*Replay)
	return ok
}

// Update handles one message: the root's own, a key (routed by state,
// then to the view shown), or a view's (offered to each view).
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.c.width, m.c.height = max(msg.Width, 20), max(msg.Height, 6)
		m.c.help.Width = m.c.width
		return m, nil
	case snapshotMsg:
		m.fetching = false
		m.err, m.failures, m.backoff = nil, 0, 0
		s := sanitize(msg.snap)
		if lf, ok := m.c.src.(liveFeatures); ok {
			m.c.feats = lf.FeaturesOf(&s)
		}
		var cmd, open tea.Cmd
		if m.paused {
			m.pending = &s
		} else {
			cmd = m.apply(&s)
		}
		if o, ok := m.nav.cur.(opener); ok {
			open = o.open(&m.c)
		}
		if m.paused && playback(m.c.src) {
			// A recording waits while paused: fetching on would play it
			// on unseen, and resuming would skip what played meanwhile.
			return m, open
		}
		return m, tea.Batch(m.fetch(), cmd, open)
	case warnMsg:
		_, cmd := m.Update(snapshotMsg{msg.snap})
		return m, tea.Batch(cmd, m.c.setStatus(msg.err.Error(), false))
	case sourceErrMsg:
		m.fetching = false
		m.err = msg.err
		m.failures++
		m.backoff = nextBackoff(m.backoff)
		if errors.Is(msg.err, ErrClosed) {
			return m, nil
		}
		return m, tea.Tick(m.backoff, func(time.Time) tea.Msg { return retryMsg{} })
	case retryMsg:
		return m, m.fetch()
	case actionMsg:
		if msg.err != nil {
			return m, m.c.setStatus(msg.err.Error(), false)
		}
		return m, m.c.setStatus(msg.text, true)
	case clearStatusMsg:
		if msg.id == m.c.status.id {
			m.c.status.text = ""
		}
		return m, nil
	case tea.KeyMsg:
		return m, m.key(msg)
	}
	for _, v := range m.nav.views {
		if cmd, ok := v.update(&m.c, msg); ok {
			return m, cmd
		}
	}
	return m, nil
}

// nextBackoff is the wait before the next reconnect after one of b.
func nextBackoff(b time.Duration) time.Duration { return min(max(b*2, minBackoff), maxBackoff) }

// apply shows snapshot s: every view takes it.
func (m *Model) apply(s *api.Snapshot) tea.Cmd {
	m.snap = s
	m.summary.add(s)
	var cmds []tea.Cmd
	for _, v := range m.nav.views {
		cmds = append(cmds, v.set(&m.c, s, v == m.nav.cur))
	}
	return tea.Batch(cmds...)
}

// page is the number of rows a view shows.
func (m *Model) page() int { return max(m.bodyHeight()-1, 1) }

// key handles a key: the prompt, filter or help overlay when they have the
// keyboard; else the root's keys, then the view shown's, then a hint for a
// key of another view.
func (m *Model) key(msg tea.KeyMsg) tea.Cmd {
	k := m.c.keys
	switch m.state {
	case stateHelp:
		if matches(msg, k.Quit) && msg.String() == "ctrl+c" {
			return tea.Quit
		}
		h := m.bodyHeight()
		if !helpTooSmall(&m.c) && m.help.key(k, msg, len(helpLines(&m.c, m.fullHelp(), h)), h) {
			return nil
		}
		m.state = stateBrowse
		return nil
	case stateFilter:
		return m.filterKey(msg)
	case statePrompt:
		return m.promptKey(msg)
	}
	if cmd, ok := m.rootKey(msg); ok {
		return cmd
	}
	m.c.page = m.page()
	if cmd, ok := m.nav.cur.update(&m.c, msg); ok {
		return cmd
	}
	if matches(msg, k.AutopilotCancel) { // after the view's own keys: only Enforcement's rows are actions
		return m.startAutopilotCancel()
	}
	if matches(msg, k.History) { // outside the drill-in: any tenant by name
		return m.startHistory()
	}
	for _, h := range []struct {
		keys []key.Binding
		text string
	}{
		{[]key.Binding{k.Select}, "space marks statements in the Statements view (3), for c and k"},
		{[]key.Binding{k.Sort, k.Reverse}, "s and S sort the Tenants view (1)"},
	} {
		if matches(msg, h.keys...) {
			return m.c.setStatus(h.text, false)
		}
	}
	return nil
}

// rootKey handles the keys that work in every view; ok is false for the
// others.
func (m *Model) rootKey(msg tea.KeyMsg) (cmd tea.Cmd, ok bool) {
	k := m.c.keys
	for _, v := range m.nav.views {
		if b := v.key(&k); b.Enabled() && matches(msg, b) {
			return m.nav.show(&m.c, v), true
		}
	}
	switch {
	case matches(msg, k.Quit):
		return tea.Quit, true
	case matches(msg, k.Help):
		m.state, m.help = stateHelp, helpScreen{}
	case matches(msg, k.NextView):
		return m.nav.step(&m.c, 1), true
	case matches(msg, k.PrevView):
		return m.nav.step(&m.c, -1), true
	case matches(msg, k.Pause):
		m.paused = !m.paused
		if !m.paused && m.pending != nil {
			cmd = m.apply(m.pending)
			m.pending = nil
		}
		if !m.paused && playback(m.c.src) {
			cmd = tea.Batch(cmd, m.fetch())
		}
	case matches(msg, k.GroupBy):
		return m.nextGroup(), true
	case matches(msg, k.Filter):
		return m.startFilter(), true
	case matches(msg, k.Enter):
		return m.drill(), true
	case matches(msg, k.Back):
		m.goBack()
	case matches(msg, k.Throttle):
		return m.startThrottle(), true
	case matches(msg, k.Cancel, k.Terminate):
		return m.startSignal(matches(msg, k.Terminate)), true
	case matches(msg, k.AutopilotPause):
		return m.startAutopilotPause(), true
	default:
		return nil, false
	}
	return cmd, true
}

// goBack leaves a page for its tab, or clears the filter of a tab.
func (m *Model) goBack() {
	switch f, ok := m.nav.cur.(filterable); {
	case !m.nav.isTab(m.nav.cur):
		m.nav.cur = m.nav.back
	case ok && f.filter() != "":
		f.setFilter("")
	}
}

func (m *Model) startFilter() tea.Cmd {
	f, ok := m.nav.cur.(filterable)
	if !ok {
		return m.c.setStatus("/ filters the Tenants, Hot keys and Statements views", false)
	}
	m.state = stateFilter
	m.filter.value = f.filter()
	return nil
}

// currentFilter is the filter of the view shown, or "".
func (m *Model) currentFilter() string {
	if f, ok := m.nav.cur.(filterable); ok {
		return f.filter()
	}
	return ""
}

func (m *Model) setFilter(s string) {
	if f, ok := m.nav.cur.(filterable); ok {
		f.setFilter(s)
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
	victim   bool // selected among the victims (view 8): t does not throttle it
}

// selectedRow returns the row the view shown points at, with its RU/s.
func (m *Model) selectedRow() (target, bool) {
	s, ok := m.nav.cur.(selector)
	if !ok {
		return target{}, false
	}
	t, ok := s.selection()
	if !ok || t.ru != 0 || m.snap == nil {
		return t, ok
	}
	for i := range m.snap.Tenants {
		if r := &m.snap.Tenants[i]; r.Tenant == t.key && r.Untagged == t.untagged {
			t.ru = r.RUPerSec
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

// drill opens the drill-in on the row selected in a tab.
func (m *Model) drill() tea.Cmd {
	if _, ok := m.nav.cur.(selector); !ok || !m.nav.isTab(m.nav.cur) {
		return nil
	}
	t, ok := m.selectedRow()
	switch {
	case !ok:
		return m.c.setStatus("no tenant selected", false)
	case t.key == api.OtherTenant && !t.untagged:
		return m.c.setStatus(`"other" sums the tenants beyond the top ones; it has no routes of its own`, false)
	}
	if d := m.nav.drillIn(); d != nil {
		m.nav.back, m.nav.cur = m.nav.cur, d
		d.drill(&m.c, t)
	}
	return nil
}

// nextGroup switches the grouping of the Tenants view.
func (m *Model) nextGroup() tea.Cmd {
	if !m.c.feats.Group {
		return m.c.setStatus("b groups the load by application, user, database, client or statement: run qtop --postgres DSN (a collector groups by tenant)", false)
	}
	q := &m.c.query
	i := max(groupIndex(q.GroupBy), 0)
	q.GroupBy = api.Groups[(i+1)%len(api.Groups)]
	for _, v := range m.nav.views {
		if g, ok := v.(grouper); ok {
			g.setGroup(q.GroupBy)
		}
	}
	return m.c.setStatus("grouping by "+q.GroupBy+" from the next sample (b again: "+api.Groups[(i+2)%len(api.Groups)]+")", true)
}
