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

// savedPilot is what the actions file, and the key beside the fleet's
// lock, hold: the active actions, and when the last action started, so
// that one that ended before a restart still spaces the next new one
// (autopilot.Engine.LastStart). Those written before the start was kept
// hold the actions alone, as a JSON array, and still load.
type savedPilot struct {
	Actions   []autopilot.Action `json:"actions"`
	LastStart time.Time          `json:"last_start,omitzero"`
}

// UnmarshalJSON reads a savedPilot, or the array of actions saved before.
func (sp *savedPilot) UnmarshalJSON(b []byte) error {
	if b = bytes.TrimSpace(b); len(b) > 0 && b[0] == '[' {
		*sp = savedPilot{}
		return json.Unmarshal(b, &sp.Actions)
	}
	type plain savedPilot
	return json.Unmarshal(b, (*plain)(sp))
}

// savedState is what the engine keeps across a restart.
func (p *pilotPart) savedState() savedPilot {
	return savedPilot{Actions: p.eng.Active(), LastStart: p.eng.LastStart()}
}

// adopt gives the engine what another engine saved (this collector's
// before a restart, or the fleet's last holder of the lock) and returns
// how many actions it took.
func (p *pilotPart) adopt(sp savedPilot) int {
	p.eng.SpaceFrom(sp.LastStart)
	return p.eng.Restore(sp.Actions)
}

// restoreActions adopts the actions saved before a restart. One whose
// time ended, or whose policy part was removed, while the collector was
// stopped ends now with a lift, written and audited.
func (p *pilotPart) restoreActions(ctx context.Context, now time.Time) {
	b, err := os.ReadFile(p.actions)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	var sp savedPilot
	if err == nil {
		err = json.Unmarshal(b, &sp)
	}
	if err != nil {
		p.log.Warn("autopilot: the actions saved before the restart were not read; their rules expire by themselves", "file", p.actions, "err", err)
		return
	}
	n := p.adopt(sp)
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
	b, _ := json.Marshal(p.savedState())
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
