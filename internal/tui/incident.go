package tui

import (
	"strconv"
	"time"

	"github.com/qtop-dev/qtop/api"
	incidents "github.com/qtop-dev/qtop/incident"
)

// The summary ("who is hurting whom") is one line under the tabs: the
// headline of package incident, which the autopilot reads too, so that
// qtop shows the same truth the autopilot acts on.

// Headline is who is hurting whom: the summary line under the tabs, and
// the "headline" of qtop --once --format json (incidents.Headline).
type (
	Headline  = incidents.Headline
	Offender  = incidents.Offender
	Victim    = incidents.Victim
	RouteHurt = incidents.RouteHurt
)

// summary follows the tenants across snapshots and keeps the headline.
type summary struct {
	t     incidents.Tracker
	line  string
	head  Headline
	alert bool      // drivers or victims were found
	at    time.Time // the snapshot's time
}

func (in *summary) add(s *api.Snapshot) {
	in.head, in.at = in.t.Add(s), s.Time
	in.line, in.alert = in.head.Line, in.head.Alert()
}

func fmtFactor(f float64) string {
	if f >= 10 {
		return strconv.FormatFloat(f, 'f', 0, 64)
	}
	return strconv.FormatFloat(f, 'f', 1, 64)
}

// slowFor says how long a victim has been slow, to the second (- when
// not known).
func (in *summary) slowFor(v Victim) string {
	if v.Since.IsZero() || in.at.Before(v.Since) {
		return "-"
	}
	d := in.at.Sub(v.Since)
	if d >= time.Hour {
		return d.Truncate(time.Minute).String()
	}
	return d.Truncate(time.Second).String()
}
