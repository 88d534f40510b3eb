// Package policy is the enforcement policy that the collector hands out in
// every report reply and that each process applies locally: throttles and
// RU price multipliers per tenant or per tier, each with an expiry and a
// reason.
//
// The collector owns the policy (GET/POST /v1/policy); the ingest reporter
// receives it; the enforce package applies it. A Policy is plain data,
// encoded as JSON on the wire.
//
// Validate bounds every number (rates at MaxRUPerSecond, multipliers at
// MaxMultiplier, budgets and runaway times at 10⁶), refuses control
// characters in ids and reasons (Sanitize strips them from a policy from
// elsewhere), and wants ConfirmBroad on a runaway rule that would cancel
// or terminate broadly and on an Enforce budget that matches every
// statement. A reply need not carry the whole policy:
// Index.ViewFor gives the part one process needs, bounded in bytes and
// empty while that part is unchanged (view.go).
package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/qtop-dev/qtop/tenant"
)

// Errors returned by Validate; test with errors.Is.
var (
	ErrInvalid = errors.New("policy: invalid rule")
)

// Action is what a rule does.
type Action string

// The actions.
const (
	// Throttle caps a tenant's (or a tier's per-tenant) RU rate at
	// RUPerSecond; 0 rejects everything it matches.
	Throttle Action = "throttle"
	// Price multiplies the RU cost of what the rule matches by Multiplier,
	// so the same bucket admits proportionally less work.
	Price Action = "price"
	// Quota caps a tenant's (or each tenant of a tier's) RU rate across the
	// whole fleet at RUPerSecond, by batch reporting (see quota.go); it
	// does not change a process's own Effect.
	Quota Action = "quota"
)

// MaxRules bounds a policy so that a reply stays small.
const MaxRules = 10000

// MaxEncodedBytes bounds a policy as JSON: it goes whole in a reply to
// reporters that take no policy view, whose body report.MaxReplyBytes
// bounds (8 MiB), beside the fleet quota verdicts.
const MaxEncodedBytes = 6 << 20

// Rule is one decision. It matches one tenant (Tenant set) or every tenant
// of a tier (Tenant empty, Tier set).
type Rule struct {
	ID          string      `json:"id"`
	Tenant      string      `json:"tenant,omitempty"`
	Tier        tenant.Tier `json:"tier,omitempty"`
	Action      Action      `json:"action"`
	RUPerSecond float64     `json:"ru_per_second,omitempty"`
	Multiplier  float64     `json:"multiplier,omitempty"`
	// Shadow rules are decided and counted but not applied.
	Shadow    bool      `json:"shadow,omitempty"`
	Expires   time.Time `json:"expires"`
	Reason    string    `json:"reason"`
	CreatedBy string    `json:"created_by,omitempty"`
	Created   time.Time `json:"created"`
}

// Policy is the whole set of rules at one version.
type Policy struct {
	// Version increases with every change, so processes can tell a new
	// policy from a repeated one.
	Version uint64    `json:"version"`
	Rules   []Rule    `json:"rules"`
	Updated time.Time `json:"updated"`
	// Budgets and Runaway are the database budgets and runaway-statement
	// rules (budget.go) that the driver wrapper and the sampler apply.
	Budgets []Budget  `json:"budgets,omitempty"`
	Runaway []Runaway `json:"runaway,omitempty"`
	// Freshness is the freshness-shedding policy (nil: none).
	Freshness *Freshness `json:"freshness,omitempty"`
	// Autopilot holds the autopilot's rules (autopilot.go; nil: none).
	// It stays with the collector: a process's view leaves it out.
	Autopilot *Autopilot `json:"autopilot,omitempty"`
}

// Validate checks one rule.
func (r Rule) Validate() error {
	switch {
	case r.Tenant == "" && !r.Tier.Valid():
		return fmt.Errorf("%w: a rule needs a tenant or a tier (T0…T3)", ErrInvalid)
	case r.Tenant != "" && tenant.ValidateTenant(r.Tenant) != nil:
		return fmt.Errorf("%w: tenant: %v", ErrInvalid, tenant.ValidateTenant(r.Tenant))
	case r.Expires.IsZero():
		return fmt.Errorf("%w: expires is required (a rule never lasts for ever)", ErrInvalid)
	case r.Reason == "":
		return fmt.Errorf("%w: reason is required", ErrInvalid)
	case len(r.Reason) > 1024:
		return fmt.Errorf("%w: reason longer than 1024 bytes", ErrInvalid)
	}
	switch r.Action {
	case Throttle:
		if r.RUPerSecond < 0 || math.IsNaN(r.RUPerSecond) || math.IsInf(r.RUPerSecond, 0) {
			return fmt.Errorf("%w: ru_per_second must be a finite number ≥ 0", ErrInvalid)
		}
	case Price:
		if !(r.Multiplier >= 1) || math.IsInf(r.Multiplier, 0) {
			return fmt.Errorf("%w: multiplier must be a finite number ≥ 1", ErrInvalid)
		}
	case Quota:
		if err := r.validateQuota(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%w: action %q (want %q, %q or %q)", ErrInvalid, r.Action, Throttle, Price, Quota)
	}
	return r.validateLimits()
}

// Validate checks every rule and the size of the policy.
func (p Policy) Validate() error {
	_, err := p.Encode()
	return err
}

// Encode validates p as Validate does and returns it as JSON, the
// encoding Validate has to make anyway (a holder of a large policy keeps
// it rather than encoding the policy again to send or save it).
func (p Policy) Encode() ([]byte, error) {
	if err := p.ValidateContent(); err != nil {
		return nil, err
	}
	// Last, as it costs an encoding: each part has its own bounds, but
	// together (MaxRules rules with long reasons, say) they could outgrow
	// a reply, and reporters would stop getting any policy.
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if len(b) > MaxEncodedBytes {
		return nil, fmt.Errorf("%w: the policy would be %d bytes as JSON, at most %d (it must fit a reply to every reporter): remove rules or shorten their reasons", ErrInvalid, len(b), MaxEncodedBytes)
	}
	return b, nil
}

// ValidateContent is Validate without the bound on the policy's encoded
// size: for a policy that came in a reply, whose size report.MaxReplyBytes
// bounded already (a reporter checks every reply's policy, and would
// encode it again for nothing).
func (p Policy) ValidateContent() error {
	if len(p.Rules) > MaxRules {
		return fmt.Errorf("%w: %d rules, at most %d", ErrInvalid, len(p.Rules), MaxRules)
	}
	for i, r := range p.Rules {
		if err := r.Validate(); err != nil {
			return fmt.Errorf("rule %d (%s): %w", i, r.ID, err)
		}
	}
	if err := p.ValidateBudgets(); err != nil {
		return err
	}
	if err := p.Freshness.Validate(); err != nil {
		return err
	}
	return p.Autopilot.Validate()
}

// Active returns the rules that have not expired at now, in a stable order
// (tenant rules first, then tier rules, each by ID).
func (p Policy) Active(now time.Time) []Rule {
	out := make([]Rule, 0, len(p.Rules))
	for _, r := range p.Rules {
		if now.Before(r.Expires) {
			out = append(out, r)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if (out[i].Tenant == "") != (out[j].Tenant == "") {
			return out[i].Tenant != ""
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// Effect is what the active, non-shadow rules of a policy mean for one
// tenant at one instant.
type Effect struct {
	// Multiplier is the product of the matching price rules (1 if none).
	Multiplier float64
	// Throttled is true when a throttle rule matches; RUPerSecond is then
	// the lowest matching cap.
	Throttled   bool
	RUPerSecond float64
	// Shadow is true when a shadow rule matched and would have changed the
	// outcome; shadow rules never change Multiplier or RUPerSecond.
	Shadow bool
}

// For returns the effect of p's valid rules on tags at now. A tenant rule
// and a tier rule that both match apply together (prices multiply, the
// lowest cap wins). It compiles p: to evaluate many requests, Compile once.
func (p Policy) For(tags tenant.Tags, now time.Time) Effect {
	return Compile(p, now).Eval(tags.Tenant, tags.Tier).Effect()
}

// SharedVersionBase is where the versions of a shared policy begin: the
// policy a fleet's collectors read from one log in their store, whose
// Version is SharedVersionBase + changes<<16 + bumps (the log's changes,
// then the rules that expired since the last of them), above any version
// a collector reaches on its own, so that a process that fails over to
// another collector never takes the same policy for an older one.
const SharedVersionBase = 1 << 40

// VersionString names version v for people: a collector's own versions
// as they are ("42"); a shared policy's by its log's changes ("7
// (shared)"), and the expiries since the last of them ("7+2 (shared)"),
// not as the 13-digit number it is.
func VersionString(v uint64) string {
	if v < SharedVersionBase {
		return strconv.FormatUint(v, 10)
	}
	v -= SharedVersionBase
	s := strconv.FormatUint(v>>16, 10)
	if bumps := v & 0xffff; bumps > 0 {
		s += "+" + strconv.FormatUint(bumps, 10)
	}
	return s + " (shared)"
}
