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

	"github.com/qtop-dev/qtop/api"
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
// lock, hold: the active actions; when the last action started, so
// that one that ended before a restart still spaces the next new one
// (autopilot.Engine.LastStart); the tenants a cancel spares, and until
// when (autopilot.Engine.Spared), so that neither a restart nor the
// collector that takes the fleet's lock over acts on them again at once;
// and the recent decisions, oldest first (at most api.MaxAutopilotRecent),
// so that GET /v1/autopilot still says after a restart, or a takeover,
// why its actions are there. Those written before the start was kept
// hold the actions alone, as a JSON array, and those written before the
// spares or the decisions were kept have none: all still load.
type savedPilot struct {
	Actions   []autopilot.Action   `json:"actions"`
	LastStart time.Time            `json:"last_start,omitzero"`
	Spared    map[string]time.Time `json:"spared,omitempty"`
	Recent    []autopilot.Decision `json:"recent,omitempty"`
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

// recentState returns the recent decisions, oldest first, and how many
// were made or adopted in all (pilotPart.decided) when they were taken.
func (p *pilotPart) recentState() ([]autopilot.Decision, uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.recent), p.decided
}

// adopt gives the engine what another engine saved (this collector's
// before a restart, or the fleet's last holder of the lock) — its
// actions, spacing and spares — and the part its recent decisions, and
// returns how many actions it took.
func (p *pilotPart) adopt(sp savedPilot) int {
	p.eng.SpaceFrom(sp.LastStart)
	for tn, until := range sp.Spared {
		p.eng.Spare(tn, until) // one that ended goes at the next step
	}
	p.adoptRecent(sp.Recent)
	return p.eng.Restore(sp.Actions)
}

// adoptRecent merges saved decisions into the recent ones: by time, each
// once (a collector that takes the lock back finds its own there too),
// the newest api.MaxAutopilotRecent kept. Only the status shows them:
// they are not counted, written or audited again.
func (p *pilotPart) adoptRecent(saved []autopilot.Decision) {
	if len(saved) == 0 {
		return
	}
	type id struct {
		at     int64
		action string
		kind   autopilot.Kind
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := make(map[id]bool, len(p.recent))
	for _, d := range p.recent {
		seen[id{d.Time.UnixNano(), d.ActionID, d.Kind}] = true
	}
	all := slices.Clone(p.recent)
	for _, d := range saved {
		if k := (id{d.Time.UnixNano(), d.ActionID, d.Kind}); !seen[k] {
			seen[k] = true
			all = append(all, d)
		}
	}
	if len(all) == len(p.recent) {
		return
	}
	slices.SortStableFunc(all, func(a, b autopilot.Decision) int { return a.Time.Compare(b.Time) })
	p.recent = all[max(0, len(all)-api.MaxAutopilotRecent):]
	p.decided++
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
	p.saveActions(ctx, now)
}

// calmSettle is how long an action's calm (its victims recovered, or
// its offender quiet, with no decision since) lasts before the actions
// file is rewritten for it.
const calmSettle = 5 * time.Second

// saveActions writes what a restart, or the next holder of the fleet's
// lock, needs (savedPilot) to the data dir, or beside the lock, when it
// changed in a way that one would act on: an action started,
// changed or ended, a calm that lasted calmSettle (the hold before the
// next relax step runs from its start), a calm that ended. Victims that
// flap across the recover threshold start and end a calm every second
// or two: before, each rewrote the file (and the copy beside the lock
// was written every second). A restart, or a takeover, within a calm's
// first seconds counts it from its own first step, so its relax step
// comes those seconds later, never sooner; one after a calm ended never
// relaxes on it. A decision (made, or adopted) is written with its change, for
// the recent decisions. The figures an action last saw (Action.Last)
// change every second: they are written with such a change, and at
// shutdown (flushActions).
func (p *pilotPart) saveActions(ctx context.Context, now time.Time) {
	p.writeActions(ctx, now, false)
}

// flushActions writes the actions as they are, their last figures and a
// calm just begun included, when the file does not hold them: at
// shutdown. It writes nothing before the saved actions were read back,
// and nothing beside the lock: a collector that stops may no longer
// hold it (its holder's copy is not its to overwrite), and the next
// holder follows the actions on a snapshot of its own at once.
//
// With the lock in Redis it lets the lock go instead, if it holds it, so
// that another collector of the fleet takes over within a second rather
// than when the key runs out (5 s), following what this one saved beside
// the lock at its last change.
func (p *pilotPart) flushActions() {
	if p.lock == nil {
		p.writeActions(context.Background(), time.Time{}, true)
		return
	}
	if err := p.lock.release(context.Background()); err != nil {
		p.log.Warn("autopilot: the lock was not let go at the stop; another collector takes it when it runs out", "err", err)
	}
}

func (p *pilotPart) writeActions(ctx context.Context, now time.Time, flush bool) {
	s := p.save
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if flush && s.full == nil {
		return
	}
	sp := savedPilot{Actions: p.eng.Active(), LastStart: p.eng.LastStart(), Spared: p.eng.Spared()}
	recent, decided := p.recentState()
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
		if s.full != nil && bytes.Equal(key, s.key) && decided == s.decided {
			return
		}
		for i := range sp.Actions {
			sp.Actions[i].Last = last[i]
		}
	}
	sp.Recent = recent
	b, _ := s.marshal(sp)
	if flush && bytes.Equal(b, s.full) {
		return
	}
	if err := s.put(ctx, b); err != nil {
		p.log.Warn(s.warn, append(slices.Clip(s.attrs), "err", err)...)
		return
	}
	s.full, s.key, s.decided = b, key, decided
}

// pilotSave writes the autopilot's saved state (savedPilot) where a
// restart, or the next holder of the lock, reads it. Each second's save
// marshals once: what a restart acts on (the key), compared with the
// last written, and the count of decisions; the whole state (the
// actions' last figures and the recent decisions with it) only when
// either changed.
type pilotSave struct {
	put   func(context.Context, []byte) error
	warn  string // logged, with attrs, when put fails
	attrs []any
	// marshal is json.Marshal (a test counts the calls).
	marshal func(any) ([]byte, error)

	// mu orders the writes (the loop's and a cancel's), so that the last
	// written is the newest state; full is that state as written (nil:
	// none yet), key what of it a restart acts on (nil: written whole,
	// at a stop), decided the count of decisions its Recent ends with.
	mu        sync.Mutex
	full, key []byte
	decided   uint64
}

func newPilotSave(put func(context.Context, []byte) error, warn string, attrs ...any) *pilotSave {
	return &pilotSave{put: put, warn: warn, attrs: attrs, marshal: json.Marshal}
}

// forget makes the next save write.
func (s *pilotSave) forget() {
	s.mu.Lock()
	s.full, s.key = nil, nil
	s.mu.Unlock()
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
