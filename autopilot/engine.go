package autopilot

import (
	"errors"
	"fmt"
	"github.com/qtop-dev/qtop/tenant"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/incident"
	"github.com/qtop-dev/qtop/policy"
)

// ErrUnknown is returned by Cancel for an action that is not active.
var ErrUnknown = errors.New("autopilot: no such action")

// DefaultMaxActions bounds the actions active at once (WithMaxActions).
const DefaultMaxActions = 64

// Option configures New.
type Option func(*config)

type config struct {
	maxActions int
}

// WithMaxActions bounds the actions active at once (DefaultMaxActions):
// at the bound no new action starts until one lifts.
func WithMaxActions(n int) Option { return func(c *config) { c.maxActions = n } }

// Engine runs the autopilot's rules over live snapshots. Step takes each
// snapshot in order and returns the decisions it makes; the engine keeps
// the actions it started and follows them until they lift. It takes its
// time from the snapshots only, so a recording replayed gives the same
// decisions as the live stream did. Its methods are safe for concurrent
// use (Step from the loop that reads the live view, Cancel and Pause from
// an API handler).
type Engine struct {
	mu        sync.Mutex
	cfg       config
	rules     []policy.AutopilotRule // with their defaults
	allow     map[string]bool
	polPaused bool // the policy says paused
	paused    bool // Pause was called
	tr        incident.Tracker
	loads     loads
	acts      []*action // by start
	last      time.Time // of the last snapshot taken
	lastNew   time.Time // of the last action started
	// cancelled holds each tenant whose action was cancelled by hand
	// until that action would have ended: no new action against it
	// before then, so that a cancel is not undone the next second.
	cancelled map[string]time.Time
}

// action is an active action and what following it needs.
type action struct {
	Action
	rule policy.AutopilotRule
}

// New returns an engine running the rules of a (validated first).
func New(a policy.Autopilot, opts ...Option) (*Engine, error) {
	e := &Engine{cfg: config{maxActions: DefaultMaxActions}}
	for _, o := range opts {
		o(&e.cfg)
	}
	if e.cfg.maxActions < 1 || e.cfg.maxActions > 10000 {
		return nil, fmt.Errorf("autopilot: max actions %d: want 1 to 10000", e.cfg.maxActions)
	}
	if err := e.SetPolicy(a); err != nil {
		return nil, err
	}
	return e, nil
}

// SetPolicy replaces the rules, the allow-list and the paused flag (a new
// policy version). Active actions keep going; one whose rule is gone
// lifts at the next Step, one whose rule changed follows the new
// figures (its limit, frozen when it began, stays until its next step).
func (e *Engine) SetPolicy(a policy.Autopilot) error {
	if err := a.Validate(); err != nil {
		return fmt.Errorf("autopilot: %w", err)
	}
	rules := make([]policy.AutopilotRule, len(a.Rules))
	for i, r := range a.Rules {
		rules[i] = r.Defaults()
	}
	allow := make(map[string]bool, len(a.Allow))
	for _, t := range a.Allow {
		allow[tenant.Escape(t)] = true // the row name of a tenant named "other"
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.rules, e.allow, e.polPaused = rules, allow, a.Paused
	return nil
}

// Pause stops new actions until Resume; active actions still relax and
// lift by themselves. The policy's own Paused pauses as well.
func (e *Engine) Pause() { e.mu.Lock(); e.paused = true; e.mu.Unlock() }

// Resume undoes Pause.
func (e *Engine) Resume() { e.mu.Lock(); e.paused = false; e.mu.Unlock() }

// Paused reports whether new actions are stopped (Pause, or the policy).
func (e *Engine) Paused() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.paused || e.polPaused
}

// Headline is the incident headline of the last snapshot: the evidence
// the rules read, the same qtop shows.
func (e *Engine) Headline() incident.Headline {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.tr.Headline()
}

// Active returns the active actions, oldest first.
func (e *Engine) Active() []Action {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]Action, len(e.acts))
	for i, a := range e.acts {
		out[i] = a.copy()
	}
	return out
}

// copy is a's Action sharing nothing with it.
func (a *action) copy() Action {
	c := a.Action
	c.Evidence.Victims = slices.Clone(a.Evidence.Victims)
	if a.Last != nil {
		last := *a.Last
		last.Victims = slices.Clone(last.Victims)
		c.Last = &last
	}
	return c
}

// Restore adopts actions another engine started (its Active, kept with
// the decision log): a collector that takes over from another, or that
// restarted, follows them to their lift instead of leaving them to
// expire, from where they were: its next relax, tighten or lift comes
// when the engine that started them would have made it (their Changed
// and Calm, and the snapshots it is given, time them). An action whose
// tenant is already under one here, or past the bound, is left out;
// one whose rule is not in the policy lifts at the next Step. Restore
// returns how many it adopted. New actions are spaced from the newest
// start among them; give the stopped engine's LastStart to SpaceFrom
// too, for an action that ended before it stopped.
func (e *Engine) Restore(actions []Action) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, a := range actions {
		if e.acting(a.Tenant) || len(e.acts) >= e.cfg.maxActions || a.ID == "" {
			continue
		}
		r, ok := e.rule(a.Rule)
		if !ok {
			// Enough of its rule to write the part that lifts it.
			r = policy.AutopilotRule{Name: a.Rule, Action: a.Action}
		}
		ad := &action{Action: a, rule: r}
		ad.Action = ad.copy()
		e.acts = append(e.acts, ad)
		if a.Started.After(e.lastNew) {
			e.lastNew = a.Started
		}
		n++
	}
	return n
}

// Release stops following the active actions, with no decision: another
// engine follows them now (in a fleet, the collector that took the lock
// over Restore'd them from what this one saved). It returns how many it
// let go. The spares and the spacing stay.
func (e *Engine) Release() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := len(e.acts)
	clear(e.acts)
	e.acts = e.acts[:0]
	return n
}

// LastStart is when the last action started (zero: none yet): no new
// action starts sooner than its rule's interval after it. To be kept
// across a restart with the actions (SpaceFrom): one that ended before
// the restart still spaces the next, as it would have without it.
func (e *Engine) LastStart() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.lastNew
}

// SpaceFrom spaces new actions from t, an action's start before a
// restart (LastStart), unless a later one is known.
func (e *Engine) SpaceFrom(t time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if t.After(e.lastNew) {
		e.lastNew = t
	}
}

// Cancel ends the action id at now, by hand (by says who: a credential,
// a user). The decision it returns expires the action's policy part,
// with the figures of the last snapshot taken. No new action starts
// against its tenant before the cancelled one would have ended (its
// Expires): the allow-list is how a tenant is spared for good.
func (e *Engine) Cancel(id, by string, now time.Time) (Decision, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	a, ok := e.remove(id)
	if !ok {
		return Decision{}, fmt.Errorf("%w: %q", ErrUnknown, id)
	}
	if e.cancelled == nil {
		e.cancelled = map[string]time.Time{}
	}
	e.cancelled[a.Tenant] = a.Expires
	d := e.decide(a, now, KindCancel, "cancelled by hand", a.last())
	d.By = by
	return d, nil
}

// Lift ends the action id at now for the reason why, as a lift: for one
// whose policy part ended while no engine followed it (a restart), so
// that its end is written and audited. Its tenant is not spared.
func (e *Engine) Lift(id, why string, now time.Time) (Decision, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	a, ok := e.remove(id)
	if !ok {
		return Decision{}, fmt.Errorf("%w: %q", ErrUnknown, id)
	}
	return e.decide(a, now, KindLift, why, a.last()), nil
}

// remove takes the action id out of the active ones.
func (e *Engine) remove(id string) (*action, bool) {
	for i, a := range e.acts {
		if a.ID == id {
			e.acts = slices.Delete(e.acts, i, i+1)
			return a, true
		}
	}
	return nil, false
}

// last is the evidence of the last snapshot that followed a, or its
// apply's.
func (a *action) last() Evidence {
	if a.Last != nil {
		return *a.Last
	}
	return a.Evidence
}

// Spared returns the tenants a Cancel spares from new actions, and until
// when: to be kept across a restart (Spare).
func (e *Engine) Spared() map[string]time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps.Clone(e.cancelled)
}

// Spare spares tenant from new actions until until, as a Cancel made
// before a restart did (Spared).
func (e *Engine) Spare(tenant string, until time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cancelled == nil {
		e.cancelled = map[string]time.Time{}
	}
	if until.After(e.cancelled[tenant]) {
		e.cancelled[tenant] = until
	}
}

// Step takes the next snapshot and returns the decisions made at its
// time: changes to the active actions first, then at most one new
// action. A snapshot not later than the previous one (a clock that went
// back, a repeat) is ignored.
func (e *Engine) Step(s *api.Snapshot) []Decision {
	e.mu.Lock()
	defer e.mu.Unlock()
	t := s.Time
	if !e.last.IsZero() && !t.After(e.last) {
		return nil
	}
	e.last = t
	h := e.tr.Add(s)
	e.loads.add(s)
	st := newState(s, h)
	var out []Decision
	keep := e.acts[:0]
	for _, a := range e.acts {
		d, ok, ended := e.follow(a, s, st)
		if ok {
			out = append(out, d)
		}
		if !ended {
			keep = append(keep, a)
		}
	}
	clear(e.acts[len(keep):])
	e.acts = keep
	for tn, until := range e.cancelled {
		if !t.Before(until) {
			delete(e.cancelled, tn)
		}
	}
	// No new action on rates that climb from nothing either: a
	// restarted collector's offender would be judged on half its load.
	if !e.paused && !e.polPaused && len(e.acts) < e.cfg.maxActions && !filling(s) {
		if d, ok := e.start(s, st); ok {
			out = append(out, d)
		}
	}
	return out
}

// rule returns the current rule of that name.
func (e *Engine) rule(name string) (policy.AutopilotRule, bool) {
	for _, r := range e.rules {
		if r.Name == name {
			return r, true
		}
	}
	return policy.AutopilotRule{}, false
}

// follow decides what becomes of an active action at the snapshot's
// time: lift (its rule gone, its time ended, the offender back near its
// baseline), mode (its rule's mode changed), relax (victims recovered,
// or the offender quiet, for a hold), tighten (victims hurt again after a
// relax step while the offender still presses on its limit), or nothing.
// No change comes sooner than a hold after the previous one.
func (e *Engine) follow(a *action, s *api.Snapshot, st *state) (d Decision, ok, ended bool) {
	t := s.Time
	r, found := e.rule(a.Rule)
	if !found {
		return e.decide(a, t, KindLift, "its rule left the autopilot's policy", a.Evidence), true, true
	}
	a.rule = r
	ev := a.last()
	if !filling(s) {
		// A restarted collector's first figures are not real ones: the
		// action keeps the last it had (saved with it) meanwhile.
		ev = e.evidence(s, st, r, a.Tenant, &a.Evidence)
		a.Last = &ev
	}
	if a.Shadow != r.Shadow() {
		// Not held: a rule switched to enforce acts at once on the
		// offender its shadow action names.
		a.Shadow = r.Shadow()
		why := "its rule now enforces"
		if a.Shadow {
			why = "its rule is now in shadow mode"
		}
		return e.decide(a, t, KindMode, why, ev), true, false
	}
	if !t.Before(a.Expires) {
		return e.decide(a, t, KindLift, "its time ended ("+r.For().String()+")", ev), true, true
	}
	if filling(s) {
		// After a restart the offender's load climbs from nothing, and
		// read as quiet it lifted the action at once. The action waits
		// for real figures, its calm kept.
		return Decision{}, false, false
	}
	// An offender gone quiet is not the cause of what victims feel now
	// (others are): it neither tightens nor holds back its relax steps,
	// so the action moves on to its lift.
	rec := st.recovered(r, a.Tenant) || e.quiet(a, ev)
	switch {
	case !rec:
		a.Calm = time.Time{}
	case a.Calm.IsZero():
		a.Calm = t
	}
	if t.Sub(a.Changed) < r.Hold() {
		return Decision{}, false, false
	}
	switch {
	case a.Level >= r.RelaxSteps && e.nearBaseline(a, ev):
		return e.decide(a, t, KindLift, "the offender is back near its baseline and under its limit", ev), true, true
	case rec && a.Level < r.RelaxSteps && t.Sub(a.Calm) >= r.Hold():
		a.Level++
		a.Calm = t
		why := "victims recovered for " + r.Hold().String()
		if !st.recovered(r, a.Tenant) {
			why = "victims recovered or the offender quiet (under half its limit) for " + r.Hold().String()
		}
		return e.decide(a, t, KindRelax, why, ev), true, false
	case !rec && st.hurt(r, a.Tenant) && a.Level > 0:
		a.Level--
		return e.decide(a, t, KindTighten, "victims hurt again", ev), true, false
	}
	return Decision{}, false, false
}

// nearBaseline reports whether the offender's load is back under the
// rule's lift factor × its frozen baseline and it is quiet. Only an
// action relaxed as far as its rule allows lifts so (follow): under a
// tight limit the admitted load says nothing of the demand — an import
// held to one job in ten seconds shows no load most seconds, and lifting
// it then brings the incident straight back.
func (e *Engine) nearBaseline(a *action, ev Evidence) bool {
	return ev.Load <= a.rule.LiftFactor*a.Evidence.Baseline && e.quiet(a, ev)
}

// quiet reports whether the offender uses at most half of its limit, so
// its demand, not the limit, holds it down. A demotion limits nothing:
// there the offender is quiet when its load is under the rule's lift
// factor × its frozen baseline.
func (e *Engine) quiet(a *action, ev Evidence) bool {
	switch a.Action.Action {
	case policy.AutopilotQuota, policy.AutopilotThrottle:
		// An RU limit says nothing of load without RU (database sessions
		// no process reports): on another resource, that load must be
		// back near its baseline too.
		other := a.rule.Resource != "" && a.rule.Resource != policy.ResourceRU
		return e.loads.now[index(policy.ResourceRU)][a.Tenant] <= limit(a.rule, a.Evidence, a.Level)/2 &&
			(!other || ev.Load <= a.rule.LiftFactor*a.Evidence.Baseline)
	case policy.AutopilotBudget:
		return e.loads.now[index(policy.ResourceDB)][a.Tenant] <= limit(a.rule, a.Evidence, a.Level)/2
	}
	return ev.Load <= a.rule.LiftFactor*a.Evidence.Baseline
}
