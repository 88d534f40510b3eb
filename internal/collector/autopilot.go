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
// read when it starts (begin), before it serves.
type pilotPart struct {
	pol       *policyPart
	log       *slog.Logger
	setBudget func(ctx context.Context, b policy.Budget, del bool, who string) error
	lock      *pilotLock // nil: alone
	needLock  bool       // part of a fleet: acts only under the lock
	unshared  bool       // peers without a shared policy: its rules would reach only this collector's processes
	// spared is where the tenants a cancel spares are kept across a
	// restart (DataDir/autopilot-spared.json; "": not kept).
	spared string
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
		p.spared = filepath.Join(cfg.DataDir, sparedFile)
		p.loadSpared(cfg.Now())
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

// sparedFile keeps, in the data dir, the tenants a cancel spares from new
// actions until the cancelled one would have ended, so that a restart
// does not act on them again at once.
const sparedFile = "autopilot-spared.json"

// loadSpared gives the engine the spares saved before a restart that
// have not ended at now; a file that cannot be read is logged and left.
func (p *pilotPart) loadSpared(now time.Time) {
	b, err := os.ReadFile(p.spared)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	var m map[string]time.Time
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err != nil {
		p.log.Warn("autopilot: the tenants a cancel spares were not read; they may be acted on again", "file", p.spared, "err", err)
		return
	}
	for tn, until := range m {
		if until.After(now) {
			p.eng.Spare(tn, until)
		}
	}
}

// saveSpared writes the engine's spares to the data dir.
func (p *pilotPart) saveSpared() {
	if p.spared == "" {
		return
	}
	b, _ := json.Marshal(p.eng.Spared())
	if err := store.WriteFileAtomic(p.spared, b); err != nil {
		p.log.Warn("autopilot: the tenants a cancel spares were not saved; a restart may act on them again", "file", p.spared, "err", err)
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
// none of those, as after its first step: the holder follows them. The
// server calls it once, before it serves.
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
	if !p.turn(ctx) {
		return
	}
	ds := p.eng.Step(snap)
	for _, d := range ds {
		p.write(ctx, now, d)
	}
	p.saveActions(ctx, now)
	p.gauges()
}

// turn takes the policy's rules and finds whether this collector acts
// now (mayAct); it reports whether the rules are to run. A collector
// that takes the fleet's lock takes over the actions saved beside it.
func (p *pilotPart) turn(ctx context.Context) bool {
	p.mu.Lock()
	p.syncLocked()
	idle := len(p.rules.Rules) == 0 && len(p.eng.Active()) == 0
	if idle {
		p.acting, p.note = false, noPilotRules
		p.gaugesLocked()
	}
	p.mu.Unlock()
	if idle {
		return false
	}
	acting, note := p.mayAct(ctx)
	p.mu.Lock()
	took := acting && !p.acting
	p.acting, p.note = acting, note
	p.mu.Unlock()
	if !acting {
		p.gauges()
		return false
	}
	if took {
		p.takeOver(ctx)
	}
	return true
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

// mayAct says whether this collector runs the rules now.
func (p *pilotPart) mayAct(ctx context.Context) (bool, string) {
	if p.unshared {
		return false, "this collector has peers but no shared policy (--shared-policy): the autopilot's rules would reach only its own processes"
	}
	if p.lock == nil {
		if p.needLock {
			return false, "several collectors share this fleet: the autopilot acts only under a lock in Redis (--quota-redis)"
		}
		return true, ""
	}
	holder, err := p.lock.hold(ctx)
	switch {
	case err != nil:
		return false, "the autopilot's lock in Redis cannot be taken (" + err.Error() + "): no collector acts"
	case holder != p.lock.me:
		return false, "collector " + holder + " holds the autopilot's lock and acts"
	}
	return true, ""
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
	if len(p.rules.Rules) == 0 && len(p.recent) == 0 && len(p.eng.Active()) == 0 {
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
	for _, a := range p.eng.Active() {
		st.Active = append(st.Active, api.AutopilotRow{ID: a.ID, Rule: a.Rule, Tenant: a.Tenant,
			Action: string(a.Action), Limit: a.Limit, Unit: unitOf(a.Action), Level: a.Level,
			Shadow: a.Shadow, Started: a.Started, Expires: a.Expires, Evidence: a.Evidence.String()})
	}
	for i := len(p.recent) - 1; i >= 0; i-- {
		st.Recent = append(st.Recent, p.recent[i].String())
	}
	return st
}

// noPilotRules is the note of a step that found no rules.
const noPilotRules = "no autopilot rules in the policy"

// autopilotState is GET /v1/autopilot's answer: the status, the rules,
// and the recent decisions whole (evidence as figures), newest first.
type autopilotState struct {
	Status    api.AutopilotStatus  `json:"status"`
	Rules     policy.Autopilot     `json:"rules"`
	Decisions []autopilot.Decision `json:"decisions"`
}

func (p *pilotPart) state() autopilotState {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.syncLocked()
	s := autopilotState{Status: p.statusLocked(), Rules: p.rules}
	for i := len(p.recent) - 1; i >= 0; i-- {
		s.Decisions = append(s.Decisions, p.recent[i])
	}
	return s
}

// command carries out a POST /v1/autopilot: pause and resume are policy
// changes (shared with the fleet, audited); cancel ends an action now.
func (p *pilotPart) command(ctx context.Context, now time.Time, c api.AutopilotCommand, who string) error {
	n := 0
	for _, set := range []bool{c.Pause, c.Resume, c.Cancel != ""} {
		if set {
			n++
		}
	}
	if n != 1 {
		// Not policy.ErrInvalid, whose text speaks of a rule.
		return errors.New(`autopilot command: send exactly one of {"pause":true}, {"resume":true} or {"cancel":"ID"}`)
	}
	if c.Cancel != "" {
		d, err := p.eng.Cancel(c.Cancel, who, now)
		if err != nil {
			return fmt.Errorf("%w (GET /v1/autopilot lists the active actions)", err)
		}
		p.write(ctx, now, d)
		p.saveSpared()
		if p.lock == nil {
			// Beside the lock its holder's next step writes it: a
			// collector that lost the lock must not overwrite the
			// holder's actions with its own.
			p.saveActions(ctx, now)
		}
		return nil
	}
	// Pausing while paused, or resuming while running, changes nothing:
	// no new policy version, no audit row.
	action := auditAutopilotPause
	if c.Resume {
		action = auditAutopilotResume
	}
	return p.setAutopilot(ctx, now, who, action, func(a *policy.Autopilot) bool {
		if a.Paused == c.Pause {
			return false
		}
		a.Paused = c.Pause
		return true
	})
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
		if err := s.feat.pilot.command(r.Context(), s.cfg.Now().UTC(), c, who); err != nil {
			writeError(w, http.StatusBadRequest, err.Error(), 0)
			return
		}
		writeJSON(w, http.StatusOK, s.feat.pilot.state())
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
