package policy

import (
	"fmt"
	"math"
	"time"

	"github.com/qtop-dev/qtop/tenant"
)

// Autopilot is the autopilot's part of the policy: rules that, when
// victims are hurt and one tenant drives a resource far above its own
// baseline, limit that tenant for a bounded time and lift the limit by
// themselves (package autopilot runs them). It is plain data, versioned
// and audited with the rest of the policy; processes never receive it
// (Index.ViewFor leaves it out): they receive the rules it decides.
//
// As JSON:
//
//	{"allow":["trust-safety"],"rules":[{"name":"import","victims_min":3,"resource":"ru",
//	 "min_share":0.3,"min_factor":3,"action":"quota","factor":1,"for_seconds":900}]}
type Autopilot struct {
	// Paused stops new actions; actions already taken still relax and
	// lift by themselves.
	Paused bool `json:"paused,omitempty"`
	// Allow lists tenants the autopilot never acts on (at most
	// MaxAutopilotAllow). Tenants of tier T0 are never acted on either.
	Allow []string `json:"allow,omitempty"`
	// Rules are tried in order; at most MaxAutopilotRules.
	Rules []AutopilotRule `json:"rules,omitempty"`
}

// AutopilotMode says whether a rule's decisions are applied.
type AutopilotMode string

// The autopilot modes.
const (
	// AutopilotShadow decides and records, and the rules it writes carry
	// Shadow: counted, never applied. Every rule starts here.
	AutopilotShadow AutopilotMode = "shadow"
	// AutopilotEnforce applies what it decides.
	AutopilotEnforce AutopilotMode = "enforce"
)

// Resource is what an offender drives, as the live snapshot (api.Snapshot)
// carries it.
type Resource string

// The resources.
const (
	// ResourceRU is request units per second (TenantRow.RUPerSec).
	ResourceRU Resource = "ru"
	// ResourceDB is database load in average active sessions
	// (TenantRow.DBLoad).
	ResourceDB Resource = "db"
	// ResourcePoolWait is connection-pool wait, seconds waited per second
	// (Snapshot.PoolWait, from agents' pgx pools).
	ResourcePoolWait Resource = "pool_wait"
	// ResourceWorkers is parallel workers of the tenant's running
	// statements (Snapshot.Statements[].Workers, from the sampler).
	ResourceWorkers Resource = "workers"
)

// AutopilotAction is what a rule does to the offender.
type AutopilotAction string

// The autopilot actions; each writes one policy part.
const (
	// AutopilotQuota is a fleet-wide quota (a Rule with Action Quota) at
	// the offender's frozen RU baseline × Factor.
	AutopilotQuota AutopilotAction = "quota"
	// AutopilotThrottle is a per-process throttle (a Rule with Action
	// Throttle) at the offender's frozen RU baseline × Factor.
	AutopilotThrottle AutopilotAction = "throttle"
	// AutopilotBudget is a database budget (a Budget, mode enforce) whose
	// share is the offender's frozen DB-load baseline × Factor, with
	// Concurrency statements in flight per process when set.
	AutopilotBudget AutopilotAction = "budget"
	// AutopilotDemote prices the offender's work up (a Rule with Action
	// Price) by Multiplier, as a lower tier would pay.
	AutopilotDemote AutopilotAction = "demote"
)

// Bounds and defaults of the autopilot's rules.
const (
	MaxAutopilotRules = 16
	MaxAutopilotAllow = 1000
	MaxAutopilotName  = 64
	// MinVictimP95Factor is the headline's own victim threshold
	// (incident.VictimP95): a victim factor below it would never see a
	// victim.
	MinVictimP95Factor = 1.5
	// MaxAutopilotSeconds bounds a rule's for_seconds: no action lasts
	// more than a day.
	MaxAutopilotSeconds = 86400

	DefaultVictimP95Factor = 2.0
	DefaultMinShare        = 0.3
	DefaultMinFactor       = 3.0
	DefaultFactor          = 1.0
	DefaultMultiplier      = 4.0
	DefaultForSeconds      = 900
	DefaultIntervalSeconds = 30
	DefaultHoldSeconds     = 30
	DefaultRelaxSteps      = 2
	DefaultRelaxFactor     = 2.0
	DefaultLiftFactor      = 1.5
	// DefaultRatioMargin is how far above ratio_below a service's ratio
	// must be to count as recovered, by default.
	DefaultRatioMargin = 0.1
)

// AutopilotRule is one rule: when victims are hurt (VictimsMin and/or
// RatioBelow) and one tenant drives at least MinShare of Resource at
// MinFactor times its own baseline, apply Action to it for ForSeconds.
// A zero number means its default (Defaults).
type AutopilotRule struct {
	// Name names the rule (1 to 64 letters, digits, '-', '_', '.'); the
	// rules it writes are created by "autopilot/<name>".
	Name string `json:"name"`
	// Mode is shadow (the default) or enforce.
	Mode AutopilotMode `json:"mode,omitempty"`

	// VictimsMin: at least this many tenants with p95 at least
	// VictimP95Factor × their baseline (0: not a condition).
	VictimsMin      int     `json:"victims_min,omitempty"`
	VictimP95Factor float64 `json:"victim_p95_factor,omitempty"`
	// RecoverP95Factor: victims count as recovered when fewer than
	// VictimsMin remain at this factor (default MinVictimP95Factor; from
	// it to VictimP95Factor: the hysteresis band).
	RecoverP95Factor float64 `json:"recover_p95_factor,omitempty"`
	// RatioBelow: a service's latency ratio below this (0–1; 0: not a
	// condition); the ratio read is the lower of the service's 5-minute
	// ratio and its hour baseline over its p95, so a lasting slowdown
	// stays below it. RatioRecover is the ratio every service must be
	// back above (default RatioBelow + 0.1, at most 1).
	RatioBelow   float64 `json:"ratio_below,omitempty"`
	RatioRecover float64 `json:"ratio_recover,omitempty"`

	// Resource is what the offender drives (default ru); MinShare its
	// least share of it (0–1) and MinFactor its least recent load over
	// its own baseline (new load, with no baseline, always qualifies).
	Resource  Resource `json:"resource,omitempty"`
	MinShare  float64  `json:"min_share,omitempty"`
	MinFactor float64  `json:"min_factor,omitempty"`

	// Action is quota (the default), throttle, budget or demote. Factor
	// scales the offender's frozen baseline into the limit (quota,
	// throttle, budget); Multiplier is demote's price multiplier;
	// Concurrency caps a budget's statements in flight (0: no cap).
	Action      AutopilotAction `json:"action,omitempty"`
	Factor      float64         `json:"factor,omitempty"`
	Multiplier  float64         `json:"multiplier,omitempty"`
	Concurrency int             `json:"concurrency,omitempty"`

	// ForSeconds is the most an action lasts; IntervalSeconds the least
	// time between two new actions of the autopilot; HoldSeconds the
	// least time between two changes of one action (and the time victims
	// must stay recovered before a relax step).
	ForSeconds      float64 `json:"for_seconds,omitempty"`
	IntervalSeconds float64 `json:"interval_seconds,omitempty"`
	HoldSeconds     float64 `json:"hold_seconds,omitempty"`
	// RelaxSteps is how many times the limit is multiplied by RelaxFactor
	// (the multiplier divided, for demote) once victims recover, one step
	// per hold, before the action lifts. LiftFactor: the action lifts
	// early when the offender's load is back under LiftFactor × its
	// frozen baseline and well under its limit (half of it).
	RelaxSteps  int     `json:"relax_steps,omitempty"`
	RelaxFactor float64 `json:"relax_factor,omitempty"`
	LiftFactor  float64 `json:"lift_factor,omitempty"`
}

// Defaults returns r with every zero field set to its default.
func (r AutopilotRule) Defaults() AutopilotRule {
	def := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	if r.Mode == "" {
		r.Mode = AutopilotShadow
	}
	if r.Resource == "" {
		r.Resource = ResourceRU
	}
	if r.Action == "" {
		r.Action = AutopilotQuota
	}
	def(&r.VictimP95Factor, DefaultVictimP95Factor)
	def(&r.RecoverP95Factor, min(MinVictimP95Factor, r.VictimP95Factor))
	if r.RatioBelow > 0 {
		def(&r.RatioRecover, min(1, r.RatioBelow+DefaultRatioMargin))
	}
	def(&r.MinShare, DefaultMinShare)
	def(&r.MinFactor, DefaultMinFactor)
	def(&r.Factor, DefaultFactor)
	def(&r.Multiplier, DefaultMultiplier)
	def(&r.ForSeconds, DefaultForSeconds)
	def(&r.IntervalSeconds, DefaultIntervalSeconds)
	def(&r.HoldSeconds, min(DefaultHoldSeconds, r.ForSeconds))
	if r.RelaxSteps == 0 {
		r.RelaxSteps = DefaultRelaxSteps
	}
	def(&r.RelaxFactor, DefaultRelaxFactor)
	def(&r.LiftFactor, DefaultLiftFactor)
	return r
}

// Shadow reports whether the rule's decisions are only recorded.
func (r AutopilotRule) Shadow() bool { return r.Mode != AutopilotEnforce }

// For, Interval and Hold are ForSeconds, IntervalSeconds and HoldSeconds
// as durations.
func (r AutopilotRule) For() time.Duration      { return seconds(r.ForSeconds) }
func (r AutopilotRule) Interval() time.Duration { return seconds(r.IntervalSeconds) }
func (r AutopilotRule) Hold() time.Duration     { return seconds(r.HoldSeconds) }

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// Validate checks the autopilot's rules, allow-list and their counts; a
// nil Autopilot is valid (none).
func (a *Autopilot) Validate() error {
	if a == nil {
		return nil
	}
	if len(a.Rules) > MaxAutopilotRules {
		return fmt.Errorf("%w: autopilot: %d rules, at most %d", ErrInvalid, len(a.Rules), MaxAutopilotRules)
	}
	if len(a.Allow) > MaxAutopilotAllow {
		return fmt.Errorf("%w: autopilot: %d allowed tenants, at most %d", ErrInvalid, len(a.Allow), MaxAutopilotAllow)
	}
	for _, t := range a.Allow {
		if err := tenant.ValidateTenant(t); err != nil {
			return fmt.Errorf("%w: autopilot: allow: %v", ErrInvalid, err)
		}
	}
	names := map[string]bool{}
	for i, r := range a.Rules {
		if err := r.Validate(); err != nil {
			return fmt.Errorf("autopilot rule %d (%s): %w", i, r.Name, err)
		}
		if names[r.Name] {
			return fmt.Errorf("%w: autopilot rule name %q twice", ErrInvalid, r.Name)
		}
		names[r.Name] = true
	}
	return nil
}

// Validate checks one rule: its name, its enums, and every number (zero
// means the default) within its bounds.
func (r AutopilotRule) Validate() error {
	if err := validName(r.Name); err != nil {
		return err
	}
	switch r.Mode {
	case "", AutopilotShadow, AutopilotEnforce:
	default:
		return fmt.Errorf("%w: mode %q (want %q or %q)", ErrInvalid, r.Mode, AutopilotShadow, AutopilotEnforce)
	}
	switch r.Resource {
	case "", ResourceRU, ResourceDB, ResourcePoolWait, ResourceWorkers:
	default:
		return fmt.Errorf("%w: resource %q (want %q, %q, %q or %q)", ErrInvalid, r.Resource, ResourceRU, ResourceDB, ResourcePoolWait, ResourceWorkers)
	}
	switch r.Action {
	case "", AutopilotQuota, AutopilotThrottle, AutopilotBudget, AutopilotDemote:
	default:
		return fmt.Errorf("%w: action %q (want %q, %q, %q or %q)", ErrInvalid, r.Action, AutopilotQuota, AutopilotThrottle, AutopilotBudget, AutopilotDemote)
	}
	if r.VictimsMin == 0 && r.RatioBelow == 0 {
		return fmt.Errorf("%w: a rule needs a condition on victims: victims_min, ratio_below or both", ErrInvalid)
	}
	if r.VictimsMin < 0 || r.VictimsMin > 1000 {
		return fmt.Errorf("%w: victims_min must be from 0 to 1000", ErrInvalid)
	}
	if r.RelaxSteps < 0 || r.RelaxSteps > 10 {
		return fmt.Errorf("%w: relax_steps must be from 0 to 10", ErrInvalid)
	}
	if r.Concurrency < 0 || r.Concurrency > 1<<20 || (r.Concurrency > 0 && r.Action != AutopilotBudget) {
		return fmt.Errorf("%w: concurrency must be from 0 to %d, and only with action %q", ErrInvalid, 1<<20, AutopilotBudget)
	}
	d := r.Defaults()
	for _, b := range []struct {
		name     string
		v        float64
		min, max float64
	}{
		{"victim_p95_factor", d.VictimP95Factor, MinVictimP95Factor, 100},
		{"recover_p95_factor", d.RecoverP95Factor, MinVictimP95Factor, d.VictimP95Factor},
		{"ratio_below", r.RatioBelow, 0, 0.99},
		{"ratio_recover", d.RatioRecover, d.RatioBelow, 1},
		{"min_share", d.MinShare, 0.01, 1},
		{"min_factor", d.MinFactor, 1.1, 1000},
		{"factor", d.Factor, 0.01, 100},
		{"multiplier", d.Multiplier, 1, MaxMultiplier},
		{"for_seconds", d.ForSeconds, 1, MaxAutopilotSeconds},
		{"interval_seconds", d.IntervalSeconds, 1, 3600},
		{"hold_seconds", d.HoldSeconds, 1, d.ForSeconds},
		{"relax_factor", d.RelaxFactor, 1.01, 10},
		{"lift_factor", d.LiftFactor, 1, 100},
	} {
		if math.IsNaN(b.v) || b.v < b.min || b.v > b.max {
			return fmt.Errorf("%w: %s %g must be from %g to %g", ErrInvalid, b.name, b.v, b.min, b.max)
		}
	}
	return nil
}

// validName checks an autopilot rule's name.
func validName(s string) error {
	if s == "" || len(s) > MaxAutopilotName {
		return fmt.Errorf("%w: an autopilot rule needs a name of 1 to %d bytes", ErrInvalid, MaxAutopilotName)
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("%w: autopilot rule name %q: letters, digits, '-', '_' and '.' only", ErrInvalid, StripControl(s))
		}
	}
	return nil
}
