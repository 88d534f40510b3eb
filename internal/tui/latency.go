package tui

import (
	"math"
	"strconv"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/qtop-dev/qtop/api"
)

// latencyView is the Latency view: per service, the latency ratio (p95
// over the long window / p95 over the short one, ≈1 healthy) as a
// sparkline with its thresholds, the shedding level, and the p95 beside
// the collector's hour baseline (the two the latency alerts divide).
type latencyView struct {
	rows []api.ServiceRow
	list list
}

func (v *latencyView) name() string              { return "Latency" }
func (v *latencyView) key(k *KeyMap) key.Binding { return k.Latency }
func (v *latencyView) title(*common) string      { return "" }

func (v *latencyView) set(_ *common, s *api.Snapshot, _ bool) tea.Cmd {
	v.rows = s.Services
	v.list.setLen(len(v.rows))
	return nil
}

// update moves the cursor: a service takes three lines.
func (v *latencyView) update(c *common, msg tea.Msg) (tea.Cmd, bool) {
	return nil, navigate(c, &v.list, msg, c.page/3)
}

// shedName names a shed level: how many tiers, from T3 down, are shed.
func shedName(level int) string {
	switch {
	case level <= 0:
		return "none"
	case level == 1:
		return "T3"
	case level == 2:
		return "T2–T3"
	}
	return "T1–T3"
}

// unknownAsGap returns the ratio history with its unknown points (0) as
// gaps.
func unknownAsGap(h []float64) []float64 {
	out := make([]float64, len(h))
	for i, v := range h {
		if v <= 0 {
			v = math.NaN()
		}
		out[i] = v
	}
	return out
}

func fmtRatio(r float64) string {
	if r <= 0 {
		return "—"
	}
	return strconv.FormatFloat(r, 'f', 2, 64)
}

func (v *latencyView) view(c *common, h int) string {
	var out strings.Builder
	out.WriteString(c.st.header.Render(clip("  "+fit("SERVICE", 16, false)+" "+fit("RATIO", 6, true)+" "+fit("STATE", 9, false)+" "+
		fit("SHEDDING", 8, false)+" "+fit("REQ/s", 8, true)+" "+fit("P95", 8, true)+" "+fit("BASE", 8, true)+" "+fit("PROCS", 5, true), c.width)))
	if len(v.rows) == 0 {
		out.WriteString("\n" + c.st.dim.Render("no service reports yet (the latency ratio needs app processes reporting through ingest.Reporter)"))
		return out.String()
	}
	from, to := v.list.window(max((h-1)/3, 1))
	sw := max(c.width-28, 10)
	for i := from; i < to; i++ {
		r := &v.rows[i]
		state := "ok"
		if r.Degraded {
			state = "DEGRADED"
		}
		line := clip(gutter(fit(clean(r.Service), 16, false)+" "+fit(fmtRatio(r.Ratio), 6, true)+" "+fit(state, 9, false)+" "+
			fit(shedName(r.ShedLevel), 8, false)+" "+fit(fmtNum(r.ReqPerSec), 8, true)+" "+fit(fmtSeconds(r.P95Seconds), 8, true)+" "+
			fit(fmtSeconds(r.BaselineP95Seconds), 8, true)+" "+fit(strconv.Itoa(r.Processes), 5, true), i == v.list.cursor), c.width)
		switch {
		case i == v.list.cursor:
			line = c.st.selected.Render(line)
		case r.Degraded:
			line = c.st.bad.Render(line)
		}
		top := 1.2
		for _, x := range r.History {
			top = max(top, x)
		}
		spark := "    " + sparkline(unknownAsGap(r.History), sw, top)
		th := " degraded<" + fmtRatio(r.Enter) + " ok>" + fmtRatio(r.Exit)
		if r.Degraded || (r.Ratio > 0 && r.Ratio < r.Exit) {
			spark = c.st.bad.Render(spark)
		} else {
			spark = c.st.good.Render(spark)
		}
		out.WriteString("\n" + line + "\n" + spark + c.st.dim.Render(clip(th, max(c.width-sw-4, 0))) + "\n")
	}
	return strings.TrimRight(out.String(), "\n")
}
