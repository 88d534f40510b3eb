// Package ratio provides latency distributions and the latency ratio: the
// P² quantile estimator, a mergeable log-bucket Histogram, sliding Windows
// of histograms, and the Signal that compares a long-window p95 with a
// short-window p95.
//
// # Histogram
//
// Histogram has fixed bucket boundaries: NumBuckets = 1,154, that is 36
// per octave over [2^-20 s, 2^12 s) (about 0.95 µs to 68 min, covering 1 µs
// … 1 h) plus an underflow and an overflow bucket, with a relative accuracy
// of 0.98% (RelativeAccuracy). A value maps to its bucket through a cubic
// approximation of log2 on the float's bits (as DDSketch's cubically
// interpolated mapping), not math.Log: a few nanoseconds, no allocation,
// and the same bucket on every platform. Because the boundaries never
// change, a histogram made in a process, merged in the collector and summed
// by ClickHouse (Dense as Array(UInt64), merged with sumForEach, which a
// test checks against a real server) is one and the same histogram: merges
// are exact. 1,154 is the fewest buckets that cover 1 µs … 1 h at 1% with a
// power-of-two range; a logarithmic mapping would save 1% of them.
//
// Bucket counts are also kept per group of 64 buckets, so a quantile query
// finds its group in at most 19 steps and its bucket in at most 64, so a
// p95 costs the same whatever the data, and a 5-minute Window of 30 slots
// answers without merging its slots.
//
// # Sparse
//
// Sparse is the same histogram keeping only its non-empty buckets (a
// bitmap index and the counts): what a report row, a collector's rollup
// and a store's row hold, as a row of one tenant touches a few dozen of
// the 1,154 buckets. Load and AddHistogram take a Histogram's buckets,
// Merge adds two exactly, AppendPairs and SetPairs give and take the
// (index, count) pairs ClickHouse keeps, and Quantile reads the same
// bucket a Histogram's would. Its counts saturate instead of wrapping.
//
// Histogram, Sparse and Window are not safe for concurrent use: callers
// shard or lock them. Signal is safe for concurrent use.
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
