// Package enforcesim runs the enforce package against deterministic scenarios in
// virtual time, to show what each mechanism buys and to check the claims
// made for it. Every number below is produced by this package (the tables
// of the three deterministic scenarios are checked against its output by
// TestDocTables; the storm runs real goroutines, so its table is one run
// and its test checks the bound instead).
//
// # A tenant enqueues 2,000 jobs beside small tenants
//
// Four workers take 10 ms per job. At t = 0 one tenant enqueues 2,000 jobs;
// ten small tenants each submit a job every 200 ms (staggered, off the
// workers' rhythm) for 10 s.
// Waits are queueing delays until a worker starts the job:
//
//	| queue | big tenant wait p50 / p99 / max | small tenants wait p50 / p99 / max | all done |
//	|---|---|---|---|
//	| FIFO | 2.50 s / 4.95 s / 4.99 s | 637 ms / 4.92 s / 5.00 s | 9.99 s |
//	| FairQueue | 2.85 s / 5.65 s / 5.71 s | 4 ms / 9 ms / 9 ms | 9.99 s |
//
// Under FIFO a small tenant's job waits behind the whole backlog (up to
// 5 s); the fair queue serves it at the next free worker (under 10 ms).
// That costs the big tenant about 0.7 s at the tail and takes nothing
// from the total: the same work finishes at the same time.
//
// # A hot-key storm
//
// 1,000,000 requests over 10 keys from 64 goroutines, over 30 s of virtual
// time, against a Guard with a 3 s TTL and the default threshold (3
// misses). Loads return at once, which is the worst case for coalescing
// alone (little overlaps):
//
//	| defence | requests | backend calls | per key per TTL (mean) | per key per TTL after the first window (max) |
//	|---|---|---|---|---|
//	| no guard | 1000000 | 1000000 | 10000.0 | 10000 |
//	| coalescing only | 1000000 | 974046 | 9740.5 | 10023 |
//	| hot-key guard | 1000000 | 120 | 1.2 | 1 |
//
// The guard's 120 calls are 3 per key while it detects the keys, then one
// per key per TTL window.
//
// # Overload with mixed tiers
//
// A backend serves 10,000 RU/s first come first served (plus 5 ms), 71%
// used by one T0 tenant (50 req/s × 2 RU), four T1 (300 × 3), four T2
// (200 × 3) and two T3 (50 × 10). From 20 s to 40 s the two T3 tenants
// run 100-RU scans at 100 req/s, T1 surges 1.5× and T2 2×: about three
// times capacity offered. Goodput is requests completed within 1 s over
// requests offered. Static limits allow each tenant 1.5× its normal
// requests per second; RU buckets allow 1.5× its normal RU per second,
// with the latency ratio (p95 over 60 s / p95 over 2 s) driving the tier
// prices and CoDel (5 ms / 100 ms) on lower tiers:
//
//	| protection | goodput T0 / T1 / T2 / T3 (whole run) | goodput during the spike | RU/s admitted in the spike | worst 1 s p95 | recovery after the spike |
//	|---|---|---|---|---|---|
//	| static QPS limits | 33.9% / 31.7% / 30.3% / 30.3% | 2.9% / 2.5% / 2.4% / 2.4% | 25001 | 30 s | 105 s |
//	| RU buckets + ratio shedding | 100.0% / 99.7% / 95.4% / 80.3% | 100.0% / 98.2% / 77.0% / 2.6% | 9624 | 586 ms | 1.00 s |
//
// Recovery is the time after the spike until p95 latency stays within
// twice its level before the spike (measured in whole seconds). Static
// limits count a scan like a read, so the backend queues 25 s of work
// that everyone, T0 included, waits behind. RU buckets admit at most
// capacity; the price controller sheds T3 and prices T2 up, and T0 keeps
// 100%.
//
// # Steady overload against an RU limit
//
// One tenant, limited to 1,000 RU/s (burst 1,000), 50 closed-loop clients
// offering about ten times that for 10 minutes, each request costing
// 11–29 RU known only when it completes 50 ms after admission (charged
// then, so the bucket goes into debt). The static limit is sized for the
// mean cost the plan assumed (10 RU: 100 req/s) while the real mean is 20:
//
//	| limiter | RU allowed | RU admitted | overshoot |
//	|---|---|---|---|
//	| static QPS limit (planned cost) | 600000 | 1201546 | +100.26% |
//	| RU bucket, charged after the work | 600000 | 601025 | +0.17% |
//
// Charging after the work with debt keeps admitted RU within the burst
// plus the work in flight of the configured rate.
//
// # Shedding by request cause and freshness (Monzo's table)
//
// [Freshness] models 1,000 app users over 12 days (the first is warm-up):
// each account's data changes as a Poisson process; pushes arrive as a
// Poisson process and the app fetches in the background; the user opens
// the app five times a day for 90 s on average, which makes one app-open
// GET, one reload in the first 8 s, about three interactive GETs and a
// refresh a minute. Every GET's answer becomes the client's copy. The push
// rate is calibrated so that Monzo's first rule (push-triggered, copy
// within 24 h) matches 20% of GETs, and the change rate so that its
// precision is 80%; the other rows are what the model then gives:
//
//	| rule | Monzo: share of traffic | Monzo: precision | model: share of GETs | model: precision |
//	|---|---|---|---|---|
//	| push-24h | 20.0% | 80.0% | 20.1% | 79.9% |
//	| app-open-1h | 20.0% | 95.0% | 5.5% | 94.5% |
//	| reload-10s | 7.0% | 95.0% | 13.2% | 100.0% |
//	| all rules | 50.0% | 90.0% | 38.7% | 88.8% |
//
//	calibrated: 3.16 data changes and 7.60 pushes per user per day; 416235 GETs
//
// With data changing about three times a day, the model predicts the
// app-open rule's precision (94.5% against Monzo's 95%) from the first
// row alone. Its shares follow the assumed behaviour, not Monzo's
// (fewer opens within an hour of a previous fetch, one early reload per
// session), and a Poisson change process makes a copy a few seconds old
// always right (100% against 95%). Monzo's figure says that data changes
// cluster around app use. With SessionChanges 0.1 (one session in ten
// changes the data in its first 8 s: a payment or transfer made in the
// app), the reload row comes out at Monzo's and the others barely move:
//
//	| push-24h | 20.0% | 80.0% | 20.0% | 79.8% |
//	| app-open-1h | 20.0% | 95.0% | 5.4% | 94.0% |
//	| reload-10s | 7.0% | 95.0% | 13.2% | 96.1% |
//	| all rules | 50.0% | 90.0% | 38.6% | 87.3% |
//
//	calibrated: 3.18 data changes and 7.60 pushes per user per day; 417511 GETs
package enforcesim
