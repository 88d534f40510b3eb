package tui

import (
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/policy"
)

// enforcementView is the Enforcement view: the active policy rules, and
// per tier the RU price multiplier and the admitted, throttled and shed
// counts of the window; the autopilot's part when it has rules. Its
// cursor runs over the autopilot's actions, then the policy's rules.
type enforcementView struct {
	enf   api.EnforcementRow
	bud   []api.BudgetRow // budgets.go
	pol   policy.Policy
	ap    *api.AutopilotStatus // autopilot.go
	list  list                 // the autopilot's actions, then the rules
	rules list                 // the rules' scroll
	stamp time.Time            // the snapshot's time, for "expires in"
	note  string               // api.AppliedBy.PolicyNote: no process applies the policy, or its budgets
	un    []api.Unapplied      // rules no process applies to their tenant's load
}

func (v *enforcementView) name() string              { return "Enforcement" }
func (v *enforcementView) shortName() string         { return "Enforce" }
func (v *enforcementView) key(k *KeyMap) key.Binding { return k.Enforcement }
func (v *enforcementView) title(*common) string      { return "" }

func (v *enforcementView) set(_ *common, s *api.Snapshot, _ bool) tea.Cmd {
	v.enf, v.pol, v.stamp = s.Enforcement, s.Policy, s.Time
	v.bud, v.ap, v.un = s.Budgets, s.Autopilot, s.Unapplied
	v.note = ""
	if s.AppliedBy != nil {
		v.note = s.AppliedBy.PolicyNote(s.Policy)
	}
	v.list.setLen(v.actions() + len(v.pol.Rules))
	return nil
}

// actions counts the autopilot's actions shown (they come first).
func (v *enforcementView) actions() int {
	if v.ap == nil {
		return 0
	}
	return len(v.ap.Active)
}

// selectedAction is the autopilot's action under the cursor, if any.
func (v *enforcementView) selectedAction() (api.AutopilotRow, bool) {
	if v.list.cursor >= v.actions() {
		return api.AutopilotRow{}, false
	}
	return v.ap.Active[v.list.cursor], true
}

// selectedRule is the policy rule selected, when the cursor is on one.
func (v *enforcementView) selectedRule() (policy.Rule, bool) {
	i := v.list.cursor - v.actions()
	if i < 0 || i >= len(v.pol.Rules) {
		return policy.Rule{}, false
	}
	return v.pol.Rules[i], true
}

// ruleTarget is a rule's tenant, or its tier.
func ruleTarget(r policy.Rule) string {
	if r.Tenant != "" {
		return r.Tenant
	}
	return "tier " + r.Tier.String()
}

func (v *enforcementView) update(c *common, msg tea.Msg) (tea.Cmd, bool) {
	return nil, navigate(c, &v.list, msg, c.page)
}

func (v *enforcementView) view(c *common, h int) string {
	var out strings.Builder
	out.WriteString(c.st.header.Render(clip(fit("TIER", 5, false)+" "+fit("PRICE ×", 8, true)+" "+fit("ADMITTED", 9, true)+" "+
		fit("THROTTLED", 9, true)+" "+fit("SHED", 8, true)+" "+fit("SHADOW THR", 10, true)+" "+fit("SHADOW SHED", 11, true), c.width)))
	for _, t := range v.enf.Tiers {
		if t.Tier == "" {
			continue
		}
		line := clip(fit(t.Tier, 5, false)+" "+fit(fmtNum(t.PriceMultiplier), 8, true)+" "+fit(fmtCount(t.Admitted), 9, true)+" "+
			fit(fmtCount(t.Throttled), 9, true)+" "+fit(fmtCount(t.Shed), 8, true)+" "+fit(fmtCount(t.ShadowThrottled), 10, true)+" "+
			fit(fmtCount(t.ShadowShed), 11, true), c.width)
		if t.PriceMultiplier > 1 || t.Shed > 0 {
			line = c.st.warn.Render(line)
		}
		out.WriteString("\n" + line)
	}
	bl := budgetLines(c, v.pol, v.bud)
	for _, l := range bl {
		out.WriteString("\n" + l)
	}
	na := v.actions()
	al := v.autopilotLines(c, h, len(bl))
	for _, l := range al {
		out.WriteString("\n" + l)
	}
	bl = append(bl, al...)
	rules := " active rules"
	if len(v.pol.Rules) == 1 {
		rules = " active rule"
	}
	out.WriteString("\n\n" + c.st.title.Render(clip("Policy v"+policy.VersionString(v.pol.Version)+" — "+fmtCount(uint64(len(v.pol.Rules)))+rules, c.width)))
	notes := v.notes(c, len(bl) > 0)
	for _, l := range notes {
		out.WriteString("\n" + l)
	}
	noteRows := len(notes)
	rw := max(c.width-(12+18+14+12+10+2*5+2), 8)
	out.WriteString("\n" + c.st.header.Render(clip("  "+fit("ID", 12, false)+" "+fit("TARGET", 18, false)+" "+fit("ACTION", 14, false)+" "+
		fit("LIMIT", 12, true)+" "+fit("EXPIRES", 10, true)+" "+fit("REASON", rw, false), c.width)))
	if len(v.pol.Rules) == 0 {
		out.WriteString("\n" + c.st.dim.Render(clip("no active rule (t on a tenant throttles it)", c.width)))
		return out.String()
	}
	v.rules.n, v.rules.cursor = len(v.pol.Rules), max(v.list.cursor-na, 0)
	from, to := v.rules.window(max(h-9-len(bl)-noteRows, 1))
	for i := from; i < to; i++ {
		sel := i+na == v.list.cursor
		r := &v.pol.Rules[i]
		target := r.Tenant
		if target == "" {
			target = "tier " + r.Tier.String()
		}
		action := string(r.Action)
		if r.Shadow {
			action += " (shadow)"
		}
		limit := ""
		switch r.Action {
		case policy.Throttle, policy.Quota:
			limit = fmtNum(r.RUPerSecond) + " RU/s"
		case policy.Price:
			limit = "×" + fmtNum(r.Multiplier)
		}
		exp := "-"
		if !v.stamp.IsZero() {
			exp = fmtDuration(r.Expires.Sub(v.stamp).Truncate(time.Second))
		}
		line := clip(gutter(fit(clean(r.ID), 12, false)+" "+fit(clean(target), 18, false)+" "+fit(action, 14, false)+" "+
			fit(limit, 12, true)+" "+fit(exp, 10, true)+" "+fit(clean(r.Reason), rw, false), sel), c.width)
		if sel {
			line = c.st.selected.Render(line)
		}
		out.WriteString("\n" + line)
	}
	return out.String()
}

// notes are the policy's warnings: nobody applies it (or its budgets),
// and the rules no process applies to their tenant's load (3 at most).
func (v *enforcementView) notes(c *common, budgets bool) []string {
	var out []string
	if v.note != "" && (len(v.pol.Rules) > 0 || budgets) {
		out = append(out, c.st.warn.Render(clip(v.note, c.width)))
	}
	for i, u := range v.un {
		if i == 3 {
			out = append(out, c.st.warn.Render(clip(strconv.Itoa(len(v.un)-i)+" more rules no process applies", c.width)))
			break
		}
		out = append(out, c.st.warn.Render(clip(clean(u.Note()), c.width)))
	}
	return out
}

// autopilotLines is the autopilot's part (nil without one), in the lines
// that the tiers, budget lines and rules leave in h.
func (v *enforcementView) autopilotLines(c *common, h, budget int) []string {
	if v.ap == nil {
		return nil
	}
	return autopilotBlock(c, v.ap, v.stamp, v.list.cursor, h-9-budget-len(v.pol.Rules))
}
