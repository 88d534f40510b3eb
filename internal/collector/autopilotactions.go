package collector

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/qtop-dev/qtop/autopilot"
	"github.com/qtop-dev/qtop/policy"
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
	p.saveActions(now)
}

// calmSettle is how long an action's calm (its victims recovered, or
// its offender quiet, with no decision since) lasts before the actions
// file is rewritten for it.
const calmSettle = 5 * time.Second

// saveActions writes what a restart needs (savedState) to the data dir
// when it changed in a way a restart would act on: an action started,
// changed or ended, a calm that lasted calmSettle (the hold before the
// next relax step runs from its start), a calm that ended. Victims that
// flap across the recover threshold start and end a calm every second
// or two: before, each rewrote the file. A restart within a calm's first
// seconds counts it from its own first step, so its relax step comes
// those seconds later, never sooner; one after a calm ended never relaxes
// on it. The figures an action last saw (Action.Last) change every
// second: they are written with such a change, and at shutdown
// (flushActions).
func (p *pilotPart) saveActions(now time.Time) { p.writeActions(now, false) }

// flushActions writes the actions as they are, their last figures and a
// calm just begun included, when the file does not hold them: at
// shutdown. It writes nothing before the saved actions were read back.
func (p *pilotPart) flushActions() { p.writeActions(time.Time{}, true) }

func (p *pilotPart) writeActions(now time.Time, flush bool) {
	s := p.save
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if flush && s.full == nil {
		return
	}
	sp := p.savedState()
	var key []byte
	if !flush {
		// What a restart acts on: the actions without their last
		// figures, a calm younger than calmSettle not begun.
		last := make([]*autopilot.Evidence, len(sp.Actions))
		for i, a := range sp.Actions {
			if a.Calm.After(a.Changed) && now.Sub(a.Calm) < calmSettle {
				sp.Actions[i].Calm = time.Time{}
			}
			last[i], sp.Actions[i].Last = a.Last, nil
		}
		key, _ = s.marshal(sp)
		if s.full != nil && bytes.Equal(key, s.key) {
			return
		}
		for i := range sp.Actions {
			sp.Actions[i].Last = last[i]
		}
	}
	b, _ := s.marshal(sp)
	if flush && bytes.Equal(b, s.full) {
		return
	}
	if err := s.put(b); err != nil {
		p.log.Warn(s.warn, append(slices.Clip(s.attrs), "err", err)...)
		return
	}
	s.full, s.key = b, key
}

// pilotSave writes the autopilot's saved state (savedPilot) where a
// restart reads it. Each second's save marshals once: what a restart
// acts on (the key), compared with the last written; the whole state
// (the actions' last figures with it) only when that changed.
type pilotSave struct {
	put   func([]byte) error
	warn  string // logged, with attrs, when put fails
	attrs []any
	// marshal is json.Marshal (a test counts the calls).
	marshal func(any) ([]byte, error)

	// mu orders the writes (the loop's and a cancel's), so that the last
	// written is the newest state; full is that state as written (nil:
	// none yet), key what of it a restart acts on (nil: written whole,
	// at a stop).
	mu        sync.Mutex
	full, key []byte
}

func newPilotSave(put func([]byte) error, warn string, attrs ...any) *pilotSave {
	return &pilotSave{put: put, warn: warn, attrs: attrs, marshal: json.Marshal}
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
