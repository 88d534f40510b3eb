// Package spacesaving finds the heaviest keys of a weighted stream in
// bounded memory, with a known error for every key.
//
// A [Sketch] is the Space-Saving summary of Metwally, Agrawal and El Abbadi
// (2005) with the filter of Homem and Carvalho (2010): it monitors at most
// capacity keys and, for each, reports a [Counter] whose Count bounds the
// key's true count from above and Count−Err from below. Keys too light to
// displace the least monitored one are remembered only by a small array of
// hash buckets, which keeps one-off keys from evicting the heavy ones; this
// is what keeps the recall of the top keys high at small capacities.
//
// # Guarantees
//
// For a sketch of capacity k that has seen total weight N, whether built by
// Add or by Merge of sketches of capacity k:
//
//   - Count ≥ true count, and Count − Err ≤ true count, for every key
//     reported by Top or Estimate;
//   - every key whose true count exceeds N/k is monitored.
//
// These are tested against exact counts on Zipf and adversarial streams.
//
// # Concurrency
//
// A Sketch is for one goroutine. [Concurrent] shards it for the request
// path; [Concurrent.Flush] cuts a reporting window.
//
// # Encoding
//
// [Sketch.MarshalBinary] writes a versioned encoding that any process can
// read back with [Sketch.UnmarshalBinary] and merge; malformed input is an
// error wrapping [ErrCorrupt], [ErrTruncated] or [ErrVersion].
package spacesaving
