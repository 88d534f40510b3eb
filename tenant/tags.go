package tenant

import (
	"context"
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// Length caps, in bytes, for tag values.
const (
	MaxTenantLen = 128
	MaxRouteLen  = 256
	MaxKeyLen    = 512
)

// Errors returned by validation and parsing; test with errors.Is.
var (
	ErrEmpty          = errors.New("tenant: empty value")
	ErrTooLong        = errors.New("tenant: value too long")
	ErrInvalidUTF8    = errors.New("tenant: value is not valid UTF-8")
	ErrNotPrintable   = errors.New("tenant: value has a non-printable character")
	ErrReserved       = errors.New("tenant: reserved name")
	ErrTier           = errors.New("tenant: invalid tier")
	ErrBaggageMissing = errors.New("tenant: no tenant.id in baggage")
	// ErrBaggageMalformed: the baggage member tenant.id cannot be read
	// (FromBaggageHeader).
	ErrBaggageMalformed = errors.New("tenant: malformed baggage member")
)

// Tags say who a unit of work is for.
type Tags struct {
	// Tenant is the customer the work is done for; required.
	Tenant string
	// Route names the operation, e.g. "GET /reports"; optional.
	Route string
	// Tier is the request's criticality; TierUnset lets the enforcer choose.
	Tier Tier
	// Key is the resource the work touches (a cache or storage key), for
	// hot-key detection; optional.
	Key string
}

// Validate checks every field: the tenant is required; all values are
// capped in length, valid UTF-8 and printable; the tier is unset or valid.
func (t Tags) Validate() error {
	if err := ValidateTenant(t.Tenant); err != nil {
		return err
	}
	if t.Route != "" {
		if err := ValidateRoute(t.Route); err != nil {
			return err
		}
	}
	if t.Key != "" {
		if err := validate("key", t.Key, MaxKeyLen); err != nil {
			return err
		}
	}
	if t.Tier != TierUnset && !t.Tier.Valid() {
		return fmt.Errorf("%w: %d", ErrTier, uint8(t.Tier))
	}
	return nil
}

// ValidateTenant checks a tenant identifier: non-empty, at most
// MaxTenantLen bytes, printable UTF-8.
//
// A name in parentheses, like Untagged, is reserved for qtop's own rows:
// no tenant can be mistaken for them.
func ValidateTenant(s string) error {
	if err := validate("tenant", s, MaxTenantLen); err != nil {
		return err
	}
	if Reserved(s) {
		return fmt.Errorf("%w: tenant %q (names in parentheses are qtop's own, like %s)", ErrReserved, s, Untagged)
	}
	return nil
}

// Untagged is the name of the load that carried no tenant, wherever qtop
// aggregates by tenant (reports, the live view, the store, cost reports).
// It is reserved: ValidateTenant refuses it, so a tenant's load is never
// merged with the untagged load.
const Untagged = "(untagged)"

// Reserved reports whether s is one of qtop's own names (in parentheses).
func Reserved(s string) bool {
	return len(s) >= 2 && s[0] == '(' && s[len(s)-1] == ')'
}

// ValidateRoute checks a route: non-empty, at most MaxRouteLen bytes,
// printable UTF-8.
func ValidateRoute(s string) error { return validate("route", s, MaxRouteLen) }

func validate(field, s string, max int) error {
	if s == "" {
		return fmt.Errorf("%w: %s is required", ErrEmpty, field)
	}
	if len(s) > max {
		return fmt.Errorf("%w: %s is %d bytes, at most %d allowed", ErrTooLong, field, len(s), max)
	}
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size <= 1 {
				return fmt.Errorf("%w: %s at byte %d", ErrInvalidUTF8, field, i)
			}
		}
		if !unicode.IsPrint(r) {
			return fmt.Errorf("%w: %s has %U at byte %d", ErrNotPrintable, field, r, i)
		}
	}
	return nil
}

type ctxKey struct{}

// With returns a copy of ctx carrying t. Call it once at the edge with tags
// taken from authenticated data; it does not validate them (call
// Tags.Validate first when they come from outside). A tenant named
// Untagged is carried as its stand-in (Substitute), the name every door
// gives it: a recorder would count it as its own untagged load, and the
// sampler its sessions under the stand-in, the same load twice.
func With(ctx context.Context, t Tags) context.Context {
	if t.Tenant == Untagged {
		t.Tenant, _ = Substitute(t.Tenant)
	}
	return context.WithValue(ctx, ctxKey{}, &t)
}

// From returns the tags stored in ctx by With. It does not allocate.
func From(ctx context.Context) (Tags, bool) {
	if ctx == nil {
		return Tags{}, false
	}
	p, ok := ctx.Value(ctxKey{}).(*Tags)
	if !ok || p == nil {
		return Tags{}, false
	}
	return *p, true
}
