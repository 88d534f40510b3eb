package autopilot

import (
	"strconv"
	"strings"
	"time"

	"github.com/qtop-dev/qtop/incident"
	"github.com/qtop-dev/qtop/policy"
)

// Kind is what a decision does to an action.
type Kind string

// The kinds of decision.
const (
	// KindApply starts an action against an offender.
	KindApply Kind = "apply"
	// KindRelax loosens an action by one step (victims recovered).
	KindRelax Kind = "relax"
	// KindTighten takes one relax step back (victims hurt again).
	KindTighten Kind = "tighten"
	// KindLift ends an action: the offender is back near its baseline,
	// its time ended, or its rule left the policy.
	KindLift Kind = "lift"
	// KindCancel ends an action by hand (Engine.Cancel).
	KindCancel Kind = "cancel"
	// KindMode rewrites an active action's policy part in its rule's new
	// mode: a shadow action enforces from the second its rule does (and
	// an enforced one turns shadow), at the same level and limit.
	KindMode Kind = "mode"
)

// MaxEvidenceVictims bounds the victims a decision names (the worst).
const MaxEvidenceVictims = 5

// Decision is one step of the autopilot: an action applied, changed or
// ended, with the policy part it writes and the figures behind it. A
// shadow decision (Shadow) writes the same part with Shadow set on a
// rule, or mode warn on a budget: counted, never applied.
type Decision struct {
	Time   time.Time `json:"time"`
	Rule   string    `json:"rule"`
	Tenant string    `json:"tenant"`
	Kind   Kind      `json:"kind"`
	Shadow bool      `json:"shadow"`
	// ActionID identifies the action, and the policy rule or budget it
	// writes (the same ID from apply to lift).
	ActionID string                 `json:"action_id"`
	Action   policy.AutopilotAction `json:"action"`
	// Level is the relax steps taken; Limit the action's limit after
	// the decision: RU/s (quota, throttle), database sessions (budget)
	// or the price multiplier (demote).
	Level int     `json:"level"`
	Limit float64 `json:"limit"`
	// PolicyRule or Budget is the policy part to write (replacing the
	// one of the same ID); on lift and cancel it expires at Time.
	PolicyRule *policy.Rule   `json:"policy_rule,omitempty"`
	Budget     *policy.Budget `json:"budget,omitempty"`
	// Why says in words why; By is who cancelled (KindCancel).
	Why      string   `json:"why"`
	By       string   `json:"by,omitempty"`
	Evidence Evidence `json:"evidence"`
}

// Evidence is the figures a decision was taken on: the victims and the
// services' latency ratio at the time of the decision, and the
// offender's figures, with the baselines frozen when the action began.
type Evidence struct {
	// VictimsHurt counts the tenants at or above the rule's victim
	// factor; Victims are the worst of them (at most MaxEvidenceVictims),
	// with their p95 and baseline.
	VictimsHurt int               `json:"victims_hurt"`
	Victims     []incident.Victim `json:"victims,omitempty"`
	// Service is the service with the lowest latency ratio, Ratio its
	// ratio (0: no service reported one).
	Service string  `json:"service,omitempty"`
	Ratio   float64 `json:"ratio,omitempty"`
	// Resource is what the offender drives: Load now, Share of the total
	// (0–1), Factor its recent load over its own baseline (0: new load).
	Resource policy.Resource `json:"resource"`
	Load     float64         `json:"load"`
	Share    float64         `json:"share"`
	Factor   float64         `json:"factor"`
	// Baseline is the offender's baseline of Resource, frozen when the
	// action began: the median of its load before the recent seconds
	// (Factor compares means, as qtop's headline does; the median is not
	// moved by an incident filling part of the span). BaselineRU and
	// BaselineDB are its RU/s and DB-load baselines, which the limits
	// scale. BaselineFrom is "own" (its history) or "typical" (new load:
	// the median tenant's, at the time).
	Baseline     float64 `json:"baseline"`
	BaselineRU   float64 `json:"baseline_ru"`
	BaselineDB   float64 `json:"baseline_db"`
	BaselineFrom string  `json:"baseline_from"`
}

// Action is an action in force (or in shadow): what Engine.Active lists,
// and all that following it needs: an engine that Restores it (after a
// restart, or taking over from another) makes the decisions the engine
// that started it would have made.
type Action struct {
	ID      string                 `json:"id"`
	Rule    string                 `json:"rule"`
	Tenant  string                 `json:"tenant"`
	Action  policy.AutopilotAction `json:"action"`
	Shadow  bool                   `json:"shadow"`
	Started time.Time              `json:"started"`
	Changed time.Time              `json:"changed"`
	Expires time.Time              `json:"expires"`
	Level   int                    `json:"level"`
	Limit   float64                `json:"limit"`
	// Calm is since when the victims have counted as recovered (or the
	// offender as quiet); zero while they are hurt. A relax step waits a
	// hold from both Changed and Calm. Absent from actions saved before
	// it was kept: such an action counts its calm from its first
	// snapshot after the restore.
	Calm     time.Time `json:"calm,omitzero"`
	Evidence Evidence  `json:"evidence"`
	// Last is the figures of the last snapshot that followed the action
	// (nil: none since its apply): what a cancel or a lift states when
	// no snapshot was taken since, as after a restart. Absent from
	// actions saved before it was kept: such an action states its
	// Evidence until its first snapshot after the restore.
	Last *Evidence `json:"last,omitempty"`
}

// String is the decision on one line, for a log or a terminal:
//
//	09:00:14 would apply quota rule=noisy-neighbour tenant=bigcorp limit=61.6 RU/s · ...
func (d Decision) String() string {
	var b strings.Builder
	b.WriteString(d.Time.UTC().Format("2006-01-02T15:04:05Z "))
	if d.Shadow {
		b.WriteString("would ")
	}
	b.WriteString(string(d.Kind) + " " + string(d.Action) + " rule=" + d.Rule + " tenant=" + policy.StripControl(d.Tenant))
	b.WriteString(" id=" + d.ActionID + " level=" + strconv.Itoa(d.Level) + " limit=" + num(d.Limit) + unit(d.Action))
	if d.By != "" {
		b.WriteString(" by=" + policy.StripControl(d.By))
	}
	b.WriteString(" · " + d.Why + " · " + d.Evidence.String())
	return b.String()
}

// String is the evidence on one line.
func (e Evidence) String() string {
	var b strings.Builder
	b.WriteString("victims " + strconv.Itoa(e.VictimsHurt))
	if len(e.Victims) > 0 {
		var vs []string
		for _, v := range e.Victims {
			vs = append(vs, policy.StripControl(v.Tenant)+" p95 "+ms(v.P95Seconds)+" base "+ms(v.BaselineP95Seconds))
		}
		b.WriteString(" (" + strings.Join(vs, ", ") + ")")
	}
	if e.Ratio > 0 {
		b.WriteString(" · ratio " + num(e.Ratio) + " " + policy.StripControl(e.Service))
	}
	f := "new load"
	if e.Factor > 0 {
		f = "×" + num(e.Factor) + " its baseline"
	}
	b.WriteString(" · offender " + string(e.Resource) + " " + num(e.Load) + " = " + strconv.FormatFloat(e.Share*100, 'f', 0, 64) + "%, " + f)
	b.WriteString(" · baseline " + num(e.Baseline) + " (" + e.BaselineFrom + "), " + num(e.BaselineRU) + " RU/s, " + num(e.BaselineDB) + " DB")
	return b.String()
}

func unit(a policy.AutopilotAction) string {
	switch a {
	case policy.AutopilotQuota, policy.AutopilotThrottle:
		return " RU/s"
	case policy.AutopilotBudget:
		return " sessions"
	}
	return "×"
}

func num(f float64) string {
	switch {
	case f >= 100:
		return strconv.FormatFloat(f, 'f', 0, 64)
	case f >= 1:
		return strconv.FormatFloat(f, 'f', 1, 64)
	}
	return strconv.FormatFloat(f, 'g', 2, 64)
}

func ms(s float64) string { return strconv.FormatFloat(s*1000, 'f', 0, 64) + "ms" }
