package collector

import (
	"time"

	"github.com/qtop-dev/qtop/incident"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/tenant"
)

// An incident under way across a restart keeps its time: the book saves
// since when each offender its detector named was flagged, and a
// restarted book that flags the same offender again within keptSince of
// its first judged second serves the saved time (api.TenantRow.
// FlaggedSince), and stops learning for the hour from it, as the book
// that did not restart would have. The file is saved at each minute's
// turn, so an offender flagged in the minute before the restart is
// flagged anew.

// keptSince is how long after a restart a saved flag's time may be taken
// back: the detector flags again once the window has filled and its
// recent seconds are seen.
const keptSince = 2 * time.Minute

// savedFlags are the flags read back at start.
type savedFlags struct {
	since map[string]time.Time
	until time.Time // zero until the first judged second
}

// encodeFlags returns the offenders' flag times, as saved. b.mu is held.
func (b *baselineBook) encodeFlags() map[string]int64 {
	if len(b.flagged) == 0 {
		return nil
	}
	out := make(map[string]int64, len(b.flagged))
	for _, f := range b.flagged {
		if t, ok := out[f.name]; !ok || f.since.Unix() < t {
			out[f.name] = f.since.Unix()
		}
	}
	return out
}

// loadFlags keeps the saved flag times. b.mu is held.
func (b *baselineBook) loadFlags(saved map[string]int64) {
	if len(saved) == 0 {
		return
	}
	b.saved = &savedFlags{since: make(map[string]time.Time, len(saved))}
	for name, at := range saved {
		if at > 0 && tenant.ValidateString("tenant", name, report.MaxStringLen) == nil && len(b.saved.since) < maxBaselineTenants {
			b.saved.since[name] = time.Unix(at, 0).UTC()
		}
	}
}

// restoreSince gives the offenders flagged again after a restart the
// time they were first flagged, and forgets the saved times keptSince
// after the first judged second. b.mu is held.
func (b *baselineBook) restoreSince(now time.Time) {
	sv := b.saved
	if sv == nil {
		return
	}
	if sv.until.IsZero() {
		sv.until = now.Add(keptSince)
	}
	for i := range b.flagged {
		f := &b.flagged[i]
		if t, ok := sv.since[f.name]; ok && t.Before(f.since) && f.since.Sub(t) < incident.MaxFlag {
			f.since = t
		}
	}
	if !now.Before(sv.until) {
		b.saved = nil
	}
}
