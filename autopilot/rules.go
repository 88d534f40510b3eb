package autopilot

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/incident"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/tenant"
)

// state is what one snapshot says of the victims and the services.
type state struct {
	victims []incident.Victim // worst first (the headline's order)
	service string            // with the lowest latency ratio (serviceRatio)
	ratio   float64           // its ratio; 0: none known
	tiers   map[string]string // tier of each tenant row
}

func newState(s *api.Snapshot, h incident.Headline) *state {
	st := &state{victims: h.Victims, tiers: make(map[string]string, len(s.Tenants))}
	for i := range s.Services {
		if r := serviceRatio(&s.Services[i]); r > 0 && (st.ratio == 0 || r < st.ratio) {
			st.service, st.ratio = s.Services[i].Service, r
		}
	}
	for i := range s.Tenants {
		if r := &s.Tenants[i]; tagged(s, r) {
			st.tiers[r.Tenant] = r.Tier
		}
	}
	return st
}

// serviceRatio is the latency ratio a rule's ratio_below reads: the
// lower of the service's ratio (its p95 against the last 5 minutes: a
// change just now) and its hour baseline over its p95 (a lasting
// slowdown, which the first takes in within a minute or two, and what the
// latency alerts read); 0 while the ratio is unknown (too few samples).
// So a rule stays hurt for as long as the slowdown lasts, and recovers
// when the p95 is back near its usual level, not when the 5-minute window
// has caught up with it.
func serviceRatio(sv *api.ServiceRow) float64 {
	if sv.Ratio > 0 && sv.BaselineP95Seconds > 0 && sv.P95Seconds > 0 {
		return min(sv.Ratio, sv.BaselineP95Seconds/sv.P95Seconds)
	}
	return sv.Ratio
}

// count is the victims at or above factor × their baseline, but.
func (st *state) count(factor float64, but string) int {
	n := 0
	for _, v := range st.victims {
		if v.Factor() >= factor && v.Tenant != but {
			n++
		}
	}
	return n
}

// hurt is the rule's condition on victims, the offender but (if any)
// left out: a tenant is never its own victim (one whose p95 rises with
// the resource it drives, or under the limit on it, would otherwise
// count towards victims_min, and keep its own action tight).
func (st *state) hurt(r policy.AutopilotRule, but string) bool {
	return r.VictimsMin > 0 && st.count(r.VictimP95Factor, but) >= r.VictimsMin ||
		r.RatioBelow > 0 && st.ratio > 0 && st.ratio < r.RatioBelow
}

// recovered is the rule's condition on victims having recovered, the
// offender but left out: below the recover thresholds, a band under the
// ones that act (hysteresis).
func (st *state) recovered(r policy.AutopilotRule, but string) bool {
	return (r.VictimsMin == 0 || st.count(r.RecoverP95Factor, but) < r.VictimsMin) &&
		(r.RatioBelow == 0 || st.ratio == 0 || st.ratio >= r.RatioRecover)
}

// candidate is a tenant that drives a rule's resource.
type candidate struct {
	tenant                    string
	load, share, base, recent float64
}

// start tries the rules in order and starts at most one action: against
// the tenant with the largest share of the rule's resource that drives
// it at least min_factor × its own baseline while victims are hurt —
// never a T0 tenant, an allowed one, one without a row in the snapshot
// or one already under an action — and only an interval after the last
// action started.
func (e *Engine) start(s *api.Snapshot, st *state) (Decision, bool) {
	t := s.Time
	for _, r := range e.rules {
		if !e.lastNew.IsZero() && t.Sub(e.lastNew) < r.Interval() || !st.hurt(r, "") {
			continue
		}
		c, ok := e.offender(s, st, r)
		if !ok {
			continue
		}
		ev := e.evidence(s, st, r, c.tenant, nil)
		a := &action{rule: r, Action: Action{
			ID: "autopilot-" + r.Name + "-" + strconv.FormatInt(t.Unix(), 10), Rule: r.Name, Tenant: c.tenant,
			Action: r.Action, Shadow: r.Shadow(), Started: t, Expires: t.Add(r.For()), Evidence: ev,
		}}
		if st.recovered(r, c.tenant) {
			a.Calm = t
		}
		e.acts = append(e.acts, a)
		e.lastNew = t
		return e.decide(a, t, KindApply, e.why(r, ev), ev), true
	}
	return Decision{}, false
}

// offender is the rule's offender, if any.
func (e *Engine) offender(s *api.Snapshot, st *state, r policy.AutopilotRule) (candidate, bool) {
	var cs []candidate
	for name := range e.loads.now[index(r.Resource)] {
		load, share, base, recent, ok := e.loads.figures(s, r.Resource, name)
		if !ok || share < r.MinShare || !(base <= 0 && recent > 0 || base > 0 && recent >= r.MinFactor*base) {
			continue
		}
		cs = append(cs, candidate{tenant: name, load: load, share: share, base: base, recent: recent})
	}
	slices.SortFunc(cs, func(a, b candidate) int {
		return cmp.Or(cmp.Compare(b.share, a.share), strings.Compare(a.tenant, b.tenant))
	})
	for _, c := range cs {
		tier, row := st.tiers[c.tenant]
		if tr, err := tenant.ParseTier(tier); !row || err != nil || tr == tenant.T0 || e.allow[c.tenant] || e.acting(c.tenant) ||
			s.Time.Before(e.cancelled[c.tenant]) || !st.hurt(r, c.tenant) {
			continue
		}
		return c, true
	}
	return candidate{}, false
}

// acting reports whether an action is active against t.
func (e *Engine) acting(t string) bool {
	for _, a := range e.acts {
		if a.Tenant == t {
			return true
		}
	}
	return false
}

// evidence is the figures of a decision on tenant t under rule r; the
// baselines are frozen ones (of the action) when given, else they are
// frozen now.
func (e *Engine) evidence(s *api.Snapshot, st *state, r policy.AutopilotRule, t string, frozen *Evidence) Evidence {
	ev := Evidence{Service: st.service, Ratio: st.ratio, Resource: r.Resource, VictimsHurt: st.count(r.VictimP95Factor, t)}
	for _, v := range st.victims {
		if len(ev.Victims) == MaxEvidenceVictims {
			break
		}
		if v.Factor() >= r.VictimP95Factor && v.Tenant != t {
			v.Routes = nil
			ev.Victims = append(ev.Victims, v)
		}
	}
	var base, recent float64
	ev.Load, ev.Share, base, recent, _ = e.loads.figures(s, r.Resource, t)
	if base > 0 {
		ev.Factor = recent / base
	}
	if frozen != nil {
		ev.Baseline, ev.BaselineRU, ev.BaselineDB, ev.BaselineFrom = frozen.Baseline, frozen.BaselineRU, frozen.BaselineDB, frozen.BaselineFrom
		return ev
	}
	ev.Baseline, ev.BaselineFrom = e.baseline(s, r.Resource, t)
	ev.BaselineRU, _ = e.baseline(s, policy.ResourceRU, t)
	ev.BaselineDB, _ = e.baseline(s, policy.ResourceDB, t)
	return ev
}

// baseline is a tenant's own baseline of res (loads.frozen), or, for new
// load, the median tenant's load of it now ("typical").
func (e *Engine) baseline(s *api.Snapshot, res policy.Resource, t string) (float64, string) {
	if own := e.loads.frozen(s, res, t); own > 0 {
		return own, "own"
	}
	return e.loads.typical(res, t), "typical"
}

// CreatedByPrefix starts the CreatedBy of every policy part the
// autopilot writes: "autopilot/<rule>".
const CreatedByPrefix = "autopilot/"

// Floors of a limit, so that an offender is slowed, never stopped.
const (
	minRUPerSecond = 0.1
	minDBShare     = 0.01
)

// limit is the action's limit at a relax level, rounded (to 0.01 RU/s,
// 0.001 sessions, 0.01 of a multiplier) so a policy reads plainly: the
// nearest float to the decimal (12.12, not 12.120000000000001), as
// dividing by the power of ten, not multiplying by its inverse, gives.
func limit(r policy.AutopilotRule, ev Evidence, level int) float64 {
	step := math.Pow(r.RelaxFactor, float64(level))
	round := func(v, per float64) float64 { return math.Round(v*per) / per }
	switch r.Action {
	case policy.AutopilotQuota, policy.AutopilotThrottle:
		return round(min(max(ev.BaselineRU*r.Factor, minRUPerSecond)*step, policy.MaxRUPerSecond), 100)
	case policy.AutopilotBudget:
		return round(min(max(ev.BaselineDB*r.Factor, minDBShare)*step, 1e6), 1000)
	}
	return round(max(r.Multiplier/step, 1), 100)
}

// why is an apply's reason in words.
func (e *Engine) why(r policy.AutopilotRule, ev Evidence) string {
	var hurt []string
	if r.VictimsMin > 0 && ev.VictimsHurt >= r.VictimsMin {
		hurt = append(hurt, strconv.Itoa(ev.VictimsHurt)+" tenants' p95 ≥×"+num(r.VictimP95Factor)+" their baseline")
	}
	if r.RatioBelow > 0 && ev.Ratio > 0 && ev.Ratio < r.RatioBelow {
		hurt = append(hurt, policy.StripControl(ev.Service)+" latency ratio "+num(ev.Ratio)+" < "+num(r.RatioBelow))
	}
	f := "new load"
	if ev.Factor > 0 {
		f = "×" + num(ev.Factor) + " its baseline"
	}
	return strings.Join(hurt, " and ") + " while it drives " + strconv.FormatFloat(ev.Share*100, 'f', 0, 64) + "% of " + string(r.Resource) + " (" + f + ")"
}

// decide records a decision on a: its limit at its level now, and the
// policy part that says so (expiring at t for a lift or a cancel, which
// keep the limit they remove).
func (e *Engine) decide(a *action, t time.Time, k Kind, why string, ev Evidence) Decision {
	r := a.rule
	if k != KindLift && k != KindCancel {
		a.Limit = limit(r, a.Evidence, a.Level)
	}
	if k != KindApply {
		a.Changed = t
	} else {
		a.Changed = a.Started
	}
	d := Decision{Time: t, Rule: a.Rule, Tenant: a.Tenant, Kind: k, Shadow: a.Shadow, ActionID: a.ID, Action: a.Action.Action,
		Level: a.Level, Limit: a.Limit, Why: why, Evidence: ev}
	expires := a.Expires
	if k == KindLift || k == KindCancel {
		expires = t
	}
	reason := CreatedByPrefix + r.Name + " " + string(k) + ": " + why
	if len(reason) > 1000 {
		reason = strings.ToValidUTF8(reason[:1000], "")
	}
	by := CreatedByPrefix + r.Name
	switch r.Action {
	case policy.AutopilotBudget:
		mode := policy.Enforce
		if a.Shadow {
			mode = policy.Warn
		}
		d.Budget = &policy.Budget{ID: a.ID, Match: []map[string]string{{"tenant": a.Tenant}}, Share: a.Limit, Concurrency: r.Concurrency,
			Mode: mode, Expires: expires, Reason: reason, CreatedBy: by, Created: a.Started}
	default:
		pr := policy.Rule{ID: a.ID, Tenant: a.Tenant, Shadow: a.Shadow, Expires: expires, Reason: reason, CreatedBy: by, Created: a.Started}
		switch r.Action {
		case policy.AutopilotQuota:
			pr.Action, pr.RUPerSecond = policy.Quota, a.Limit
		case policy.AutopilotThrottle:
			pr.Action, pr.RUPerSecond = policy.Throttle, a.Limit
		default:
			pr.Action, pr.Multiplier = policy.Price, a.Limit
		}
		d.PolicyRule = &pr
	}
	return d
}
