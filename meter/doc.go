// Package meter turns finished work into per-window, per-tenant
// aggregates inside each application process and ships them to the
// collector in compact batches.
//
// Records ([Record]) come from the OTel span processor
// ([NewSpanProcessor]), the sqlcomment observer ([SQLObserver]) or the
// application itself; a [Recorder] aggregates them per tenant × route ×
// kind with bounded memory; a [Reporter] cuts a [Report] every interval
// and POSTs it to the collector, never on the request path.
//
// # Protocol
//
// The Reporter POSTs each report to the collector's /v1/reports with
// Content-Type [ContentType] and, with WithToken, "Authorization: Bearer
// …". The collector answers with a JSON [Reply] (EncodeReply), whatever
// the status:
//
//	200  merged, or a duplicate of a merged (Source.Instance, Seq): drop it
//	     silently and still answer 200
//	400  DecodeReport failed (ErrMalformed, ErrRange: a value above the
//	     bounds of MaxCount and its kin, ErrVersion: say "upgrade the
//	     collector" in Message); 401/403 bad token; 413 body above
//	     MaxReportBytes or claiming more than MaxExpansion times its size
//	     decompressed (ErrTooLarge); 415 wrong Content-Type: the reporter
//	     drops the report and counts it
//	429, 503 (+ Retry-After or RetryAfter)  overloaded: the reporter keeps
//	     the report and retries with backoff
//
// A reply may carry the current policy; the reporter hands a policy with
// a higher Version than the last to its WithPolicyHandler.
//
// # Metrics
//
// On the registerer of WithRegisterer: qtop_ingest_records_total{kind},
// qtop_ingest_record_errors_total, qtop_ingest_records_folded_total,
// qtop_ingest_tenants_evicted_total, qtop_ingest_records_invalid_total,
// qtop_ingest_windows_total, qtop_ingest_window_rows, and per tenant, for
// the top WithTopTenants tenants by DB time plus "other" (package topn):
// qtop_ingest_tenant_{db_seconds,requests,errors,ru,bytes}_total (Recorder);
// qtop_ingest_reports_sent_total, qtop_ingest_report_sent_bytes_total,
// qtop_ingest_report_attempts_failed_total{reason},
// qtop_ingest_reports_dropped_total{reason}, qtop_ingest_queue_reports,
// qtop_ingest_reply_errors_total, qtop_ingest_policy_updates_total
// (Reporter).
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
// where a bucket's gap is its ratio.Histogram bucket index minus (the
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
// (testdata/report-v2.hex, checked by TestFormatGolden; report-v1.hex
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
// # Span processor cost
//
// OnStart writes two attributes (three on client and consumer spans) and
// OnEnd reads a span's attributes once, without allocating; what that costs
// beside the SDK's own span is measured in bench/README.md.
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
// [MaxStrings], [MaxKeyTenants], [ratio.NumBuckets]) and against the bytes
// left, so no input makes it allocate more than a bounded amount
// ([DecodeBudget]). A decoded row holds its latency as the buckets were
// sent, a [ratio.Sparse]: [RowBytes] plus 8 bytes per non-empty bucket,
// which is what the collector merges and the store keeps, with no dense
// histogram on the way. The collector replies with a JSON [Reply] that
// carries the current policy.
package meter
