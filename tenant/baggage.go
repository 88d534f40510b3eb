package tenant

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/baggage"
)

// W3C baggage member keys.
const (
	BaggageTenant = "tenant.id"
	BaggageTier   = "tenant.tier"
)

// FromBaggage reads tenant.id and tenant.tier from b. A member that fails
// validation is an error; a missing tenant.id is ErrBaggageMissing.
func FromBaggage(b baggage.Baggage) (Tags, error) {
	m := b.Member(BaggageTenant)
	if m.Key() == "" {
		return Tags{}, ErrBaggageMissing
	}
	t := Tags{Tenant: m.Value()}
	if err := ValidateTenant(t.Tenant); err != nil {
		return Tags{}, fmt.Errorf("baggage %s: %w", BaggageTenant, err)
	}
	if tm := b.Member(BaggageTier); tm.Key() != "" {
		tier, err := ParseTier(tm.Value())
		if err != nil {
			return Tags{}, fmt.Errorf("baggage %s: %w", BaggageTier, err)
		}
		t.Tier = tier
	}
	return t, nil
}

// Baggage returns b with tenant.id and, when set, tenant.tier replaced by
// the values of t. Values are percent-encoded by the baggage package, so
// any printable tenant survives the round trip.
func Baggage(b baggage.Baggage, t Tags) (baggage.Baggage, error) {
	if err := ValidateTenant(t.Tenant); err != nil {
		return b, err
	}
	m, err := baggage.NewMemberRaw(BaggageTenant, t.Tenant)
	if err != nil {
		return b, fmt.Errorf("tenant: baggage member: %w", err)
	}
	if b, err = b.SetMember(m); err != nil {
		return b, fmt.Errorf("tenant: baggage: %w", err)
	}
	if t.Tier.Valid() {
		m, err := baggage.NewMemberRaw(BaggageTier, t.Tier.String())
		if err != nil {
			return b, fmt.Errorf("tenant: baggage member: %w", err)
		}
		if b, err = b.SetMember(m); err != nil {
			return b, fmt.Errorf("tenant: baggage: %w", err)
		}
	}
	return b, nil
}

// WithBaggage stores t in ctx with With and also in the context's OTel
// baggage, so that propagators send tenant.id and tenant.tier downstream.
func WithBaggage(ctx context.Context, t Tags) (context.Context, error) {
	b, err := Baggage(baggage.FromContext(ctx), t)
	if err != nil {
		return ctx, err
	}
	return baggage.ContextWithBaggage(With(ctx, t), b), nil
}

// Lookup returns the tags of ctx: those set by With, or else those in the
// context's OTel baggage. Invalid baggage counts as absent.
func Lookup(ctx context.Context) (Tags, bool) {
	if t, ok := From(ctx); ok {
		return t, true
	}
	if ctx == nil {
		return Tags{}, false
	}
	t, err := FromBaggage(baggage.FromContext(ctx))
	return t, err == nil
}
