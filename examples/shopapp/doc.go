// Shopapp is a small multi-tenant HTTP service wired with every part of qtop
// that lives in an application, and a load generator to drive it.
//
//	shopapp serve --postgres postgres://… --collector http://127.0.0.1:7070
//	shopapp load --target http://127.0.0.1:8080 --tenants 20 --noisy bigcorp
//
// Each request goes, in order, through:
//
//   - the edge: the tenant and tier from the X-Tenant and X-Tier headers,
//     checked with tenant.Tags.Validate and put in the context with
//     tenant.With. A real service takes them from authenticated data (a
//     session, a verified token), never from a header a client may set;
//     the headers stand in for that here;
//   - an OpenTelemetry server span, whose ingest.SpanProcessor records the
//     request (count, latency, bytes, errors and, through ingest.AttrRU, the
//     RU it cost) into the ingest.Recorder;
//   - enforce's middleware: tier shedder → CoDel → RU bucket → handler,
//     answering 503 when shed and 429 with Retry-After when throttled, and
//     charging the request's real cost to the tenant's bucket afterwards;
//   - the handler, whose statements go through sqlcomment over pgx's stdlib
//     driver: each carries a /*route=…,tenant=…,tier=…*/ comment, seen in
//     pg_stat_activity, and its database time goes to the recorder through
//     ingest.SQLObserver. pgxcomment.StdlibExecMode keeps the tagged texts
//     out of pgx's statement cache.
//
// An ingest.Reporter sends the recorder's window to the collector every
// second, with the enforcer's counters of the window, and hands the policy
// of each reply (throttles posted with qtop or POST /v1/policy) to
// enforce.Enforcer.ApplyPolicy.
//
// Routes: GET /products (a short indexed read), GET /reports (an aggregate
// plus a server-side pg_sleep, a heavy query), POST /catalog/import?n=N (a
// write burst of N rows in one transaction).
package main
