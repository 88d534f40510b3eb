package tui

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/qtop-dev/qtop/api"
)

// locksView is the Locks view: the blocking chains of the snapshot as
// trees, root blockers first and highlighted, then the sessions holding
// the xmin horizon back.
type locksView struct {
	at     time.Time
	roots  []int32
	kids   map[int32][]int32
	node   map[int32]api.StatementRow
	xmin   []api.StatementRow
	scroll int
	// order is the pids of the tree's lines, top to bottom; cursor is the
	// selected one (c and k act on it), kept by pid across snapshots.
	order  []int32
	cursor int
	sel    int32
}

// selected returns the session under the cursor, or nil.
func (v *locksView) selected() *api.StatementRow {
	if v.cursor < 0 || v.cursor >= len(v.order) {
		return nil
	}
	r, ok := v.node[v.order[v.cursor]]
	if !ok {
		return nil
	}
	return &r
}

// walkOrder lists the pids in the order the tree draws them.
func (v *locksView) walkOrder() {
	v.order = v.order[:0]
	seen := map[int32]bool{}
	var walk func(pid int32, depth int)
	walk = func(pid int32, depth int) {
		v.order = append(v.order, pid)
		if seen[pid] || depth > maxLockDepth {
			return
		}
		seen[pid] = true
		for _, k := range v.kids[pid] {
			walk(k, depth+1)
		}
	}
	for _, r := range v.roots {
		walk(r, 0)
	}
	v.cursor = 0
	for i, pid := range v.order {
		if pid == v.sel {
			v.cursor = i
			break
		}
	}
}

// maxLockDepth bounds how deep a chain is drawn.
const maxLockDepth = 16

func (v *locksView) name() string              { return "Locks" }
func (v *locksView) key(k *KeyMap) key.Binding { return k.Locks }
func (v *locksView) title(*common) string      { return "" }

// targets is the session under the cursor (signaler).
func (v *locksView) targets() []api.StatementRow {
	if r := v.selected(); r != nil {
		return []api.StatementRow{*r}
	}
	return nil
}

func (v *locksView) sent() {}

func (v *locksView) set(_ *common, s *api.Snapshot, _ bool) tea.Cmd {
	v.build(s)
	return nil
}

// build makes the trees of the snapshot's blocking chains.
func (v *locksView) build(s *api.Snapshot) {
	v.at, v.xmin = s.Time, s.XminHolders
	v.kids, v.node, v.roots = map[int32][]int32{}, map[int32]api.StatementRow{}, v.roots[:0]
	blocked := map[int32]bool{}
	for _, p := range s.Blocked {
		if _, ok := v.node[p.Blocking.PID]; !ok || v.node[p.Blocking.PID].State == "" {
			v.node[p.Blocking.PID] = p.Blocking
		}
		v.node[p.Blocked.PID] = p.Blocked
		if !slices.Contains(v.kids[p.Blocking.PID], p.Blocked.PID) {
			v.kids[p.Blocking.PID] = append(v.kids[p.Blocking.PID], p.Blocked.PID)
		}
		blocked[p.Blocked.PID] = true
	}
	for pid := range v.kids {
		if !blocked[pid] {
			v.roots = append(v.roots, pid)
		}
	}
	// A cycle (a deadlock the server has not broken yet) has no root:
	// start from its lowest pid.
	if len(v.roots) == 0 && len(v.kids) > 0 {
		for pid := range v.kids {
			if len(v.roots) == 0 || pid < v.roots[0] {
				v.roots = []int32{pid}
			}
		}
	}
	for _, ks := range v.kids {
		slices.Sort(ks)
	}
	// The root blocking the most sessions first.
	size := map[int32]int{}
	for _, r := range v.roots {
		size[r] = v.count(r, map[int32]bool{})
	}
	slices.SortFunc(v.roots, func(a, b int32) int {
		if c := cmp.Compare(size[b], size[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	v.walkOrder()
}

func (v *locksView) count(pid int32, seen map[int32]bool) int {
	if seen[pid] {
		return 0
	}
	seen[pid] = true
	n := 0
	for _, k := range v.kids[pid] {
		n += 1 + v.count(k, seen)
	}
	return n
}

// update moves the cursor over the trees' sessions, or scrolls.
func (v *locksView) update(c *common, tm tea.Msg) (tea.Cmd, bool) {
	msg, ok := tm.(tea.KeyMsg)
	page := c.page
	switch {
	case !ok:
		return nil, false
	case matches(msg, c.keys.Up) && len(v.order) > 0:
		v.cursor = max(v.cursor-1, 0)
		v.sel = v.order[v.cursor]
	case matches(msg, c.keys.Down) && len(v.order) > 0:
		v.cursor = min(v.cursor+1, len(v.order)-1)
		v.sel = v.order[v.cursor]
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
		return nil, false
	}
	return nil, true
}

// age is how long a session has held what it holds: its transaction
// (on every row, the root blocker's included: its locks are held until
// the transaction ends) and, while active, its statement.
func (v *locksView) age(r *api.StatementRow) string {
	var parts []string
	if !r.XactStart.IsZero() && !v.at.IsZero() {
		parts = append(parts, "xact "+fmtDuration(v.at.Sub(r.XactStart)))
	}
	if r.Duration > 0 && !strings.HasPrefix(r.State, "idle") {
		parts = append(parts, "stmt "+fmtDuration(r.Duration))
	}
	return strings.Join(parts, " ")
}

// lockText is what a session waits for: the lock's mode and relation
// when the sampler read them, else the wait event.
func lockText(r *api.StatementRow) string {
	if r.LockWait != "" {
		return r.LockWait
	}
	return waitText(r)
}

func (v *locksView) nodeLine(c *common, prefix string, r *api.StatementRow) string {
	tn := r.Tenant
	if tn == "" {
		tn = "(untagged)"
	}
	state := r.State
	if state == "" {
		state = "(not sampled)"
	}
	head := prefix + strconv.Itoa(int(r.PID)) + " " + clean(tn)
	if r.Database != "" {
		head += "@" + clean(r.Database)
	}
	rest := fit(clean(state), 20, false) + " " + fit(v.age(r), 22, false) + " " + fit(clean(lockText(r)), 30, false) + " " + clean(r.Query)
	return clip(fit(head, 34, false)+" "+rest, c.width)
}

func (v *locksView) view(c *common, h int) string {
	var lines []string
	add := func(s ...string) { lines = append(lines, s...) }
	add(c.st.title.Render("Lock tree") + c.st.dim.Render(clip(" · who waits for whom; the root blocker (it waits for no lock) is what to act on", max(c.width-9, 0))))
	if len(v.roots) == 0 {
		add(c.st.dim.Render("no session waits for a lock"))
	}
	seen := map[int32]bool{}
	idx, cursorLine := 0, -1
	var walk func(pid int32, prefix, childPrefix string, depth int)
	walk = func(pid int32, prefix, childPrefix string, depth int) {
		r := v.node[pid]
		mark := "  "
		if idx == v.cursor {
			mark, cursorLine = "› ", len(lines)
		}
		idx++
		if seen[pid] || depth > maxLockDepth {
			add(c.st.dim.Render(clip(mark+prefix+strconv.Itoa(int(pid))+" … (already shown)", c.width)))
			return
		}
		seen[pid] = true
		line := v.nodeLine(c, mark+prefix, &r)
		if depth == 0 {
			tag := "  ◀ ROOT BLOCKER: " + strconv.Itoa(v.count(pid, map[int32]bool{})) + " waiting"
			tw := len([]rune(tag))
			line = c.st.bad.Render(fit(clip(line, max(c.width-tw, 10)), max(c.width-tw, 10), false) + clip(tag, max(c.width-10, 0)))
		}
		add(line)
		ks := v.kids[pid]
		for i, k := range ks {
			if i == len(ks)-1 {
				walk(k, childPrefix+"└─ ", childPrefix+"   ", depth+1)
			} else {
				walk(k, childPrefix+"├─ ", childPrefix+"│  ", depth+1)
			}
		}
	}
	for _, r := range v.roots {
		walk(r, "", "", 0)
	}
	add("", c.st.title.Render("xmin horizon")+c.st.dim.Render(clip(" · the oldest snapshots held: VACUUM cannot remove rows that died after them", max(c.width-12, 0))))
	if len(v.xmin) == 0 {
		add(c.st.dim.Render("no session holds a snapshot"))
	} else {
		add(c.st.header.Render(clip("  "+fit("PID", 8, true)+" "+fit("TENANT", 16, false)+" "+fit("APP", 12, false)+" "+fit("STATE", 20, false)+" "+
			fit("XMIN AGE", 10, true)+" "+fit("HELD", 12, true)+" QUERY", c.width)))
		for i := range v.xmin {
			r := &v.xmin[i]
			tn := r.Tenant
			if tn == "" {
				tn = "(untagged)"
			}
			held := ""
			if !r.XactStart.IsZero() && !v.at.IsZero() {
				held = fmtDuration(v.at.Sub(r.XactStart))
			}
			s := clip("  "+fit(strconv.Itoa(int(r.PID)), 8, true)+" "+fit(clean(tn), 16, false)+" "+fit(clean(r.Application), 12, false)+" "+
				fit(clean(r.State), 20, false)+" "+fit(fmtCount(uint64(r.XminAge))+" xids", 10, true)+" "+fit(held, 12, true)+" "+clean(r.Query), c.width)
			if strings.HasPrefix(r.State, "idle in transaction") {
				s = c.st.warn.Render(s)
			}
			add(s)
		}
	}
	if cursorLine >= 0 { // keep the selected session in sight
		v.scroll = min(v.scroll, cursorLine-1)
		v.scroll = max(v.scroll, cursorLine-h+1, 0)
	}
	v.scroll = min(v.scroll, max(len(lines)-h, 0))
	lines = lines[v.scroll:]
	if len(lines) > h {
		lines = lines[:h]
	}
	return strings.Join(lines, "\n")
}
