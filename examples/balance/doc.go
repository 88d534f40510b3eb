// Balance is an account-balance API that sheds a stampeding herd by
// request cause and freshness, after Monzo: the requests whose client
// already holds the answer are answered 304 Not Modified without a
// backend read, only while the service is overloaded.
//
//	balance serve --collector http://127.0.0.1:7070 --sampling 10
//	balance replay --users 400 --span 4h --rate 600
//
// GET /accounts/{id}/balance goes through freshness.Shedder (outermost),
// then enforce's middleware (tier shedder → CoDel queue → RU bucket),
// then the handler, whose backend read holds one of a few slots for a
// fixed time. Every 200 carries a signed ETag with the response's hash
// and when it was computed; a client sends it back in If-None-Match with
// its reason in Qtop-Request-Cause (push-notification, app-open,
// generic-reload, interactive) and the seconds since the app opened in
// Qtop-App-Age. The freshness rules (Monzo's three by default, or the
// collector's policy) apply while CoDel or the latency ratio says the
// process is overloaded, and for 10 s after.
//
// The replay command calibrates the model of package internal/enforcesim, takes
// its trace, gives each client the copy of its last GET of the first day,
// and sends the next hours of GETs at a fixed rate through the service
// over loopback HTTP three times: without rules, with the rules in shadow
// mode (precision measured by comparing the new response's hash with the
// client's ETag) and enforced. The ledger's balances change at the
// trace's change times; the freshness middleware's clock follows the
// trace, CoDel's the wall. Its figures are in the README.
//
// The ledger lives in memory and the backend read is a fixed wait: the
// example measures what shedding saves a backend of known capacity, not
// what a database costs.
package main
