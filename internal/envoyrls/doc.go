// Package envoyrls answers Envoy's rate-limit service API
// (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit, gRPC) from
// the collector's memory, so that Envoy, Istio or any gateway that speaks
// it enforces qtop's policy and fleet quotas without a Redis call per
// request.
//
// Each descriptor of a request names a tenant with the entry key
// "tenant", and optionally "route" and "tier" (T0…T3); other entries are
// ignored, and a descriptor without a tenant is answered OK. A request
// costs
//
//	RU = cost per hit × hits × the price multiplier of the tenant's rules
//
// where the cost per hit is the RU model's fixed cost of a read (1 RU by
// default; WithCost), hits is the descriptor's hits_addend, else the
// request's, else 1. A descriptor is OVER_LIMIT when
//
//   - a throttle rule matches its tenant (or its tier, when the descriptor
//     names one) and the tenant's bucket — a GCRA of the lowest matching cap
//     in RU/s and a burst of one second of it — holds less than the
//     request's RU (a cap of 0 refuses everything until the rule expires);
//   - or the fleet quota of its tenant refuses it: the Service takes part
//     in fleet quotas as a process does (Cut, Apply), so its admitted RU
//     count in the fleet's sums and its allowance is its share.
//
// Unknown tenants and tenants without a rule are OK. When every descriptor
// is OK the request is admitted and charged; otherwise nothing is charged
// and the refusal counts in the tenant's demand. Buckets are per tenant,
// not per route: a throttle caps a tenant's RU/s across its routes, so the
// route is checked and carried but does not split the bucket. Price rules
// raise the cost; the descriptor's own limit override is ignored (qtop's
// policy decides). Shadow rules — throttles, with buckets of their own,
// and fleet-quota verdicts — never change an answer: what they would have
// refused is counted (qtop_rls_shadow_over_limit_total).
//
// Each OVER_LIMIT or throttled OK status says current_limit (the cap as
// hits per second — or per minute, hour or day when below one a second —
// a hit costing one request's RU at its price), limit_remaining (whole
// hits the bucket holds now) and duration_until_reset (when a refused
// request would be admitted; for an OK one, when the bucket is full). A
// request costing more than the bucket holds is admitted when it is full,
// into debt.
//
// Hostile input is bounded: descriptors per request (MaxDescriptors),
// entries per descriptor (MaxEntries), the lengths of keys and values and
// of the domain, hits (MaxHits) and the message size; a request beyond
// them is refused with InvalidArgument and a message that says which,
// while a descriptor beyond its own bounds, or with a value that is not
// one (a tier "T9"), is answered OVER_LIMIT alone (a refused call passes
// where Envoy fails open, and such values can come from the client). The
// buckets tracked are capped (WithMaxKeys): a full bucket is evicted
// first, then any. The credential (WithAuth: gRPC metadata
// "authorization: Bearer …") is checked from the stream's headers,
// before its message is read, and so is the admission check
// (WithAdmission: the collector refuses calls while it replays its log).
//
// Use:
//
//	svc, _ := envoyrls.New(src, envoyrls.WithAuth(check), envoyrls.WithRegisterer(reg))
//	gs := grpc.NewServer(svc.ServerOptions()...)
//	svc.Register(gs)
//	go gs.Serve(ln)
//	// every reporting interval, as a process does with its reply:
//	fleet.Observe(now, "envoy-rls", time.Second, svc.Cut())
//	svc.Apply(now, fleet.Verdicts(now, "envoy-rls", nil))
//
// Only the collector links this package: Envoy's generated types are
// large, and no library package may depend on them.
package envoyrls
