package policy

import (
	"strconv"
	"strings"
)

// Limits says the limits a budget sets, as briefly as they were written:
// "share 0.5/2s, stmt 5s, conc 4" (database seconds per second, banked up
// to CapacitySeconds; the cap on one statement's estimate; statements in
// flight). Every screen that shows a budget (qtop's Enforcement view,
// collector audit) says its limits so.
func (b Budget) Limits() string {
	var ls []string
	if b.Share > 0 {
		s := "share " + strconv.FormatFloat(b.Share, 'g', 3, 64)
		if b.CapacitySeconds > 0 {
			s += "/" + secondsText(b.CapacitySeconds)
		}
		ls = append(ls, s)
	}
	if b.MaxStatementSeconds > 0 {
		ls = append(ls, "stmt "+secondsText(b.MaxStatementSeconds))
	}
	if b.Concurrency > 0 {
		ls = append(ls, "conc "+strconv.Itoa(b.Concurrency))
	}
	return strings.Join(ls, ", ")
}

// Limits says when a runaway rule acts, and for how long it then watches
// the statement's shape: "after 30s, watch 1m". Every screen that shows
// a runaway rule (qtop's Enforcement view, collector audit) says it so.
func (r Runaway) Limits() string {
	s := "after " + secondsText(r.AfterSeconds)
	if r.CooldownSeconds > 0 {
		s += ", watch " + secondsText(r.CooldownSeconds)
	}
	return s
}

// secondsText formats a policy's seconds as briefly as they are written:
// 30s, 0.5s, 2m.
func secondsText(v float64) string {
	if v >= 60 && v == float64(int64(v)) && int64(v)%60 == 0 {
		return strconv.FormatInt(int64(v)/60, 10) + "m"
	}
	return strconv.FormatFloat(v, 'g', 4, 64) + "s"
}
