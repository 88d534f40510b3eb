package policy

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Cause is why a client made a request, as it says in its cause header
// (freshness.HeaderCause). Only the three named causes can be shed by
// freshness rules; an unknown or missing cause is Interactive, never shed.
type Cause string

// The causes a client may send, compared case-insensitively.
const (
	CauseInteractive Cause = "interactive"
	CausePush        Cause = "push-notification"
	CauseAppOpen     Cause = "app-open"
	CauseReload      Cause = "generic-reload"
)

// MaxCauseLen bounds a cause header that is still looked at; a longer one
// is Interactive.
const MaxCauseLen = 32

// ParseCause returns the cause s names, case-insensitively and with
// surrounding spaces ignored; anything else (empty, unknown, too long) is
// CauseInteractive.
func ParseCause(s string) Cause {
	if len(s) > MaxCauseLen {
		return CauseInteractive
	}
	s = strings.TrimSpace(s)
	for _, c := range [...]Cause{CausePush, CauseAppOpen, CauseReload} {
		if strings.EqualFold(s, string(c)) {
			return c
		}
	}
	return CauseInteractive
}

// Sheddable reports whether freshness rules may shed requests of cause c.
func (c Cause) Sheddable() bool {
	return c == CausePush || c == CauseAppOpen || c == CauseReload
}

// MaxFreshnessRules bounds the freshness rules of a policy (each is a
// label value of the freshness metrics).
const MaxFreshnessRules = 16

// FreshnessRule sheds a GET whose client already holds a recent answer:
// it matches a request of Cause whose If-None-Match ETag was computed at
// most MaxAgeSeconds ago (0: any age) and whose app has been open at most
// MaxAppAgeSeconds (0: any app age; else the app-age header is required).
// A matched request is answered 304 Not Modified with the client's own
// ETag, without running the handler — or, in Shadow mode, the handler
// runs and the new response's hash is compared with the ETag's, which
// measures the rule's precision.
type FreshnessRule struct {
	ID               string  `json:"id"`
	Cause            Cause   `json:"cause"`
	MaxAgeSeconds    float64 `json:"max_age_seconds,omitempty"`
	MaxAppAgeSeconds float64 `json:"max_app_age_seconds,omitempty"`
	// Route limits the rule to one route (the middleware's route name);
	// empty: every route.
	Route  string `json:"route,omitempty"`
	Shadow bool   `json:"shadow,omitempty"`
}

// Freshness is the freshness-shedding part of a policy. Rules are ordered
// by customer impact, least first; the first Batch of them are armed.
// Armed rules apply only while a process is overloaded (its latency-ratio
// signal or CoDel says so), or at once while Force is set and ForceUntil
// has not passed (an operator enabling a batch by hand). Shadow rules are
// judged whenever they are armed, overload or not, so their precision is
// known before they are needed.
type Freshness struct {
	Rules      []FreshnessRule `json:"rules"`
	Batch      int             `json:"batch"`
	Force      bool            `json:"force,omitempty"`
	ForceUntil time.Time       `json:"force_until,omitzero"`
	Reason     string          `json:"reason,omitempty"`
	UpdatedBy  string          `json:"updated_by,omitempty"`
}

// Armed returns the first Batch rules.
func (f *Freshness) Armed() []FreshnessRule {
	if f == nil {
		return nil
	}
	return f.Rules[:min(max(f.Batch, 0), len(f.Rules))]
}

// Forced reports whether the armed rules apply at now regardless of load.
func (f *Freshness) Forced(now time.Time) bool {
	return f != nil && f.Force && now.Before(f.ForceUntil)
}

// Validate checks one rule.
func (r FreshnessRule) Validate() error {
	bound := func(v float64) bool { return v >= 0 && !math.IsInf(v, 0) && !math.IsNaN(v) }
	switch {
	case r.ID == "" || len(r.ID) > 64:
		return fmt.Errorf("%w: freshness rule id must be 1 to 64 bytes", ErrInvalid)
	case !r.Cause.Sheddable():
		return fmt.Errorf("%w: freshness rule %s: cause %q (want %q, %q or %q; interactive requests are never shed)",
			ErrInvalid, r.ID, r.Cause, CausePush, CauseAppOpen, CauseReload)
	case !bound(r.MaxAgeSeconds) || !bound(r.MaxAppAgeSeconds):
		return fmt.Errorf("%w: freshness rule %s: bounds must be finite numbers ≥ 0", ErrInvalid, r.ID)
	case r.MaxAgeSeconds == 0 && r.MaxAppAgeSeconds == 0:
		return fmt.Errorf("%w: freshness rule %s: needs max_age_seconds or max_app_age_seconds", ErrInvalid, r.ID)
	case len(r.Route) > 256:
		return fmt.Errorf("%w: freshness rule %s: route longer than 256 bytes", ErrInvalid, r.ID)
	}
	return nil
}

// Validate checks the rules, their IDs' uniqueness and the batch.
func (f *Freshness) Validate() error {
	if f == nil {
		return nil
	}
	if len(f.Rules) > MaxFreshnessRules {
		return fmt.Errorf("%w: %d freshness rules, at most %d", ErrInvalid, len(f.Rules), MaxFreshnessRules)
	}
	seen := make(map[string]bool, len(f.Rules))
	for _, r := range f.Rules {
		if err := r.Validate(); err != nil {
			return err
		}
		if seen[r.ID] {
			return fmt.Errorf("%w: freshness rule id %q twice", ErrInvalid, r.ID)
		}
		seen[r.ID] = true
	}
	switch {
	case f.Batch < 0 || f.Batch > len(f.Rules):
		return fmt.Errorf("%w: freshness batch %d (want 0 to %d, the number of rules)", ErrInvalid, f.Batch, len(f.Rules))
	case f.Force && f.ForceUntil.IsZero():
		return fmt.Errorf("%w: freshness force needs force_until (an override never lasts for ever)", ErrInvalid)
	case len(f.Reason) > 1024:
		return fmt.Errorf("%w: freshness reason longer than 1024 bytes", ErrInvalid)
	}
	return checkText("freshness reason", f.Reason, "freshness updated_by", f.UpdatedBy)
}

// MonzoRules returns the three rules of Monzo's stampeding-herd shedding,
// in their order of customer impact: a push-triggered request whose copy
// was computed within 24 h, an app-open request within 1 h, and a reload
// within the first 10 s of the app being open.
func MonzoRules() []FreshnessRule {
	return []FreshnessRule{
		{ID: "push-24h", Cause: CausePush, MaxAgeSeconds: 24 * 3600},
		{ID: "app-open-1h", Cause: CauseAppOpen, MaxAgeSeconds: 3600},
		{ID: "reload-10s", Cause: CauseReload, MaxAppAgeSeconds: 10},
	}
}
