package envoyrls

import (
	"errors"
	"fmt"
	"unicode/utf8"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/qtop-dev/qtop/tenant"
)

// Bounds of a request; beyond them it is refused with InvalidArgument,
// but for a descriptor's own (its entries, their values, its
// hits_addend), beyond which that descriptor alone is answered
// OVER_LIMIT.
const (
	// MaxDescriptors bounds the descriptors of one request.
	MaxDescriptors = 32
	// MaxEntries bounds the entries of one descriptor.
	MaxEntries = 16
	// MaxKeyLen bounds an entry's key, MaxValueLen any value that is not
	// a tenant or a route (which have tenant.MaxTenantLen and
	// tenant.MaxRouteLen), MaxDomainLen the domain.
	MaxKeyLen    = 64
	MaxValueLen  = 512
	MaxDomainLen = 256
	// MaxHits bounds hits_addend.
	MaxHits = 1 << 20
	// MaxMessageBytes bounds the encoded request.
	MaxMessageBytes = 64 << 10
)

// The entry keys this package reads.
const (
	KeyTenant = "tenant"
	KeyRoute  = "route"
	KeyTier   = "tier"
)

// ErrInvalid reports a request beyond the bounds or with a bad value;
// test with errors.Is. The gRPC answer is InvalidArgument.
var ErrInvalid = errors.New("envoyrls: invalid request")

// descriptor is one descriptor as this package reads it.
type descriptor struct {
	tags     tenant.Tags // Tenant empty: not ours, answered OK
	hits     uint64
	negative bool
	// bad says why the descriptor cannot be read (a tier that is not
	// one, a tenant name that is not valid): it alone is answered
	// OVER_LIMIT.
	bad error
}

// parse checks req against the bounds and reads its descriptors into dst.
func parse(req *rlsv3.RateLimitRequest, dst []descriptor) ([]descriptor, error) {
	if req == nil {
		return dst, fmt.Errorf("%w: no request", ErrInvalid)
	}
	if len(req.Domain) > MaxDomainLen {
		return dst, fmt.Errorf("%w: domain is %d bytes, at most %d", ErrInvalid, len(req.Domain), MaxDomainLen)
	}
	if n := len(req.Descriptors); n == 0 || n > MaxDescriptors {
		return dst, fmt.Errorf("%w: %d descriptors, want 1 to %d", ErrInvalid, n, MaxDescriptors)
	}
	if req.HitsAddend > MaxHits {
		return dst, fmt.Errorf("%w: hits_addend %d, at most %d", ErrInvalid, req.HitsAddend, MaxHits)
	}
	hits := uint64(max(req.HitsAddend, 1))
	for i, d := range req.Descriptors {
		pd, err := parseDescriptor(d, hits)
		if err != nil {
			// Refused alone: its values may come from the client (Envoy
			// builds a tier from a request header), and a refused call is
			// let through where Envoy fails open (failure_mode_deny
			// false), so a bad value must not pass for no answer.
			pd = descriptor{bad: fmt.Errorf("%w: descriptor %d: %w", ErrInvalid, i, err)}
		}
		dst = append(dst, pd)
	}
	return dst, nil
}

func parseDescriptor(d *rlcommon.RateLimitDescriptor, hits uint64) (descriptor, error) {
	out := descriptor{hits: hits}
	if d == nil {
		return out, errors.New("empty")
	}
	if n := len(d.Entries); n == 0 || n > MaxEntries {
		return out, fmt.Errorf("%d entries, want 1 to %d", n, MaxEntries)
	}
	if d.HitsAddend != nil {
		if v := d.HitsAddend.GetValue(); v > MaxHits {
			return out, fmt.Errorf("hits_addend %d, at most %d", v, MaxHits)
		} else if v > 0 {
			out.hits = v
		}
	}
	out.negative = d.IsNegativeHits
	var seenTier bool
	for _, e := range d.Entries {
		if e == nil {
			return out, errors.New("an empty entry")
		}
		if len(e.Key) > MaxKeyLen || !utf8.ValidString(e.Key) {
			return out, fmt.Errorf("entry key of %d bytes (want valid UTF-8, at most %d)", len(e.Key), MaxKeyLen)
		}
		if err := out.entry(e.Key, e.Value, &seenTier); err != nil {
			return out, err
		}
	}
	if out.tags.Tenant == "" && (out.tags.Route != "" || seenTier) {
		return out, errors.New("route or tier without a tenant entry")
	}
	return out, nil
}

// entry reads one entry into d.
func (d *descriptor) entry(key, value string, seenTier *bool) error {
	dup := func() error { return fmt.Errorf("entry %q given twice", key) }
	switch key {
	case KeyTenant:
		if d.tags.Tenant != "" {
			return dup()
		}
		if err := tenant.ValidateTenant(value); err != nil {
			return err
		}
		d.tags.Tenant = tenant.Escape(value) // never the overflow row's name
	case KeyRoute:
		if d.tags.Route != "" {
			return dup()
		}
		if err := tenant.ValidateRoute(value); err != nil {
			return err
		}
		d.tags.Route = value
	case KeyTier:
		if *seenTier {
			return dup()
		}
		t, err := tenant.ParseTier(value)
		if err != nil || t == tenant.TierUnset {
			return fmt.Errorf("tier %.32q: want T0, T1, T2 or T3", value)
		}
		d.tags.Tier, *seenTier = t, true
	default:
		if len(value) > MaxValueLen {
			return fmt.Errorf("entry %q: value of %d bytes, at most %d", key, len(value), MaxValueLen)
		}
	}
	return nil
}
