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
// # Report format, version 1
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
//	  (4 u each, T0…T3) | price multiplier (4 f)
//
// and a row is
//
//	u tenant index | u route index | tier byte (0 unset, 1…4 T0…T3) |
//	kind byte | u count | u errors | u duration ns | f RU | u bytes | u rows |
//	latency: u n non-empty buckets, n × (u gap, u count)
//
// where a bucket's gap is its ratio.Histogram bucket index minus (the
// previous non-empty index + 1), the first gap being the index itself.
// Nothing may follow the enforcement counters.
//
// A decoder rejects a version above its own with [ErrVersion] ("upgrade the
// collector"); every count is checked against its limit ([MaxRows],
// [MaxStrings], [MaxKeyTenants], [ratio.NumBuckets]) and against the bytes
// left, so no input makes it allocate more than a bounded amount. The
// collector replies with a JSON [Reply] that carries the current policy.
package ingest
