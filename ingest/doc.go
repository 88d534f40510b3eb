// Package ingest turns finished work into per-window, per-tenant
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
// The budget is 500 ns per span (OnStart + OnEnd) beyond the SDK's own;
// it is not met. BenchmarkSpanOverhead runs a server span and its
// database child through the same SDK with and without the processor,
// interleaved (2-core VM, shared and busy: the range is of the medians of
// 5–10 runs taken at different times):
//
//	overhead-ns/span   1,000–1,750   +1 allocation and +416 bytes a span
//	attrs-ns/span        560–1,250   the SDK storing the same attributes
//	sdk-ns/span        2,600–4,300   the SDK's own span
//	BenchmarkSpanOnEnd   150–300 ns a span, no allocation
//
// Most of the overhead is not the processor's code but the SDK's work on
// the two attributes it writes (three on client and consumer spans):
// SetAttributes grows the span's attribute slice, which the SDK sized to
// the attributes the span started with, so every span pays one more
// allocation of 256–512 bytes, its copy, and its share of the garbage
// collector's work. attrs-ns/span measures that floor with a processor
// that only sets the same constants; it alone is above the budget, so no
// change to the processor's code can meet the budget while spans carry
// their tenant. On the benchmark goroutine's CPU time, which the machine's
// other load disturbs less, the overhead is 890 ns a span, 620 of them the
// SDK's storing of the attributes and 320 the processor's own code (the
// tenant look-up and OnEnd's reading and recording); before the last
// round of changes (one tenant look-up, prebuilt tier attributes, the
// four tiers read back without tenant.ParseTier) they were 920, 600 and
// 360, a difference within the noise of the wall-clock benchmark.
//
// Left: reading the span's attributes in OnStart to skip those the
// application already set (measured: no gain when they are absent, the
// common case, as the read marks the slice shared and the write then
// copies it anyway); writing them only on sampled spans (OnStart only
// sees recording spans, and the benchmark's are sampled, so it would not
// move these figures); carrying the tags from OnStart to OnEnd outside
// the span (a synchronized map per span, and the attributes still to
// write).
//
// # Compression
//
// Bodies are zstd-compressed (klauspost/compress, pure Go, default level,
// no checksum: HTTP and TCP already check). BenchmarkReportEncode measures
// a window of 1,000 tenant × route rows with 200 latencies each and a
// 1,000-key sketch (2-core VM, shared and busy, so compare ratios):
//
//	encoding                   bytes     encode   decode
//	raw (codec 0)            273,620     4–7 ms
//	zstd (the format)         94,616      16 ms   2.5–3.7 ms (into a reused Report)
//	zstd fastest / better     99,196 / 92,803   10 / 16 ms
//	gzip                      88,994   90–185 ms
//	JSON + gzip              184,282  220–450 ms
//
// and bench/ingest_test.go sets it against the OTLP metrics request of the
// same window (exponential histograms at scale 5, five sums, two key
// gauges): 1,126,174 bytes of protobuf, 125,612 gzipped (as OTLP/HTTP
// sends it) or 113,552 with zstd, 25–39 ms to marshal plus 90–110 ms of
// gzip, and 27–52 ms and 168,620 allocations to decode, against 4 ms and
// 266 for the report. zstd costs a tenth of gzip's time for 6% more
// bytes, and its better levels gain 2% for no less time; the raw encoding
// is already compact (varints, a string table, sparse histograms), so
// compression mostly removes the repetition of similar histograms across
// rows. A codec byte in the header leaves room for others; the decoder
// also reads codec 0 (none), handy for tests and tooling.
//
// A decoder rejects a version above its own with [ErrVersion] ("upgrade the
// collector"); every count is checked against its limit ([MaxRows],
// [MaxStrings], [MaxKeyTenants], [ratio.NumBuckets]) and against the bytes
// left, so no input makes it allocate more than a bounded amount. The
// collector replies with a JSON [Reply] that carries the current policy.
package ingest
