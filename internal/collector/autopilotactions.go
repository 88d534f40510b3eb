package collector

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"slices"
	"time"

	"github.com/qtop-dev/qtop/autopilot"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/store"
)

// actionsFile keeps, in the data dir, the active actions of a collector
// alone (one of a fleet keeps them beside the lock), so that after a
// restart it follows them to their end: without it their rules stayed in
// the policy unfollowed, their end was never audited, and a second rule
// could be added for the same tenant.
const actionsFile = "autopilot-actions.json"

// restoreActions adopts the actions saved before a restart. One whose
// time ended, or whose policy part was removed, while the collector was
// stopped ends now with a lift, written and audited.
func (p *pilotPart) restoreActions(ctx context.Context, now time.Time) {
	b, err := os.ReadFile(p.actions)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	var acts []autopilot.Action
	if err == nil {
		err = json.Unmarshal(b, &acts)
	}
	if err != nil {
		p.log.Warn("autopilot: the actions saved before the restart were not read; their rules expire by themselves", "file", p.actions, "err", err)
		return
	}
	n := p.eng.Restore(acts)
	for _, a := range p.eng.Active() {
		var why string
		switch {
		case !now.Before(a.Expires):
			why = "its time ended while the collector was stopped"
		case !p.partInPolicy(a.ID, a.Action == policy.AutopilotBudget):
			why = "its policy part was removed while the collector was stopped"
		default:
			continue
		}
		if d, err := p.eng.Lift(a.ID, why, now); err == nil {
			p.write(ctx, now, d)
			n--
		}
	}
	if n > 0 {
		p.log.Info("autopilot: follows the actions it had before the restart", "actions", n)
	}
	p.saveActions()
}

// saveActions writes the engine's active actions to the data dir when
// they changed since the last write: after each step, as an action's
// timing changes without a decision too (victims recover, and the hold
// before its next relax step runs from then), and a restart must take it
// up where it was.
func (p *pilotPart) saveActions() {
	if p.actions == "" {
		return
	}
	p.saveMu.Lock()
	defer p.saveMu.Unlock()
	b, _ := json.Marshal(p.eng.Active())
	if p.savedActions != nil && bytes.Equal(b, p.savedActions) {
		return
	}
	if err := store.WriteFileAtomic(p.actions, b); err != nil {
		p.log.Warn("autopilot: the active actions were not saved; after a restart their rules expire by themselves", "file", p.actions, "err", err)
		return
	}
	p.savedActions = b
}

// partInPolicy reports whether the policy rule (or budget) id is in the
// policy.
func (p *pilotPart) partInPolicy(id string, budget bool) bool {
	in := false
	p.pol.read(func(pol *policy.Policy) {
		if budget {
			in = slices.ContainsFunc(pol.Budgets, func(b policy.Budget) bool { return b.ID == id })
		} else {
			in = slices.ContainsFunc(pol.Rules, func(r policy.Rule) bool { return r.ID == id })
		}
	})
	return in
}
