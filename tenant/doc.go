// Package tenant says who a request is for, carried in its context.
//
// Tags are set once at the edge, from authenticated data, with [With], and
// read everywhere else with [From]. Services that receive work from other
// processes can also read the W3C baggage members tenant.id and tenant.tier
// ([FromBaggage], [Lookup]; from a request's header, [FromBaggageHeader],
// which finds them even in a header OpenTelemetry's parser refuses as a
// whole, reading a bounded part of it) and propagate them onward ([Baggage]).
//
// Tag values end up in SQL comments, span attributes, metric labels and
// store rows, so [Tags.Validate] checks them: a tenant or route is non-empty
// where required, capped in length, valid UTF-8 and printable.
//
// One rule names tenants, wherever load enters qtop: [ValidateTenant], at
// most [MaxTenantLen] (128) bytes of printable UTF-8, not in parentheses
// (qtop's own rows, like [Untagged]). A door that can refuse refuses any
// other name: the agent answers 400. A door that cannot (OpenTelemetry
// spans, sampled PostgreSQL sessions) records it under its stand-in,
// [Substitute]: a printable prefix and a hash of the whole name, the same
// in every process, so that a bad name's load is billed apart from every
// other tenant's, and counted. A tenant named [Other], like the overflow
// row of every top N, is counted under its stand-in too ([Escape]), so
// that row only ever holds the tenants beyond the N.
//
// The zero [Tier] is [TierUnset]; a request whose tier nobody set is never
// silently treated as [T0] (never shed). Callers choose the default with
// [Tier.Or].
package tenant
