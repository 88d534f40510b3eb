// Shopapp is a small multi-tenant HTTP service wired with every part of qtop
// that lives in an application, and a load generator to drive it.
//
//	shopapp serve --postgres postgres://… --collector http://127.0.0.1:7070
//	shopapp load --target http://127.0.0.1:8080 --tenants 20 --noisy bigcorp
//
// The whole instrumentation is one agent.New (see New): each route sits
// behind the agent's middleware, which takes the tenant and tier from the
// X-Tenant and X-Tier headers (agent.FromHeader; a real service takes them
// from authenticated data, never from a header a client may set), admits
// the request (tier shedder → CoDel → RU bucket), and charges and records
// it once; the database is opened with the agent's OpenDB over pgx's
// stdlib driver, so each statement carries a /*route=…,tenant=…,tier=…*/
// comment and its database time is recorded for the same tenant; the
// agent reports every second and applies the collector's policy.
//
// Routes: GET /products (a short indexed read), GET /reports (an aggregate
// plus a server-side pg_sleep, a heavy query), POST /catalog/import?n=N (a
// write burst of N rows in one transaction).
package main
