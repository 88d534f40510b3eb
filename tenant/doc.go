// Package tenant says who a request is for, carried in its context.
//
// Tags are set once at the edge, from authenticated data, with [With], and
// read everywhere else with [From]. Services that receive work from other
// processes can also read the W3C baggage members tenant.id and tenant.tier
// ([FromBaggage], [Lookup]) and propagate them onward ([Baggage]).
//
// Tag values end up in SQL comments, span attributes, metric labels and
// store rows, so [Tags.Validate] checks them: a tenant or route is non-empty
// where required, capped in length, valid UTF-8 and printable.
//
// The zero [Tier] is [TierUnset]; a request whose tier nobody set is never
// silently treated as [T0] (never shed). Callers choose the default with
// [Tier.Or].
package tenant
