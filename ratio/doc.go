// Package ratio provides latency distributions and the latency ratio:
// the P² quantile estimator, a mergeable log-bucket Histogram, sliding
// Windows of histograms, and the Signal that compares a long-window p95
// with a short-window p95.
//
// # Histogram
//
// Histogram has fixed bucket boundaries (NumBuckets = 1,154: 36 per
// octave over [2^-20 s, 2^12 s), about 0.95 µs to 68 min, plus an underflow
// and an overflow bucket) and a relative accuracy of 0.98%. Because the
// boundaries never change, a histogram made in a process, merged in the
// collector and summed by ClickHouse (Dense, as Array(UInt64) with
// sumForEach) is the same histogram: merging is exact. An observation costs
// a few nanoseconds and no allocation; it maps a value to its bucket with a
// cubic approximation of log2 on the float's bits rather than math.Log.
//
// Histogram and Window are not safe for concurrent use (callers shard or
// lock them); Signal is.
//
// # Latency ratio
//
// Signal divides the p95 over a long window (default 5 min) by the p95 over
// a short window (default 10 s). It is about 1.0 while latency is steady
// and falls toward 0.3 when latency triples: a tripling crosses the default
// threshold of 0.5 within one short window. Hysteresis (healthy again above
// 0.65) keeps it from flapping, and a minimum of 250 short-window samples
// keeps low traffic from raising false alarms.
package ratio
