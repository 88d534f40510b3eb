package tenant

import (
	"fmt"
	"strings"
)

// Tier is a request's criticality. T0 is the most critical (customer
// support, trust and safety) and is never shed; T3 is the least critical
// and is shed first. The zero value is TierUnset.
type Tier uint8

// The tiers, from most to least critical.
const (
	TierUnset Tier = iota
	T0
	T1
	T2
	T3
)

// NumTiers is the number of real tiers, T0 to T3.
const NumTiers = 4

var tierNames = [...]string{"", "T0", "T1", "T2", "T3"}

// String returns "T0" … "T3", or "" for TierUnset.
func (t Tier) String() string {
	if int(t) < len(tierNames) {
		return tierNames[t]
	}
	return fmt.Sprintf("Tier(%d)", uint8(t))
}

// Valid reports whether t is one of T0 … T3.
func (t Tier) Valid() bool { return t >= T0 && t <= T3 }

// Or returns t, or def when t is TierUnset.
func (t Tier) Or(def Tier) Tier {
	if t == TierUnset {
		return def
	}
	return t
}

// Index returns 0 for T0 … 3 for T3, for arrays indexed by tier.
// It returns -1 for an unset or invalid tier.
func (t Tier) Index() int {
	if !t.Valid() {
		return -1
	}
	return int(t - T0)
}

// ParseTier accepts "T0" … "T3", "t0" … "t3" and "0" … "3". The empty string
// parses as TierUnset.
//
// The error quotes the value as given, cut to maxTierQuote bytes: a tier
// comes from outside (a header, a claim), and an error may be answered to
// its sender.
func ParseTier(s string) (Tier, error) {
	given := s
	s = strings.TrimSpace(s)
	if s == "" {
		return TierUnset, nil
	}
	if len(s) == 2 && (s[0] == 'T' || s[0] == 't') {
		s = s[1:]
	}
	if len(s) == 1 && s[0] >= '0' && s[0] <= '3' {
		return T0 + Tier(s[0]-'0'), nil
	}
	if len(given) > maxTierQuote {
		q, _ := Clean(given, maxTierQuote) // cut at a rune boundary
		return TierUnset, fmt.Errorf("%w: %q… (%d bytes; want T0, T1, T2 or T3)", ErrTier, q, len(given))
	}
	return TierUnset, fmt.Errorf("%w: %q (want T0, T1, T2 or T3)", ErrTier, given)
}

// maxTierQuote bounds the part of a bad tier that ParseTier's error quotes.
const maxTierQuote = 16

// MarshalText implements encoding.TextMarshaler.
func (t Tier) MarshalText() ([]byte, error) {
	if t != TierUnset && !t.Valid() {
		return nil, fmt.Errorf("%w: %d", ErrTier, uint8(t))
	}
	return []byte(t.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (t *Tier) UnmarshalText(b []byte) error {
	v, err := ParseTier(string(b))
	if err != nil {
		return err
	}
	*t = v
	return nil
}
