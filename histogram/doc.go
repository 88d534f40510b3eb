// Package histogram holds the latency histograms every part of qtop shares:
// Histogram, a mergeable log-bucket histogram with fixed boundaries; Sparse,
// the same histogram keeping only its non-empty buckets (what a report row
// and a stored rollup hold); and Window, a sliding window of histograms.
// The latency ratio built on them is in package ratio.
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
package histogram
