package tenant

import (
	"context"
	"fmt"
	"strings"

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
	return fromMembers(b.Member(BaggageTenant), b.Member(BaggageTier))
}

func fromMembers(m, tm baggage.Member) (Tags, error) {
	if m.Key() == "" {
		return Tags{}, ErrBaggageMissing
	}
	t := Tags{Tenant: m.Value()}
	if err := ValidateTenant(t.Tenant); err != nil {
		return Tags{}, fmt.Errorf("baggage %s: %w", BaggageTenant, err)
	}
	if tm.Key() != "" {
		tier, err := ParseTier(tm.Value())
		if err != nil {
			return Tags{}, fmt.Errorf("baggage %s: %w", BaggageTier, err)
		}
		t.Tier = tier
	}
	return t, nil
}

// What FromBaggageHeader reads of a baggage header, at most: its first
// MaxBaggageBytes bytes and MaxBaggageMembers members, whichever ends
// first. W3C Baggage asks that at least 64 members and 8192 bytes be
// passed on; OpenTelemetry's parser refuses a header beyond either.
const (
	MaxBaggageBytes   = 8192
	MaxBaggageMembers = 180
)

// FromBaggageHeader reads tenant.id and tenant.tier from the values of a
// request's W3C baggage header (http.Header.Values("Baggage"): several
// values are one list), as FromBaggage reads them from parsed baggage,
// without parsing the other members: a header that OpenTelemetry's parser
// refuses as a whole (more than 64 members or 8192 bytes, one malformed
// member) still gives its tenant. The header comes from outside, so only
// its first MaxBaggageBytes bytes and MaxBaggageMembers members are read
// (a member not wholly within them counts as absent), and it allocates
// only for the two members it parses.
//
// Of several tenant.id (or tenant.tier) members the last wins, as in
// OpenTelemetry. Each of the two is parsed as OpenTelemetry parses a
// member (percent-decoding, properties): a malformed tenant.id member is
// ErrBaggageMalformed, a malformed tenant.tier one ErrTier; values are
// validated as FromBaggage validates them; no tenant.id is
// ErrBaggageMissing.
func FromBaggageHeader(values []string) (Tags, error) {
	tn, tier := scanBaggage(values)
	if tn == "" {
		return Tags{}, ErrBaggageMissing
	}
	b, err := baggage.Parse(tn)
	if err != nil {
		return Tags{}, fmt.Errorf("%w: %s (%d bytes)", ErrBaggageMalformed, BaggageTenant, len(tn))
	}
	var tm baggage.Member
	if tier != "" {
		bt, err := baggage.Parse(tier)
		if err != nil {
			return Tags{}, fmt.Errorf("%w: malformed baggage member %s (%d bytes)", ErrTier, BaggageTier, len(tier))
		}
		tm = bt.Member(BaggageTier)
	}
	return fromMembers(b.Member(BaggageTenant), tm)
}

// scanBaggage returns the last tenant.id and tenant.tier members (as sent)
// among the first MaxBaggageMembers members within the first
// MaxBaggageBytes bytes of the list that values make.
func scanBaggage(values []string) (tn, tier string) {
	budget, members := MaxBaggageBytes, 0
	for i, v := range values {
		if i > 0 {
			budget-- // the comma that joins two values into one list
		}
		if budget <= 0 {
			return tn, tier
		}
		cut := len(v) > budget
		if cut {
			v = v[:budget]
		}
		budget -= len(v)
		for {
			m, rest, more := strings.Cut(v, ",")
			if !more && cut {
				return tn, tier // the member runs past the bytes read
			}
			if members++; members > MaxBaggageMembers {
				return tn, tier
			}
			key := m
			if j := strings.IndexAny(key, "=;"); j >= 0 {
				key = key[:j]
			}
			switch strings.TrimSpace(key) {
			case BaggageTenant:
				tn = m
			case BaggageTier:
				tier = m
			}
			if !more {
				break
			}
			v = rest
		}
	}
	return tn, tier
}

// Baggage returns b with tenant.id and tenant.tier replaced by the values
// of t; without a tier in t, b's tenant.tier is dropped (it came with the
// request, not from where t was read, and would tell the next hop a tier
// nobody vouched for). Values are percent-encoded by the baggage package,
// so any printable tenant survives the round trip.
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
	} else {
		b = b.DeleteMember(BaggageTier)
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
