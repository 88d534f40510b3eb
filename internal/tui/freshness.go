package tui

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/policy"
)

// FreshnessSource is a Source that also has the freshness view: the
// repeat share of GETs per route and the freshness rules' counters, and
// the freshness policy an operator changes from qtop.
type FreshnessSource interface {
	Freshness(ctx context.Context) (api.Freshness, error)
	SetFreshness(ctx context.Context, f policy.Freshness) error
}

// freshnessOf returns src's freshness view, if it (or the source a
// Recorder records) has one: the view works while recording.
func freshnessOf(src Source) (FreshnessSource, bool) { return through[FreshnessSource](src) }

// Freshness and SetFreshness pass through to a source that has them
// (freshnessOf asks first).
func (r *Recorder) Freshness(ctx context.Context) (api.Freshness, error) {
	if fs, ok := r.Source.(FreshnessSource); ok {
		return fs.Freshness(ctx)
	}
	return api.Freshness{}, ErrUnsupported
}

func (r *Recorder) SetFreshness(ctx context.Context, f policy.Freshness) error {
	if fs, ok := r.Source.(FreshnessSource); ok {
		return fs.SetFreshness(ctx, f)
	}
	return ErrUnsupported
}

// FreshnessHinter is a FreshnessSource that says why its freshness view
// may be empty and what to run to fill it (the demo, whose fleet samples
// no GET): the view shows the hint, its lines (a command each) wrapped
// to the width, while it has no route and no rule.
type FreshnessHinter interface {
	FreshnessHint() string
}

var _ FreshnessSource = (*Collector)(nil)

// Freshness returns the collector's freshness view.
func (c *Collector) Freshness(ctx context.Context) (api.Freshness, error) {
	return c.client(Query{}).GetFreshness(ctx)
}

// SetFreshness posts the freshness policy with the collector's token.
func (c *Collector) SetFreshness(ctx context.Context, f policy.Freshness) error {
	f.UpdatedBy = c.user
	if _, err := c.client(Query{}).PostFreshness(ctx, f, c.token); err != nil {
		return c.adminErr(err)
	}
	return nil
}

// ForceFor is how long "f" forces the armed batch on, overload or not.
const ForceFor = 15 * time.Minute

// The freshness view's own keys.
var (
	keyBatchUp   = []string{"+", "="}
	keyBatchDown = []string{"-", "_"}
	keyForce     = []string{"f"}
)

type freshnessMsg struct {
	v   api.Freshness
	err error
}

// freshnessView is the Freshness view (key 7): per route the share of
// sampled GETs that repeated the caller's previous answer within 24 h,
// and per rule the GETs it matched and cut, the 304s served and the
// shadow precision; + and - arm or disarm the next batch of rules, f
// forces the armed batch on for ForceFor.
type freshnessView struct {
	v    api.Freshness
	have bool
	err  error
	rows []api.FreshnessRule // the rules' rows, in policy order
	list list
}

// load shows v: the rules with counters and those of the policy without,
// in the policy's order.
func (fv *freshnessView) load(v api.Freshness) {
	fv.v, fv.have = v, true
	rows := slices.Clone(v.Rules)
	if p := v.Policy; p != nil {
		order := map[string]int{}
		for i, r := range p.Rules {
			order[r.ID] = i
			if !slices.ContainsFunc(rows, func(x api.FreshnessRule) bool { return x.Rule == r.ID }) {
				rows = append(rows, api.FreshnessRule{Rule: r.ID, Route: "-", Precision: -1})
			}
		}
		slices.SortStableFunc(rows, func(a, b api.FreshnessRule) int { return rank(order, a.Rule) - rank(order, b.Rule) })
	}
	fv.rows = rows
	fv.list.setLen(len(rows))
}

func (fv *freshnessView) name() string              { return "Freshness" }
func (fv *freshnessView) shortName() string         { return "Fresh" }
func (fv *freshnessView) key(k *KeyMap) key.Binding { return k.Freshness }
func (fv *freshnessView) title(*common) string      { return "" }

// open asks for the view's data (opener).
func (fv *freshnessView) open(c *common) tea.Cmd { return fv.fetch(c) }

// set does nothing: the view's data is not in the snapshot.
func (fv *freshnessView) set(*common, *api.Snapshot, bool) tea.Cmd { return nil }

// fetch asks the source for the freshness view, when it has one.
func (fv *freshnessView) fetch(c *common) tea.Cmd {
	fs, ok := freshnessOf(c.src)
	if !ok {
		return nil
	}
	ctx := c.ctx
	return func() tea.Msg {
		v, err := fs.Freshness(ctx)
		return freshnessMsg{v, err}
	}
}

// update takes the fetched view, handles +, - and f, and moves the
// cursor.
func (fv *freshnessView) update(c *common, msg tea.Msg) (tea.Cmd, bool) {
	switch msg := msg.(type) {
	case freshnessMsg:
		fv.err = msg.err
		if msg.err == nil {
			fv.load(msg.v)
		}
		return nil, true
	case tea.KeyMsg:
		if cmd, ok := fv.policyKey(c, msg); ok {
			return cmd, true
		}
	}
	return nil, navigate(c, &fv.list, msg, c.page)
}

// policyKey handles +, - and f: it posts the changed freshness policy.
func (fv *freshnessView) policyKey(c *common, msg tea.KeyMsg) (tea.Cmd, bool) {
	k := msg.String()
	up, down, force := slices.Contains(keyBatchUp, k), slices.Contains(keyBatchDown, k), slices.Contains(keyForce, k)
	if !up && !down && !force {
		return nil, false
	}
	fs, ok := freshnessOf(c.src)
	if !ok {
		return c.setStatus("this source has no freshness policy (connect qtop to a collector)", false), true
	}
	if !fv.have || fv.v.Policy == nil || len(fv.v.Policy.Rules) == 0 {
		return c.setStatus("no freshness rules in the collector's policy (POST /v1/policy/freshness, see the README)", false), true
	}
	f := *fv.v.Policy
	f.Rules = slices.Clone(f.Rules)
	var text string
	switch {
	case up:
		if f.Batch >= len(f.Rules) {
			return c.setStatus("every freshness rule is armed already", false), true
		}
		f.Batch++
		text = fmt.Sprintf("armed the first %d freshness rules (up to %s)", f.Batch, f.Rules[f.Batch-1].ID)
	case down:
		if f.Batch == 0 {
			return c.setStatus("no freshness rule is armed", false), true
		}
		f.Batch--
		text = fmt.Sprintf("armed the first %d freshness rules", f.Batch)
	case force:
		now := c.now()
		if f.Forced(now) {
			f.Force, f.ForceUntil = false, time.Time{}
			text = "freshness batch back to overload only"
		} else {
			if f.Batch == 0 {
				return c.setStatus("arm a batch first (+)", false), true
			}
			f.Force, f.ForceUntil = true, now.Add(ForceFor).UTC()
			text = fmt.Sprintf("freshness batch of %d forced on for %v", f.Batch, ForceFor)
		}
	}
	f.Reason = "qtop: " + text
	shown := fv.v
	shown.Policy = &f
	fv.load(shown)
	ctx := c.ctx
	return func() tea.Msg {
		if err := fs.SetFreshness(ctx, f); err != nil {
			return actionMsg{err: err}
		}
		return actionMsg{text: text}
	}, true
}

func (v *freshnessView) view(c *common, h int) string {
	_, supported := freshnessOf(c.src)
	var out strings.Builder
	switch {
	case !supported:
		return wrapped(c.st.dim, "this source has no freshness view: it is the collector's, from the services that sample GETs "+
			"(freshness.WithSampling); run qtop --collector URL, or qtop demo", c.width)
	case v.err != nil && !v.have:
		return wrapped(c.st.bad, "freshness: "+clean(v.err.Error()), c.width)
	case !v.have:
		return c.st.dim.Render(clip("asking the collector for its freshness view …", c.width))
	}
	out.WriteString(c.st.title.Render(clip("GETs that repeated the caller's previous answer within 24 h (sampled callers)", c.width)))
	nr := v.routes(c, &out, h)
	p := v.v.Policy
	state := "no freshness policy"
	armed := map[string]int{}
	if p != nil {
		state = fmt.Sprintf("batch %d of %d armed, applied under overload", p.Batch, len(p.Rules))
		if p.Forced(c.now()) {
			state = fmt.Sprintf("batch %d of %d FORCED on until %s", p.Batch, len(p.Rules), p.ForceUntil.In(c.loc).Format("15:04:05"))
		}
		for i, r := range p.Rules {
			armed[r.ID] = i
		}
	}
	out.WriteString("\n\n" + c.st.title.Render(clip("Freshness rules, last 10 min — "+state+" · + arm next · - disarm · f force 15 min", c.width)))
	out.WriteString("\n" + c.st.header.Render(clip("  "+fit("RULE", 14, false)+" "+fit("MODE", 8, false)+" "+fit("ROUTE", 22, false)+" "+
		fit("MATCHED", 8, true)+" "+fit("CUT", 6, true)+" "+fit("304s", 8, true)+" "+fit("RIGHT", 7, true)+" "+fit("WRONG", 7, true)+" "+
		fit("PRECISION", 9, true), c.width)))
	rows := v.rows
	from, to := v.list.window(max(h-nr-6, 1))
	for i := from; i < to; i++ {
		r := rows[i]
		mode := "off"
		if idx, ok := armed[r.Rule]; ok && p != nil && idx < p.Batch {
			mode = "armed"
			if p.Rules[idx].Shadow {
				mode = "shadow"
			}
		}
		prec := "-"
		if r.Precision >= 0 {
			prec = fmtShare(r.Precision)
			if r.Precision == 0 {
				prec = "0.0%"
			}
		}
		line := clip(gutter(fit(clean(r.Rule), 14, false)+" "+fit(mode, 8, false)+" "+fit(clean(r.Route), 22, false)+" "+
			fit(fmtCount(r.Matched), 8, true)+" "+fit(fmtShare(r.Cut), 6, true)+" "+fit(fmtCount(r.Served), 8, true)+" "+
			fit(fmtCount(r.Right), 7, true)+" "+fit(fmtCount(r.Wrong), 7, true)+" "+fit(prec, 9, true), i == v.list.cursor), c.width)
		switch {
		case i == v.list.cursor:
			line = c.st.selected.Render(line)
		case r.Precision >= 0 && r.Precision < 0.8:
			line = c.st.bad.Render(line)
		}
		out.WriteString("\n" + line)
	}
	if v.err != nil {
		out.WriteString("\n" + c.st.bad.Render(clip("last refresh failed: "+clean(v.err.Error()), c.width)))
	}
	return out.String()
}

// routes writes the routes' table to out (what fits in a body of h
// lines), or says why there is none; it returns the rows written.
func (v *freshnessView) routes(c *common, out *strings.Builder, h int) int {
	routes := v.v.Routes
	nr := min(len(routes), max((h-8)/2, 1))
	rw := max(c.width-(12+8+12+12+4), 8)
	switch {
	case len(routes) == 0 && len(v.rows) == 0:
		out.WriteString("\n" + wrapped(c.st.dim, emptyFreshness(c.src), c.width))
		return 0
	case len(routes) == 0:
		out.WriteString("\n" + wrapped(c.st.dim, "no GET sampled yet (freshness.WithSampling in the services)", c.width))
		return 0
	}
	out.WriteString("\n" + c.st.header.Render(clip("  "+fit("ROUTE", rw, false)+" "+fit("SAMPLED", 12, true)+" "+fit("REPEAT", 8, true)+" "+
		fit("GETs 10m", 12, true)+" "+fit("REVALID.", 12, true), c.width)))
	for _, r := range routes[:nr] {
		line := clip("  "+fit(clean(r.Route), rw, false)+" "+fit(fmtCount(r.Samples), 12, true)+" "+fit(fmtShare(r.RepeatShare), 8, true)+" "+
			fit(fmtCount(r.Requests), 12, true)+" "+fit(fmtCount(r.Revalidated), 12, true), c.width)
		if r.RepeatShare >= 0.5 {
			line = c.st.warn.Render(line)
		}
		out.WriteString("\n" + line)
	}
	return nr
}

// emptyFreshness says why a freshness view has no route and no rule, and
// what to run to fill it: lines to wrap.
func emptyFreshness(src Source) string {
	if r, ok := src.(*Recorder); ok {
		src = r.Source
	}
	if h, ok := src.(FreshnessHinter); ok {
		if s := h.FreshnessHint(); s != "" {
			ls := strings.Split(s, "\n")
			for i, l := range ls {
				ls[i] = clean(l)
			}
			return strings.Join(ls, "\n")
		}
	}
	return "no GET sampled yet: the services report them to the collector with freshness.WithSampling " +
		"(go run ./examples/balance --collector URL --sampling 10 is one)"
}

// rank orders rules by their place in the policy, unknown ones last.
func rank(order map[string]int, id string) int {
	if i, ok := order[id]; ok {
		return i
	}
	return len(order)
}
