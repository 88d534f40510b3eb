// Package agent instruments a Go service for qtop in one call: it finds
// each request's tenant, admits it (tier shedding, CoDel, the tenant's RU
// bucket), charges its real cost, records it, comments and times its SQL
// per tenant, and ships it all to the collector, applying the policy that
// comes back. It is to qtop what otelhttp is to OpenTelemetry.
//
// # Five-minute start
//
//	a, err := agent.New(
//		agent.WithCollector("http://collector:7070", os.Getenv("QTOP_TOKEN")),
//		agent.WithService("shop"),
//		agent.WithTenant(agent.FromHeader("X-Tenant", "X-Tier")), // set by your edge
//	)
//	if err != nil { ... }
//	defer a.Shutdown(context.Background())
//
//	db, err := a.OpenDB("pgx", dsn)              // database/sql (import _ "github.com/jackc/pgx/v5/stdlib"): comments + DB time per tenant
//	// or: pdb, pool, err := a.OpenPgxPool(ctx, cfg) // pgx: the same, and pool wait per tenant
//	http.ListenAndServe(":8080", a.Handler(mux)) // tenant, admission, charge, one record per request
//
// Then `qtop` shows the service's tenants: RU, DB time, pool wait and what
// the enforcer admitted, throttled, shed and dropped. The repository's
// README.md has the same as a whole program, which a test runs.
//
// Wrap the whole ServeMux, or each route (mux.Handle(pattern,
// a.Handler(h))) to have the route in SQL comments as well as in the
// records.
//
// # Tenants
//
// WithTenant takes a TenantFunc; FromHeader (from a trusted edge),
// FromJWT (an HS256 token verified with your key; other algorithms are
// refused, verify those in your own middleware and use FromContext),
// FromPathSegment, FromBaggage (from an upstream service) and FirstOf
// cover the usual cases. The tags are validated, then put in the
// request's context, where the SQL wrappers, Job and Transport find them.
//
// # Calls out, background work, tracing
//
// Transport sends the tenant to downstream services as W3C baggage. Job
// runs one background job as the tenant's (admitted, charged, recorded);
// NewWorkers runs a pool of them over a fair queue weighted by plan.
// WithTracerProvider adds a server span per request and tags every span
// of the provider with its tenant; WithBaggage also puts the tenant in
// the context's OTel baggage for other instrumentation.
//
// A handler that goes on as a long-lived stream (server-sent events, a
// WebSocket) calls Streaming once it has answered: its latency is charged
// up to there and its admission slot given back.
//
// Everything the agent does can run in shadow mode first (WithShadow):
// decided, counted and reported, not applied.
package agent
