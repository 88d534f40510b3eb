// Package enforce turns what qtop finds into protection inside each
// application process: RU-priced token buckets per tenant, tier shedding
// driven by the latency ratio and CoDel admission. Every control loop is local (no remote call on the request
// path) and every rule can run in shadow mode first.
//
// # Request units
//
// A request unit prices work by what it really costs the backend (package
// [ru]: RU = base(op) + KiB × perKiB + ms × perMs, calibrated per
// deployment with the rucalib command); the enforcer charges each
// tenant's bucket with the cost of the work it did ([WithCostModel]).
//
// # Buckets
//
// [Buckets] keeps one RU token bucket per tenant (a [gcra.Atomic]),
// refilled continuously and charged after the work with its real cost. A
// bucket may go into debt, so a tenant that just ran a 100,000-row scan
// waits until refill brings it out of debt: overage is remembered, and
// Retry-After says when.
// Limits come from the tenant's [Plan] (free, pro, enterprise), an
// override, or the collector's policy; idle buckets are evicted, since a
// full bucket is the same as a new one. Every method takes the time as
// an argument.
//
// # Tiers and prices
//
// [PriceController] follows the latency ratio (p95 over a long window /
// p95 over a short one, from package ratio): when it falls, the RU price
// of T3 rises step by step until T3 is shed, then T2's, then T1's; T0 is
// never priced up nor shed. Recovery is gradual, one step per interval,
// T1 first. An [Enforcer] ties buckets, prices, plans and the collector's
// [policy.Policy] ([Enforcer.ApplyPolicy], wired to the ingest reporter's
// policy callback), and counts decisions per tier for the reporter
// ([Enforcer.Stats]).
//
// # Queues
//
// [Queue] admits queued work into a fixed number of slots with CoDel
// (RFC 8289, [CoDel]) and the adaptive wait limit of "Fail at Scale":
// waiting beyond target while a queue stands fails early with
// [ErrQueueDelay]; T0 is served first and never dropped. Fair queueing
// of background work per tenant is package fairqueue (its weights and
// caps come from [Plan]); hot-key defence is package hotkey.
//
// # HTTP
//
// [Middleware] chains tier shedder → CoDel → RU bucket → handler, answers
// 503 (shed or dropped) or 429 with Retry-After (bucket in debt), charges
// each request's real cost after the handler and exports qtop_enforce_*
// metrics ([Metrics]), per tenant only through package topn.
//
// Freshness (304s to a stampeding herd, signed ETags) is package
// freshness, which gates on an Enforcer and a Queue (WithOverloadOf).
//
// Package sim runs all of this in virtual time; its documentation has the
// figures.
package enforce
