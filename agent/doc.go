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
// FromJWT, FromJWTWith and FromJWKS (a verified JSON Web Token, below),
// FromPathSegment, FromBaggage (from an upstream service) and FirstOf
// cover the usual cases. The tags are validated, then put in the
// request's context, where the SQL wrappers, Job and Transport find them.
//
// # JSON Web Tokens
//
// FromJWT(key, tenantClaim, tierClaim) verifies HS256 tokens under a
// shared key. FromJWTWith takes options: WithHMACKey (HS256),
// WithPublicKey(kid, key) for RS256 (*rsa.PublicKey, 2048 bits or more),
// ES256 (*ecdsa.PublicKey on P-256) and EdDSA (ed25519.PublicKey), several
// kids for a rotation; WithClaims, WithAudience, WithIssuer, WithLeeway
// (clock skew on exp and nbf) and WithJWTClock. Only the algorithms of
// the given keys are accepted: "none" never, and a public key is never
// used as an HMAC secret (key confusion).
//
//	tf, err := agent.FromJWKS(ctx, "https://id.example.com/.well-known/jwks.json",
//		agent.WithClaims("org_id", ""), agent.WithAudience("orders-api"),
//		agent.WithIssuer("https://id.example.com/"), agent.WithLeeway(30*time.Second))
//
// FromJWKS follows an identity provider's JSON Web Key Set: the key of a
// token is chosen by its kid (RS256, ES256, EdDSA; symmetric keys of the
// set are ignored). The set is fetched at once, then every
// DefaultJWKSRefresh (WithJWKSRefresh) in the background until ctx ends,
// and again when a token names a kid the set does not hold — at most once
// per DefaultJWKSUnknownKID, so a flood of made-up kids costs the
// provider nothing; such tokens are refused without waiting. A response
// over MaxJWKSBytes, an error status or an unreachable provider is logged
// (WithJWKSLogger) and the last keys are kept. Verification is done by
// github.com/golang-jwt/jwt/v5 and the set by
// github.com/MicahParks/keyfunc/v3.
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
