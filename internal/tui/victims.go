package tui

import (
	"cmp"
	"strconv"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/qtop-dev/qtop/api"
	incidents "github.com/qtop-dev/qtop/incident"
)

// victimsView is the Victims page (key 8), the drill-in of the headline:
// each victim by name with its p95 now and its baseline's, its share of
// load now and its baseline's, and the routes hurt; above them the
// offenders. It reads the root's summary, which takes each snapshot
// before the views do. t throttles the victim selected (selector).
type victimsView struct {
	sum  *summary
	list list
	pg   bool // the snapshot is PostgreSQL's alone (qtop --postgres, or its replay)
}

func (v *victimsView) name() string              { return "Victims" }
func (v *victimsView) key(k *KeyMap) key.Binding { return k.Victims }
func (v *victimsView) title(*common) string      { return "" }

func (v *victimsView) set(_ *common, s *api.Snapshot, _ bool) tea.Cmd {
	v.pg = s.Source == api.SourcePostgres
	v.list.setLen(len(v.sum.head.Victims))
	return nil
}

func (v *victimsView) update(c *common, msg tea.Msg) (tea.Cmd, bool) {
	return nil, navigate(c, &v.list, msg, c.page)
}

// selection is the victim selected.
func (v *victimsView) selection() (target, bool) {
	vs := v.sum.head.Victims
	if v.list.cursor >= len(vs) {
		return target{}, false
	}
	return target{key: vs[v.list.cursor].Tenant, victim: true}, true
}

func (v *victimsView) view(c *common, h int) string {
	hd := v.sum.head
	var out strings.Builder
	out.WriteString(c.st.title.Render(clip("Offenders: rows whose "+orDash(hd.Measure)+ruLess(hd.Measure)+" is ≥×"+fmtFactor(incidents.DriverFactor)+" their baseline and ≥"+
		strconv.Itoa(int(incidents.DriverShare*100))+"% of it", c.width)))
	lines := 1
	for i, o := range hd.Offenders {
		if i == 3 {
			break
		}
		f := "new load"
		if o.Factor > 0 {
			f = "×" + fmtFactor(o.Factor) + " its baseline"
		}
		out.WriteString("\n" + clip("  "+clean(o.Name)+" · "+fmtShare(o.Share)+" of "+cmp.Or(o.Measure, hd.Measure)+" · "+f, c.width))
		lines++
	}
	if len(hd.Offenders) == 0 {
		out.WriteString("\n" + c.st.dim.Render(clip("  none", c.width)))
		lines++
	}
	out.WriteString("\n\n" + c.st.title.Render(clip("Victims: p95 ≥×"+fmtFactor(incidents.VictimP95)+" its baseline while its share of load is ≤×"+
		strconv.FormatFloat(incidents.VictimLoad, 'g', -1, 64)+" its baseline's · worst first", c.width)))
	rw := max(c.width-(2+16+9+9+7+6+8+8+4), 8)
	out.WriteString("\n" + c.st.header.Render(clip("  "+fit("TENANT", 16, false)+" "+fit("P95", 9, true)+" "+fit("BASE P95", 9, true)+" "+
		fit("×", 7, true)+" "+fit("FOR", 6, true)+" "+fit("SHARE", 8, true)+" "+fit("BASE", 8, true)+" "+fit("ROUTES HURT (p95)", rw, false), c.width)))
	lines += 3
	if len(hd.Victims) == 0 {
		out.WriteString("\n" + wrapped(c.st.dim, v.none(c), c.width))
		return out.String()
	}
	from, to := v.list.window(max(h-lines-1, 1))
	for i := from; i < to; i++ {
		vc := hd.Victims[i]
		var rs []string
		for _, r := range vc.Routes {
			rs = append(rs, routeName(r.Route)+" "+fmtSeconds(r.P95Seconds))
		}
		line := clip(gutter(fitName(clean(vc.Tenant), 16)+" "+fit(fmtSeconds(vc.P95Seconds), 9, true)+" "+
			fit(fmtSeconds(vc.BaselineP95Seconds), 9, true)+" "+fit("×"+fmtFactor(vc.Factor()), 7, true)+" "+fit(v.sum.slowFor(vc), 6, true)+" "+
			fit(fmtShare(vc.Share), 8, true)+" "+fit(fmtShare(vc.BaselineShare), 8, true)+" "+fit(orDash(strings.Join(rs, ", ")), rw, false), i == v.list.cursor), c.width)
		if i == v.list.cursor {
			line = c.st.selected.Render(line)
		}
		out.WriteString("\n" + line)
	}
	out.WriteString("\n" + c.st.dim.Render(clip("baselines: "+v.from()+" · t throttles the selected · enter drills in", c.width)))
	return out.String()
}

// none says why there are no victims.
func (v *victimsView) none(c *common) string {
	switch {
	case v.pg: // not c.feats.Signal: a collector sampling PostgreSQL signals too, and has latency
		return "n/a: PostgreSQL alone knows no latency (victims need application reports)"
	case c.query.GroupBy != "" && c.query.GroupBy != api.GroupTenant:
		return "victims are tenants: group by tenant (b)"
	}
	return "none: no tenant's p95 is above its baseline"
}

// from says where the baselines come from.
func (v *victimsView) from() string {
	for _, vc := range v.sum.head.Victims {
		if vc.BaselineFrom == "collector" {
			return "the collector's"
		}
	}
	return "what this qtop saw: lower quartile of p95 and median share, 120 s to 30 s ago"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// ruLess is what the offenders' title says of the rows judged on DB load
// in a headline of RU (incident.Offender.Measure).
func ruLess(measure string) string {
	if measure == "RU" {
		return " (DB load, of rows with none)"
	}
	return ""
}
