// Package report is the wire contract between the processes qtop meters
// and the collector: the report a process sends per window ([Report]: its
// source, sequence, window, tenant × route × kind rows, hot keys,
// enforcement counters and optional sections), its binary codec and
// limits, and the collector's [Reply].
//
// Features add what they report as a [Section], each defined once by the
// feature's package (quota usage by package quota, freshness by package
// freshness, database budgets by package budget; the enforcement detail
// is this package's own). A [Decoder] is built with the section types it
// knows ([NewDecoder]) and skips the others; [SectionOf] reads a report's
// section by type. [Consumer] is what takes reports (the collector's
// Consume), with typed errors: a [RetryableError] carries its delay,
// anything else is for good.
//
// # Protocol
//
// A reporter (package meter) POSTs each report to the collector's
// /v1/reports with Content-Type [ContentType] and, with a token,
// "Authorization: Bearer …". The collector answers with a JSON [Reply]
// (EncodeReply; its policy and quota verdicts are JSON of packages policy
// and quota), whatever the status:
//
//	200  merged, or a duplicate of a merged (Source.Instance, Seq): drop it
//	     silently and still answer 200
//	400  Decode failed (ErrMalformed, ErrRange: a value above the
//	     bounds of MaxCount and its kin, ErrVersion: say "upgrade the
//	     collector" in Message); 401/403 bad token; 413 body above
//	     MaxReportBytes or claiming more than MaxExpansion times its size
//	     decompressed (ErrTooLarge); 415 wrong Content-Type: the reporter
//	     drops the report and counts it
//	409  a sequence too far behind: dropped
//	429, 503 (+ Retry-After or RetryAfter)  overloaded: the reporter keeps
//	     the report and retries with backoff
//
// In process the same answers are errors of Consume: a [RetryableError]
// for 429 and 503, any other error for the refusals for good.
//
// A reply may carry the current policy; the reporter hands a policy with
// a higher Version than the last to its policy handler.
//
// # Report format, version 2
//
// A report body (Content-Type [ContentType]) is an 8-byte header followed
// by the body length and the body:
//
//	"qtrp" | version uint16 big endian | codec byte (0 none, 1 zstd) | 0 |
//	uvarint length of the uncompressed body | body, compressed by codec
//
// The uncompressed body is a sequence of unsigned varints (u), zig-zag
// varints (s), strings (u length, then bytes, at most [MaxStringLen]) and
// little-endian float64s (f, finite and ≥ 0):
//
//	source service, instance, host (3 strings) | seq u |
//	start s (Unix ns) | window u (ns; end = start + window) |
//	string table: u n, n strings (each tenant and route once) |
//	rows: u n, n × row |
//	key sketch: u (0: none, else 1 + length of the spacesaving encoding), bytes |
//	key tenants: u n, n × (key string, u tenant index), keys sorted |
//	enforcement: admitted, throttled, shed, shadow throttled, shadow shed
//	  (4 u each, T0…T3) | price multiplier (4 f) |
//	sections (version 2): u n, n × (u tag, u length, payload), tags increasing
//
// and a row is
//
//	u tenant index | u route index | tier byte (0 unset, 1…4 T0…T3) |
//	kind byte | u count | u errors | u duration ns | f RU | u bytes | u rows |
//	latency: u n non-empty buckets, n × (u gap, u count)
//
// where a bucket's gap is its histogram.Histogram bucket index minus (the
// previous non-empty index + 1), the first gap being the index itself.
// Version 1 ends after the enforcement counters; version 2 adds the
// optional sections, each written only when it has something to say, and a
// decoder skips a section whose tag it does not know. Nothing may follow
// them. A decoder reads versions 1 and 2.
//
// # Worked example
//
// One window of process api/i1 on h1, Seq 7, [09:00:00, 09:00:01) UTC on
// 2026-11-29, one row: tenant acme, route "GET /a", T2, request, 2
// records, 0 errors, 30 ms in all, 1.5 RU, 100 bytes, 0 rows, latencies
// 10 ms (bucket 481) and 20 ms (bucket 517); no keys; no enforcement but
// price multipliers of 1. Uncompressed (codec 0), it is 129 bytes
// (testdata/report-v2.hex, checked by TestFormatGolden; testdata/ also holds a body with every
// section, written by the encoder this package replaced, which
// TestGoldenSectionsRoundTrip decodes and encodes again to the same bytes; report-v1.hex
// holds the same window in version 1, which still decodes):
//
//	71 74 72 70 00 02 00 00   "qtrp", version 2, codec 0, reserved
//	78                        body length 120
//	03 61 70 69 02 69 31      "api" "i1"
//	02 68 31 07               "h1", seq 7
//	80 80 dd ee c2 9d bc ec 31  start (zig-zag Unix ns)
//	80 94 eb dc 03            window 1,000,000,000 ns
//	02 04 61 63 6d 65 06 47 45 54 20 2f 61   string table: "acme" "GET /a"
//	01                        one row:
//	00 01 03 00               tenant 0, route 1, tier T2, request
//	02 00 80 87 a7 0e         count 2, errors 0, duration 30,000,000 ns
//	00 00 00 00 00 00 f8 3f   RU 1.5
//	64 00                     bytes 100, rows 0
//	02 e1 03 01 23 01         2 buckets: 481 → 1, 481+1+35 = 517 → 1
//	00 00                     no key sketch, no key tenants
//	00 × 20                   enforcement counters
//	(00 00 00 00 00 00 f0 3f) × 4   price multipliers 1.0
//	00                        no sections
//
// # Compression
//
// Bodies are zstd-compressed (klauspost/compress, pure Go, default level,
// no checksum: HTTP and TCP already check): the raw encoding is already
// compact (varints, a string table, sparse histograms), so compression
// mostly removes the repetition of similar histograms across rows; sizes
// and times against gzip, JSON and OTLP are in bench/README.md. A codec
// byte in the header leaves room for others; the decoder
// also reads codec 0 (none), handy for tests and tooling.
//
// A decoder rejects a version above its own with [ErrVersion] ("upgrade the
// collector"); every count is checked against its limit ([MaxRows],
// [MaxStrings], [MaxKeyTenants], [histogram.NumBuckets]) and against the bytes
// left, so no input makes it allocate more than a bounded amount
// ([DecodeBudget]). A decoded row holds its latency as the buckets were
// sent, a [histogram.Sparse]: [RowBytes] plus 8 bytes per non-empty bucket,
// which is what the collector merges and the store keeps, with no dense
// histogram on the way. The collector replies with a JSON [Reply] that
// carries the current policy.
package report
