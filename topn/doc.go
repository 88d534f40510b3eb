// Package topn bounds cardinality: it names at most N members of a
// ranking and folds everyone else into one "other" row, with exact totals.
//
// A [Ranking] adds up several measures per key ([DBTime], [RU], [Requests],
// [Errors], [Bytes]) and ranks keys by one of them. The first N keys seen
// become members at once; after that, membership changes only at
// [Ranking.Rerank] (or [Ranking.Cut]), when a challenger found by
// Space-Saving sketches outranks the weakest member by a margin, and that
// member has served a minimum tenure. Scores are sums over the last few
// reranks (members exactly, challengers by their sketch lower bounds), so
// one quiet interval does not cost a member its place. The margin, the
// tenure and this smoothing are the hysteresis that keeps a tenant near
// the cut from flapping in and out of Prometheus series.
//
// Every unit of load is counted exactly once: in the row of the member it
// belongs to if that key is a member when it is added, otherwise in
// "other". The rows of a window therefore always add up to the window's
// total, whatever the number of keys; only the choice of members is
// approximate.
//
// [NewCollector] exports the ranking to Prometheus as one series per member
// plus "other" for each metric family the caller names, so a metric never
// has more than N+1 series.
//
// # Cost
//
// Memory is N members plus, per interval of the smoothing ring (default
// 3), a sketch of max(8N, 64) counters of about 100 bytes each. Add takes one lock, one map lookup and, for non-members,
// one sketch update, without allocating (BenchmarkAdd; its time is in
// bench/README.md). Rerank sorts the sketch once per interval.
package topn
