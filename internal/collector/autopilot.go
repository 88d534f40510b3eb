package collector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/autopilot"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/store"
)

// The autopilot (package autopilot) runs here: once a second on the live
// view — the fleet's, when the collector has peers — the same snapshot
// qtop shows, so its evidence is qtop's headline. Its rules are the
// policy's autopilot part (versioned, audited, shared with the policy).
// Each decision is written as the policy part it makes — a quota,
// throttle or price rule, or a database budget — through the one commit
// path every policy change takes, and audited with its evidence; a
// shadow rule's decisions write shadow rules (counted by the processes,
// never applied). With several collectors only the one holding the lock
// in Redis (--quota-redis) acts; without Redis a collector of a fleet
// acts on nothing and says why. The holder keeps its active actions
// beside the lock (pilotlock.go), and the collector that takes the lock
// next follows them to their lift; a collector alone keeps them in its
// data dir (autopilotactions.go) and follows them again after a restart,
// read when it starts (begin), before it serves. A cancel sent to a
// collector of the fleet that does not hold the lock is passed to the
// one that does, through Redis (pilotLock.pass).
type pilotPart struct {
	pol       *policyPart
	log       *slog.Logger
	setBudget func(ctx context.Context, b policy.Budget, del bool, who string) error
	lock      *pilotLock // nil: alone
	needLock  bool       // part of a fleet: acts only under the lock
	unshared  bool       // peers without a shared policy: its rules would reach only this collector's processes
	// actions is where a collector alone keeps its active actions
	// (DataDir/autopilot-actions.json; "": not kept); save what writes
	// them there, or beside the lock (nil: not kept).
	actions string
	save    *pilotSave
	// now stamps the audit of a decision: when it was written, after
	// whatever the snapshot it was decided on followed from (a policy
	// change an admin made within the same second, say).
	now func() time.Time

	mu      sync.Mutex
	eng     *autopilot.Engine
	version uint64 // of the policy the engine's rules came from
	rules   policy.Autopilot
	acting  bool
	note    string
	recent  []autopilot.Decision // newest last, at most api.MaxAutopilotRecent
	decided uint64               // decisions made or adopted into recent, in all: a save writes on a change
	// held is what the collector that holds the fleet's lock, when
	// another, saved beside it, as this one's last step read it (nil:
	// this one acts, or none was saved): the status lists it as that
	// one's, so that every collector of a fleet shows the actions in force.
	held *heldPilot

	decisions *prometheus.CounterVec
	active    *prometheus.GaugeVec
	paused    prometheus.Gauge
	actingG   prometheus.Gauge
	errors    prometheus.Counter
}

var _ feature = (*pilotPart)(nil)

func (p *pilotPart) merge(*report.Report, time.Time, bool) {}
func (p *pilotPart) reply(_ *report.Report, _ time.Time, r report.Reply, _ bool) report.Reply {
	return r
}
func (p *pilotPart) tick(context.Context, time.Time) {}

func newPilotPart(cfg Config, pol *policyPart, q *fleetQuota) (*pilotPart, error) {
	eng, err := autopilot.New(policy.Autopilot{})
	if err != nil {
		return nil, err
	}
	p := &pilotPart{pol: pol, log: cfg.Logger, eng: eng, version: ^uint64(0), now: cfg.Now,
		needLock: cfg.SharedPolicy || len(cfg.Peers) > 0, unshared: len(cfg.Peers) > 0 && !cfg.SharedPolicy}
	if q.client != nil {
		p.lock = newPilotLock(q.client, cfg.QuotaPrefix, q.id)
		p.save = newPilotSave(p.lock.put, "autopilot: actions not saved beside the lock")
	}
	if cfg.DataDir != "" {
		p.loadSpared(filepath.Join(cfg.DataDir, sparedFile), cfg.Now())
		if p.lock == nil && !p.needLock {
			p.actions = filepath.Join(cfg.DataDir, actionsFile)
			p.save = newPilotSave(func(_ context.Context, b []byte) error { return store.WriteFileAtomic(p.actions, b) },
				"autopilot: the active actions were not saved; after a restart their rules expire by themselves", "file", p.actions)
		}
	}
	p.decisions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "qtop_autopilot_decisions_total",
		Help: "Decisions of the autopilot by rule, kind (apply, relax, tighten, lift, cancel) and mode (enforce, shadow)."},
		[]string{"rule", "kind", "mode"})
	p.active = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "qtop_autopilot_actions",
		Help: "Actions of the autopilot in force (mode enforce) or in shadow, on this collector."}, []string{"mode"})
	p.paused = prometheus.NewGauge(prometheus.GaugeOpts{Name: "qtop_autopilot_paused",
		Help: "1 while the policy pauses the autopilot (no new action starts)."})
	p.actingG = prometheus.NewGauge(prometheus.GaugeOpts{Name: "qtop_autopilot_acting",
		Help: "1 while this collector runs the autopilot's rules (it holds the fleet's lock, or is alone)."})
	p.errors = prometheus.NewCounter(prometheus.CounterOpts{Name: "qtop_autopilot_write_errors_total",
		Help: "Decisions of the autopilot whose policy change was refused or not written (the log says why)."})
	for _, c := range []prometheus.Collector{p.decisions, p.active, p.paused, p.actingG, p.errors} {
		if err := cfg.Registerer.Register(c); err != nil {
			return nil, fmt.Errorf("collector: metrics: %w", err)
		}
	}
	return p, nil
}

// sparedFile kept, in the data dir, the tenants a cancel spares from
// new actions until the cancelled one would have ended, so that a
// restart did not act on them again at once. They are kept with the
// actions now (savedPilot.Spared: beside the fleet's lock too, for the
// collector that takes it over); a file of before is still read.
const sparedFile = "autopilot-spared.json"

// loadSpared gives the engine the spares in file that have not ended at
// now; a file that cannot be read is logged and left.
func (p *pilotPart) loadSpared(file string, now time.Time) {
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	var m map[string]time.Time
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err != nil {
		p.log.Warn("autopilot: the tenants a cancel spares were not read; they may be acted on again", "file", file, "err", err)
		return
	}
	for tn, until := range m {
		if until.After(now) {
			p.eng.Spare(tn, until)
		}
	}
}

// sync gives the engine the policy's autopilot part when it changed.
func (p *pilotPart) syncLocked() {
	var a policy.Autopilot
	var version uint64
	p.pol.read(func(pol *policy.Policy) {
		version = pol.Version
		if pol.Autopilot != nil {
			a = *pol.Autopilot
		}
	})
	if version == p.version {
		return
	}
	if err := p.eng.SetPolicy(a); err != nil {
		// The policy was validated when it was committed; a policy read
		// from disk that no longer validates keeps the rules in force.
		p.log.Error("autopilot: rules not taken", "err", err, "policy_version", version)
	} else {
		p.rules = a
	}
	p.version = version
}

// begin reads what the autopilot saved before the collector started, so
// that the first GET /v1/autopilot (and the live view) after a restart
// lists it: a collector alone reads its actions file (and lifts what
// ended, or lost its rule, while it was stopped); one with the fleet's
// lock takes the lock as its first step would and, when it gets it, the
// actions and decisions saved beside it. One that does not get it lists
// none of those, as after its first step: the holder follows them.
// Cancels passed to it wait for its first step. The server calls it
// once, before it serves.
func (p *pilotPart) begin(ctx context.Context, now time.Time) {
	if p.actions != "" {
		p.mu.Lock()
		p.syncLocked()
		p.mu.Unlock()
		// Before the idle test: an action whose rule left the policy
		// while the collector was stopped still lifts.
		p.restoreActions(ctx, now)
	}
	p.turn(ctx)
}

// step runs the rules on snap (taken at now) and writes what they
// decide. The part's lock is not held across Redis or the policy's
// writes, so the live view (which shows the status) never waits on them.
func (p *pilotPart) step(ctx context.Context, now time.Time, snap *api.Snapshot) {
	t, ok := p.turn(ctx)
	if !ok {
		return
	}
	p.applyCancels(ctx, now, t.cancels)
	ds := p.eng.Step(snap)
	for _, d := range ds {
		p.write(ctx, now, d)
	}
	p.saveActions(ctx, now)
	p.gauges()
}

// turn takes the policy's rules and finds whether this collector acts
// now (mayAct); it reports whether the rules are to run. A collector
// that takes the fleet's lock takes over the actions saved beside it; one
// that finds another holding it lets its own go (it held the lock
// before): the holder follows them.
func (p *pilotPart) turn(ctx context.Context) (pilotTurn, bool) {
	p.mu.Lock()
	p.syncLocked()
	// Idle without rules or actions of its own, unless it lists the
	// holder's actions: it follows them to their end.
	idle := len(p.rules.Rules) == 0 && len(p.eng.Active()) == 0 && (p.held == nil || len(p.held.sp.Actions) == 0)
	if idle {
		p.acting, p.note, p.held = false, noPilotRules, nil
		p.gaugesLocked()
	}
	p.mu.Unlock()
	if idle {
		return pilotTurn{}, false
	}
	t := p.mayAct(ctx)
	p.mu.Lock()
	took := t.act && (t.took || !p.acting)
	p.acting, p.note, p.held = t.act, t.note, t.held
	p.mu.Unlock()
	if t.other != "" {
		if n := p.eng.Release(); n > 0 {
			p.log.Info("autopilot: another collector holds the lock and follows the actions this one did", "holder", t.other, "actions", n)
		}
	}
	if !t.act {
		p.gauges()
		return t, false
	}
	if took {
		p.takeOver(ctx)
	}
	return t, true
}

func (p *pilotPart) gauges() {
	p.mu.Lock()
	p.gaugesLocked()
	p.mu.Unlock()
}

// takeOver adopts the actions the fleet's last holder of the lock saved
// (it died, or let go), so that they relax and lift as they would have.
func (p *pilotPart) takeOver(ctx context.Context) {
	if p.lock == nil {
		return
	}
	// Its next save writes, whatever it wrote when it held the lock
	// before: the key holds what the last holder wrote since.
	p.save.forget()
	sp, err := p.lock.load(ctx)
	if err != nil {
		p.log.Warn("autopilot: the last holder's actions not read; they expire by themselves", "err", err)
		return
	}
	if n := p.adopt(sp); n > 0 {
		p.log.Info("autopilot: took over the last holder's actions", "actions", n)
	}
}

// pilotTurn is what mayAct found.
type pilotTurn struct {
	act  bool   // this collector runs the rules
	note string // why it does not, or what it cannot do
	// took: this collector took the fleet's lock now, from nobody
	// (another may have held it since this one last did). other is the
	// collector that holds it, when it is another: it follows the
	// fleet's actions.
	took  bool
	other string
	// cancels were sent to the fleet's other collectors, for this one,
	// the holder (pilotLock.pass).
	cancels []pilotCancel
	// held is what other saved beside the lock (nil: nothing).
	held *heldPilot
}

// heldPilot is the saved state of the collector (by) that holds the
// fleet's lock, as another reads it.
type heldPilot struct {
	by string
	sp savedPilot
}

// mayAct says whether this collector runs the rules now.
func (p *pilotPart) mayAct(ctx context.Context) pilotTurn {
	if p.unshared {
		return pilotTurn{note: "this collector has peers but no shared policy (--shared-policy): the autopilot's rules would reach only its own processes"}
	}
	if p.lock == nil {
		if p.needLock {
			return pilotTurn{note: "several collectors share this fleet: the autopilot acts only under a lock in Redis (--quota-redis)"}
		}
		return pilotTurn{act: true}
	}
	h, err := p.lock.hold(ctx)
	switch {
	case err != nil:
		return pilotTurn{note: "the autopilot's lock in Redis cannot be taken (" + err.Error() + "): no collector acts"}
	case h.holder != p.lock.me:
		t := pilotTurn{note: "collector " + h.holder + " holds the autopilot's lock and acts", other: h.holder}
		if h.saved != nil {
			t.held = &heldPilot{by: h.holder, sp: *h.saved}
			t.note += ": below, its actions as it last saved them"
		}
		return t
	}
	return pilotTurn{act: true, took: h.took, cancels: h.cancels}
}

// write writes d's policy part and audits d with its evidence.
func (p *pilotPart) write(ctx context.Context, now time.Time, d autopilot.Decision) {
	who := "autopilot/" + d.Rule
	if d.By != "" {
		who = d.By
	}
	// Written, and audited, at the collector's clock when it is later
	// than the snapshot's whole second the decision was taken on.
	at := now
	if wall := p.now(); wall.After(at) {
		at = wall
	}
	var err error
	switch {
	case d.PolicyRule != nil:
		_, err = p.pol.setRule(ctx, at, policy.MaxAutopilotSeconds*time.Second, *d.PolicyRule, who, false)
	case d.Budget != nil:
		b := *d.Budget
		del := !b.Expires.IsZero() && !now.Before(b.Expires)
		err = p.setBudget(ctx, b, del, who)
	}
	if err != nil && (d.Kind == autopilot.KindLift || d.Kind == autopilot.KindCancel) && !p.inPolicy(d) {
		// What it would remove is gone already: it ended at its time and
		// the policy's tick pruned it, or someone removed it by hand.
		// The decision stands and is audited like any other.
		err = nil
	}
	mode := "enforce"
	if d.Shadow {
		mode = "shadow"
	}
	p.decisions.WithLabelValues(d.Rule, string(d.Kind), mode).Inc()
	p.mu.Lock()
	p.recent = append(p.recent, d)
	if n := len(p.recent) - api.MaxAutopilotRecent; n > 0 {
		p.recent = slices.Delete(p.recent, 0, n)
	}
	p.decided++
	p.mu.Unlock()
	if err != nil {
		p.errors.Inc()
		p.log.Error("autopilot: decision not written", "err", err, "decision", d.String())
		return
	}
	p.log.Info("autopilot", "decision", d.String())
	p.pol.audit(ctx, at, who, "autopilot-"+string(d.Kind), p.pol.current().Version, d)
}

// inPolicy reports whether d's policy rule or budget is in the policy.
func (p *pilotPart) inPolicy(d autopilot.Decision) bool {
	switch {
	case d.PolicyRule != nil:
		return p.partInPolicy(d.PolicyRule.ID, false)
	case d.Budget != nil:
		return p.partInPolicy(d.Budget.ID, true)
	}
	return false
}

func (p *pilotPart) gaugesLocked() {
	var enf, sh float64
	for _, a := range p.eng.Active() {
		if a.Shadow {
			sh++
		} else {
			enf++
		}
	}
	p.active.WithLabelValues("enforce").Set(enf)
	p.active.WithLabelValues("shadow").Set(sh)
	p.paused.Set(b2f(p.rules.Paused))
	p.actingG.Set(b2f(p.acting))
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// snapshot adds the autopilot's status to the live view.
func (p *pilotPart) snapshot(snap *api.Snapshot, _ time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.syncLocked()
	if len(p.rules.Rules) == 0 && len(p.recent) == 0 && len(p.eng.Active()) == 0 && p.held == nil {
		return
	}
	st := p.statusLocked()
	snap.Autopilot = &st
}

func (p *pilotPart) statusLocked() api.AutopilotStatus {
	st := api.AutopilotStatus{Rules: len(p.rules.Rules), Paused: p.rules.Paused, Acting: p.acting, Note: p.note}
	if st.Rules > 0 && p.note == noPilotRules {
		// Rules taken since the last step: it said what it saw then.
		st.Note = "rules taken; the autopilot runs them from its next step (each second)"
	}
	for _, r := range p.rules.Rules {
		if !r.Shadow() {
			st.Enforcing++
		}
	}
	active, recent := p.held.shown(p.eng.Active(), p.recent)
	if p.held != nil {
		st.HeldBy = p.held.by
	}
	for _, a := range active {
		row := api.AutopilotRow{ID: a.ID, Rule: a.Rule, Tenant: a.Tenant,
			Action: string(a.Action), Limit: a.Limit, Unit: unitOf(a.Action), Level: a.Level,
			Shadow: a.Shadow, Started: a.Started, Expires: a.Expires, Evidence: a.Evidence.String()}
		if a.Last != nil {
			row.Now = a.Last.String()
		}
		st.Active = append(st.Active, row)
	}
	for i := len(recent) - 1; i >= 0; i-- {
		st.Recent = append(st.Recent, recent[i].String())
	}
	return st
}

// shown returns the actions and the recent decisions (oldest first) a
// status lists: this collector's own (nil h), or those the fleet's holder
// of the lock saved, when another holds it.
func (h *heldPilot) shown(own []autopilot.Action, recent []autopilot.Decision) ([]autopilot.Action, []autopilot.Decision) {
	if h != nil {
		return h.sp.Actions, h.sp.Recent
	}
	return own, recent
}

// noPilotRules is the note of a step that found no rules.
const noPilotRules = "no autopilot rules in the policy"

// autopilotState is GET /v1/autopilot's answer (api.AutopilotState):
// the status, the rules, and the recent decisions whole (evidence as
// figures), newest first; a POST's answer says too where a cancel was
// passed (Forwarded).
type autopilotState struct {
	Status    api.AutopilotStatus  `json:"status"`
	Rules     policy.Autopilot     `json:"rules"`
	Decisions []autopilot.Decision `json:"decisions"`
	Forwarded string               `json:"forwarded,omitempty"`
}

func (p *pilotPart) state() autopilotState {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.syncLocked()
	s := autopilotState{Status: p.statusLocked(), Rules: p.rules}
	_, recent := p.held.shown(nil, p.recent)
	for i := len(recent) - 1; i >= 0; i-- {
		s.Decisions = append(s.Decisions, recent[i])
	}
	return s
}

// command carries out a POST /v1/autopilot: pause and resume are policy
// changes (shared with the fleet, audited); cancel ends an action now
// (cancel). It returns, for a cancel passed to the fleet's holder of the
// lock, what the answer says of it.
func (p *pilotPart) command(ctx context.Context, now time.Time, c api.AutopilotCommand, who string) (forwarded string, err error) {
	n := 0
	for _, set := range []bool{c.Pause, c.Resume, c.Cancel != ""} {
		if set {
			n++
		}
	}
	if n != 1 {
		// Not policy.ErrInvalid, whose text speaks of a rule.
		return "", errors.New(`autopilot command: send exactly one of {"pause":true}, {"resume":true} or {"cancel":"ID"}`)
	}
	if c.Cancel != "" {
		return p.cancel(ctx, now, c.Cancel, who)
	}
	// Pausing while paused, or resuming while running, changes nothing:
	// no new policy version, no audit row.
	action := auditAutopilotPause
	if c.Resume {
		action = auditAutopilotResume
	}
	return "", p.setAutopilot(ctx, now, who, action, func(a *policy.Autopilot) bool {
		if a.Paused == c.Pause {
			return false
		}
		a.Paused = c.Pause
		return true
	})
}

// errPilotRedis says that the fleet's autopilot state in Redis could not
// be read or written (a cancel is not taken then: 503).
var errPilotRedis = errors.New("autopilot: the fleet's autopilot state in Redis cannot be reached")

// cancel ends the action id at now, by who. The collector that holds the
// fleet's lock (or one alone) ends it itself; another passes the cancel
// to the holder (pilotLock.pass), whatever its engine holds (a collector that lost
// the lock let its actions go, or does so at its next step): the holder
// follows them.
func (p *pilotPart) cancel(ctx context.Context, now time.Time, id, who string) (forwarded string, err error) {
	if p.lock != nil {
		holder, err := p.lock.holder(ctx)
		if err != nil {
			return "", fmt.Errorf("%w (%v): send the cancel again", errPilotRedis, err)
		}
		if holder != p.lock.me {
			forwarded, err := p.lock.pass(ctx, pilotCancel{ID: id, By: who}, holder)
			if err == nil {
				p.log.Info("autopilot: cancel passed to the holder of the lock", "action", id, "by", who, "holder", holder)
			}
			return forwarded, err
		}
	}
	if err := p.cancelHere(ctx, now, id, who); err != nil {
		return "", fmt.Errorf("%w (GET /v1/autopilot lists the active actions)", err)
	}
	return "", nil
}

// cancelHere ends the action id, which this collector follows, and saves
// what a restart, or the next holder of the lock, needs at once: the
// action gone and its tenant spared.
func (p *pilotPart) cancelHere(ctx context.Context, now time.Time, id, who string) error {
	d, err := p.eng.Cancel(id, who, now)
	if err != nil {
		return err
	}
	p.write(ctx, now, d)
	p.saveActions(ctx, now)
	return nil
}

// applyCancels carries out the cancels the fleet's other collectors
// passed to this one, the holder, and clears them. One whose action
// ended before is logged and cleared.
func (p *pilotPart) applyCancels(ctx context.Context, now time.Time, cs []pilotCancel) {
	if len(cs) == 0 {
		return
	}
	ids := make([]string, len(cs))
	for i, c := range cs {
		ids[i] = c.ID
		if err := p.cancelHere(ctx, now, c.ID, c.By); err != nil {
			p.log.Info("autopilot: a cancel sent to another collector found its action ended", "action", c.ID, "by", c.By)
		}
	}
	if err := p.lock.done(ctx, ids); err != nil {
		// The next step finds them again, their actions ended.
		p.log.Warn("autopilot: the cancels carried out were not cleared in Redis", "err", err)
	}
}

// errUnchanged stops a policy change that would change nothing.
var errUnchanged = errors.New("collector: policy unchanged")

// setAutopilot changes the policy's autopilot part with edit and audits
// it; when edit reports false (nothing to change), it leaves the policy
// as it is.
func (p *pilotPart) setAutopilot(ctx context.Context, now time.Time, who, action string, edit func(*policy.Autopilot) bool) error {
	var changed policy.Autopilot
	out, err := p.pol.change(now, func(next *policy.Policy) error {
		var a policy.Autopilot
		if next.Autopilot != nil {
			a = *next.Autopilot
			a.Allow = slices.Clone(a.Allow)
			a.Rules = slices.Clone(a.Rules)
		}
		if !edit(&a) {
			return errUnchanged
		}
		next.Autopilot, changed = &a, a
		return nil
	})
	if errors.Is(err, errUnchanged) {
		return nil
	}
	if err != nil {
		return err
	}
	p.pol.audit(ctx, now, who, action, out.Version, changed)
	return nil
}

func (s httpAPI) handleAutopilot(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		s.authorized(RoleRead, func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, s.feat.pilot.state())
		})(w, r)
	case http.MethodPost:
		body, who, ok := s.policyPost(w, r, "autopilot command")
		if !ok {
			return
		}
		var c api.AutopilotCommand
		if err := decodeOne(body, &c, `{"pause":true}, {"resume":true} or {"cancel":"ID"}`); err != nil {
			writeError(w, http.StatusBadRequest, "autopilot command: "+err.Error(), 0)
			return
		}
		forwarded, err := s.feat.pilot.command(r.Context(), s.cfg.Now().UTC(), c, who)
		switch {
		case errors.Is(err, errPilotRedis):
			writeError(w, http.StatusServiceUnavailable, err.Error(), time.Second)
			return
		case err != nil:
			writeError(w, http.StatusBadRequest, err.Error(), 0)
			return
		}
		st := s.feat.pilot.state()
		if forwarded != "" {
			// Taken, and carried out by another collector.
			st.Forwarded = forwarded
			writeJSON(w, http.StatusAccepted, st)
			return
		}
		writeJSON(w, http.StatusOK, st)
	default:
		w.Header().Set("Allow", "GET, POST")
		writeError(w, http.StatusMethodNotAllowed, "use GET or POST", 0)
	}
}

// handleAutopilotPolicy serves /v1/policy/autopilot: GET the rules, POST
// (admin) a whole new autopilot part — rules, allow-list, paused —
// validated, versioned and audited as every policy change.
func (s httpAPI) handleAutopilotPolicy(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		s.authorized(RoleRead, func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, s.feat.pilot.state().Rules)
		})(w, r)
	case http.MethodPost:
		body, who, ok := s.policyPost(w, r, "autopilot rules")
		if !ok {
			return
		}
		var a policy.Autopilot
		if err := decodeOne(body, &a, `{"rules":[{"name":"import","victims_min":3,"victim_p95_factor":2,"action":"quota"}]} ({} removes every rule)`); err != nil {
			writeError(w, http.StatusBadRequest, "autopilot rules: "+err.Error(), 0)
			return
		}
		if err := a.Validate(); err != nil {
			writeError(w, http.StatusBadRequest, err.Error(), 0)
			return
		}
		if err := s.feat.pilot.setAutopilot(r.Context(), s.cfg.Now().UTC(), who, auditAutopilotSet,
			func(x *policy.Autopilot) bool { *x = a; return true }); err != nil {
			writeError(w, http.StatusBadRequest, err.Error(), 0)
			return
		}
		writeJSON(w, http.StatusOK, a)
	default:
		w.Header().Set("Allow", "GET, POST")
		writeError(w, http.StatusMethodNotAllowed, "use GET or POST", 0)
	}
}

// stepAutopilot runs the autopilot once on the live view (the fleet's
// when the collector has peers, tenants by RU), which the tenants'
// baselines are kept from too (but for the tenants a temporary limit
// holds).
func (s httpAPI) stepAutopilot(ctx context.Context) {
	snap := s.fleetSnapshot(ctx, api.MeasureRU, maxTop)
	s.mu.Lock()
	services := s.view.serviceLevels(snap.Time)
	s.mu.Unlock()
	var held map[string]bool
	s.policy.read(func(pol *policy.Policy) { held = heldTenants(pol, snap.Time) })
	s.feat.base.add(&snap, services, held) // baseline.go
	s.feat.pilot.step(ctx, snap.Time, &snap)
}

// The audit actions of changes to the autopilot's part of the policy; a
// fleet with a shared policy folds them from the store's audit log
// (fleet_policy.go).
const (
	auditAutopilotSet    = "autopilot-set"
	auditAutopilotPause  = "autopilot-pause"
	auditAutopilotResume = "autopilot-resume"
)

// PathAutopilotPolicy is where the autopilot's rules are read and set.
const PathAutopilotPolicy = "/v1/policy/autopilot"

// unitOf is the unit of an action's limit.
func unitOf(a policy.AutopilotAction) string {
	switch a {
	case policy.AutopilotQuota, policy.AutopilotThrottle:
		return "RU/s"
	case policy.AutopilotBudget:
		return "sessions"
	}
	return "×"
}
