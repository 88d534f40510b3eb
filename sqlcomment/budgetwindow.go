package sqlcomment

import (
	"sync"

	budgetsec "github.com/qtop-dev/qtop/budget"
	"github.com/qtop-dev/qtop/report"
)

// WindowSource returns a function for meter.WithSectionSource that
// reports what b's budgets and runaway rules did since its previous call,
// as a budgetsec.Window: their counters, and the runaway actions (at most
// budgetsec.MaxActions, the most recent). It returns nil when nothing
// happened, except at its first call and after WindowHeartbeat quiet calls
// in a row: then an empty window, by which the collector knows that the
// process applies database budgets (api.AppliedBy.Budgets).
func (b *Budgets) WindowSource() func() report.Section {
	var mu sync.Mutex
	last := map[string]budgetsec.Counter{}
	var seq uint64
	sent, quiet := false, 0
	return func() report.Section {
		bs, rs := b.Stats()
		mu.Lock()
		defer mu.Unlock()
		var evs []BudgetEvent
		evs, seq = b.RunawayEventsSince(seq)
		if len(evs) > budgetsec.MaxActions {
			evs = evs[len(evs)-budgetsec.MaxActions:]
		}
		var w budgetsec.Window
		for _, e := range evs {
			w.Actions = append(w.Actions, budgetsec.Action{Time: e.Time, Rule: e.Budget, Outcome: e.Handled, Duration: e.Duration, Shape: e.Shape})
		}
		next := make(map[string]budgetsec.Counter, len(bs)+len(rs))
		for _, s := range bs {
			c := budgetsec.Counter{ID: s.ID, Enforce: s.Enforce, Admitted: s.Admitted}
			for l := range s.Refused {
				c.Refused += s.Refused[l]
				c.Warned += s.Warned[l]
				c.InTx += s.InTx[l]
			}
			next["b"+s.ID] = c
			if d := c.Since(last["b"+s.ID]); d != (budgetsec.Counter{ID: s.ID, Enforce: s.Enforce}) {
				w.Counters = append(w.Counters, d)
			}
		}
		for _, s := range rs {
			c := budgetsec.Counter{ID: s.ID, Runaway: true, Cancelled: s.Cancelled, Reported: s.Reported, WatchRefused: s.Refused}
			next["r"+s.ID] = c
			if d := c.Since(last["r"+s.ID]); d != (budgetsec.Counter{ID: s.ID, Runaway: true}) {
				w.Counters = append(w.Counters, d)
			}
		}
		last = next
		if len(w.Counters) > budgetsec.MaxCounters {
			w.Counters = w.Counters[:budgetsec.MaxCounters]
		}
		if w.Empty() && sent && quiet < WindowHeartbeat-1 {
			quiet++
			return nil
		}
		sent, quiet = true, 0
		return w
	}
}

// WindowHeartbeat is how many calls of a WindowSource with nothing to say
// pass before it sends an empty window, so that the collector, which
// counts a process as applying budgets for two minutes after its last
// window, keeps counting a quiet one (30 s at the reporter's default
// interval).
const WindowHeartbeat = 30
