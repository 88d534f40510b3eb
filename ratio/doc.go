// Package ratio provides the latency ratio: the Signal that compares a
// long-window p95 with a short-window p95 (over histogram.Windows), and the
// P² quantile estimator it was chosen over. The histograms themselves are
// in package histogram.
//
// # Why the ratio uses the histogram, not P²
//
// P² is tiny and fast but neither mergeable nor bounded in error. On 2,000
// windows of 1,000 latencies each, the p95 against the exact sample p95
// (TestQuantileErrorP2VersusHistogram):
//
//	latency                                 P² median / max    Histogram median / max
//	lognormal, σ = 1                        2.7% / 56%         0.50% / 0.97%
//	lognormal σ = 0.5 + 3% Pareto(1.5) tail 11.8% / 1206%      0.49% / 0.97%
//
// bench/README.md sets it against DDSketch, HdrHistogram and P².
//
// HdrHistogram is as fast to insert into and a little more accurate, but it
// records integers over a range fixed per instance and its merge walks its
// whole array; DDSketch's buckets are not fixed across instances unless
// configured alike. Fixed, cheap, exactly mergeable buckets are what lets
// processes, the collector and ClickHouse add histograms together.
//
// # Latency ratio
//
// Signal divides the p95 over a long window (default 5 min) by the p95 over
// a short window (default 10 s). It is about 1.0 while latency is steady
// and falls toward 1/3 when latency triples: a tripling crosses the default
// threshold of 0.5 within one short window (1–6 s in the tests, by tail
// weight). Hysteresis (healthy again above 0.65) keeps it from flapping,
// and a minimum of 250 short-window samples keeps low traffic from raising
// false alarms; an hour of stationary lognormal latency never crosses.
package ratio
