// Package otlpin receives OpenTelemetry traces (OTLP over HTTP and gRPC)
// and turns their spans into qtop load records, so that services in any
// language, or an OpenTelemetry Collector, feed qtop without qtop code.
//
// A Receiver keeps one meter.Recorder per sending process (the resource's
// service.name, service.instance.id and host.name) and, every interval,
// hands each one's window as a report.Report to a report.Consumer, in
// process (no encoding) — the collector merges it exactly as a report of
// qtop's own reporter, so the
// live view, the store, cost reports and metrics cannot tell the sources
// apart.
//
// # Mapping
//
//	span                                   record
//	─────────────────────────────────────  ──────────────────────────────────────────────
//	SERVER                                 request (report.KindRequest); of a service
//	                                        behind a gate (WithGated), its trace's
//	                                        tenant only: the gate counted the request
//	CONSUMER                               job (report.KindJob)
//	CLIENT, db.system or db.system.name    DB time (report.KindDB): a statement span, one
//	  = postgresql, with a statement        with db.query.text / db.statement,
//	                                        db.query.summary or db.operation(.name)
//	the same without a statement, named    pool wait of its tenant (the report's
//	  "….connect" (pg-pool.connect,         EnforcementDetail.PoolWait), not DB time
//	  pg.connect) or holding "acquire"
//	anything else (INTERNAL, PRODUCER,     counted (qtop_otlp_spans_total{result="dropped"})
//	  other clients, PostgreSQL spans       and dropped
//	  with neither)
//	a zero start, end before start, a      refused alone: partial_success.rejected_spans
//	  duration above 24h, qtop.ru not a      and its message, counted by reason
//	  number from 0 to 10⁶, bytes or rows    (qtop_otlp_spans_rejected_total); the
//	  above 2⁵⁰                              request's other spans are kept
//	an end further than WithClockSkew      recorded as any span, in the window open when
//	  (1 h) from the collector's clock,     it arrives (where every span counts: the work
//	  either way (a wrong clock: years      was done, only its date is wrong), and counted
//	  away)                                 (qtop_otlp_spans_skewed_total{direction="past"
//	                                        or "future"}); never refused, never with others
//
//	field     where it comes from
//	────────  ───────────────────────────────────────────────────────────────────────
//	tenant    the span attribute tenant.id (WithTenantAttribute names another; the
//	          SDKs' baggage span processors copy the W3C baggage member tenant.id
//	          onto every span), a string or an integer (in decimal; another type
//	          counts as invalid), else the resource's; a DB span without one takes
//	          the tenant of a sqlcommenter comment in db.query.text / db.statement
//	          (tenant='…'), else its trace's root (see below); none: "(untagged)";
//	          a name that is not valid: its stand-in (tenant.Substitute, below)
//	tier      tenant.tier (T0–T3), else the comment's or the root's tier
//	route     request: http.route, else tenant.route, else the span name;
//	          job: tenant.route, else the span name;
//	          DB: the statement shape — db.query.summary, else db.operation.name and
//	          db.collection.name, else the first keyword and table of the query
//	          text ("SELECT orders"), else the span name
//	error     status ERROR; for a SERVER span with status UNSET also
//	          http.response.status_code (or http.status_code) ≥ 500
//	duration  end − start
//	bytes     http.response.body.size (or http.response_content_length)
//	rows      db.response.returned_rows
//	RU        qtop.ru; else, for a request or a job, the cost model's price
//	          (WithCostModel, default ru.DefaultModel: the agent's model, and
//	          rucalib's calibration when given): base by kind — a request by
//	          http.request.method (or http.method): GET, HEAD, OPTIONS read,
//	          DELETE delete, others write; a job write — plus bytes and
//	          duration; DB spans carry no RU (as the agent's)
//
// # DB time
//
// A statement span's DB time is the part of it that no other statement
// span of its trace already covered: statements of one request that nest
// or overlap (a driver span around a query span, queries run in
// parallel) count their wall time once, whatever order they arrive in
// (remembered for the WithTraceLimits most recent traces). The record
// still counts one statement. Start times cut to the millisecond
// (OpenTelemetry JS takes them from Date.now()) place a span only to
// within a millisecond: for such spans an overlap counts when one is the
// other's parent or when it lasts a millisecond or more, so that
// statements run one after the other are not taken for overlapping. Pool spans (above) are the time a request
// waited for a connection: they take the tenant of the span or its
// resource, and show as the tenant's pool wait, apart from DB time. A
// request found malformed after some of its pool or statement spans were
// read leaves those in the pool waits and the overlap memory (not in the
// DB time, which is recorded only once the request was read whole).
//
// A span measures the statement as its client saw it. With --postgres
// the collector writes each statement shape's minute as PostgreSQL
// measured it in pg_stat_statements (StatementShape maps its texts to
// the routes given here), split between tenants by their calls and what
// their spans measured; see the collector's dbtime.go.
//
// Values are validated as the collector validates reports, with
// tenant's one rule for names (tenant.ValidateTenant: at most 128 bytes of
// printable UTF-8, not in parentheses). A span cannot be refused for its
// tenant as an agent's request is, so a tenant that fails it counts under
// its stand-in (tenant.Substitute: its printable prefix and a hash of the
// whole name, the same the pg_stat_activity sampler gives it), never with
// another tenant's load or the untagged load; an empty one counts as
// "(untagged)", a route that fails tenant.ValidateRoute under a stand-in
// of its own formed the same way (tenant.SubstituteRoute), never in the
// overflow route "other", and each replacement is counted
// (qtop_otlp_invalid_values_total). A route really named "other" counts
// under its stand-in (other#d9298a10d1b07358), as a tenant of that name.
// Numbers are checked per span against the bounds the collector checks
// per record in a report, so one absurd span is refused alone and never
// makes the collector refuse its source's window with the other spans of
// that second; sums of valid spans that reach a report's bounds in one
// window stop there (qtop_otlp_rows_bounded_total).
//
// # Spans of one trace in several requests
//
// An SDK exports a span when it ends, so a database span usually leaves in
// an earlier batch than its root. The rule: every SERVER or CONSUMER span
// with a tenant records its trace id → tenant for WithTraceWait (default
// 10 s, twice the SDKs' export delay), at most WithTraceLimits traces,
// oldest out first. A DB span without a tenant of its own takes its
// trace's tenant when it is known; otherwise it waits, by trace id, until
// a root of its trace arrives or its wait is over, when it counts for
// "(untagged)" (qtop_otlp_db_spans_unattributed_total). At most
// WithTraceLimits spans wait; one that finds the list full counts for
// "(untagged)" at once. The first tagged root of a trace seen wins: a trace
// that crosses services carries one tenant in its baggage. Limits: a root
// that comes later than the wait, or to another collector, leaves its DB
// spans unknown; with several collectors, send all spans of a trace to one
// (the OpenTelemetry Collector's load-balancing exporter by trace id).
//
// # Protocol
//
// ServeHTTP answers POST /v1/traces (PathTraces) as the OTLP specification
// and the OpenTelemetry Collector's otlpreceiver do: protobuf
// (application/x-protobuf) or JSON (application/json, ids in hex), with or
// without gzip; 200 with an ExportTraceServiceResponse whose
// partial_success counts rejected spans; 400 (a google.rpc.Status) for a
// malformed body, 413 for one too large, 415 for another media type,
// 401 when WithAuth refuses (these four held back by WithRefusalHold, as
// the collector holds the refusals of its report door); 408 for a body
// sent below WithMinRate; 503 with Retry-After when busy (1 s while
// every decode slot or the memory budget stays taken for 250 ms, counted
// busy; 5 s while the collector refuses it for now, WithAdmission, counted
// refused; or while it shuts down), which SDK exporters retry —
// and only that (tested with the Go SDK's exporter). RegisterGRPC serves
// the same over gRPC (on a server made with GRPCServerOptions, serving on
// GRPCListener): INVALID_ARGUMENT, UNAUTHENTICATED, UNAVAILABLE with a
// RetryInfo delay, or CANCELLED for a message sent below WithMinRate.
//
// # Admission
//
// Both transports admit a request before reading its body, in this
// order: the credential (WithAuth) from the headers alone — gRPC checks it
// in a tap on the stream's headers, so a refused message is never read;
// then the admission check (WithAdmission); then a reservation in the
// memory budget (WithMemory, 256 MiB by
// default) — HTTP reserves its body as the bytes arrive, before they are
// read (16 KiB, then doubling up to the length it declares; what gzip may
// expand it to once it is in), so a request that declares 16 MiB and sends
// nothing holds 16 KiB; gRPC, on a connection the receiver meters
// (GRPCListener), reserves 128 KiB from the stream's headers and grows its
// connection's reservation as the message bytes arrive — DATA frames'
// payload; HEADERS, PING, SETTINGS and frames of types HTTP/2 ignores
// carry none, over TLS too when its credentials are wrapped by
// GRPCCredentials — before gRPC has them
// (twice what the waiting streams sent, doubling, up to twice the message
// limit a stream: WithGRPCMaxMessage, 16 MiB; a longer message is refused
// from its length prefix), so streams that send their headers and nothing
// else hold 128 KiB each; elsewhere twice the message limit from the
// headers — at most half the budget per connection, waiting up to 250 ms
// for memory to be given back (a new gRPC stream only when no other stream
// of its connection holds any), then refused busy (a gRPC connection whose
// bytes outgrow the budget has its waiting streams cut: CANCELLED, counted
// busy). The body then arrives at WithMinRate
// (a slower one is cut: HTTP with 408; a gRPC message, counted on its
// connection and shared among the connection's streams that wait for
// theirs, with CANCELLED, so streams that send their headers and nothing
// else hold their 128 KiB for 2 s, not for WithGRPCReadTimeout); gzip
// expands at most meter.MaxExpansion (64) times the bytes received (above
// 64 KiB), as a report's body; only then is a decode slot
// (WithInflight) taken, waiting up to 250 ms for one, so slow senders hold
// none and ten exporters sending at once are served in turn. A message of
// WithLargeMessage (4 MiB) or more also takes the one large slot: huge
// exports are decoded one at a time, at most half a core on average (the
// slot rests as long as each decode took), and the other cores stay with
// the report door and SDK-sized exports.
//
// # Durability
//
// A request is answered once its spans are recorded in memory; they reach
// the collector's write-ahead log with the next flush (within
// WithInterval, one second). A collector killed in between loses at most
// that second of spans, as an OpenTelemetry Collector whose batch
// processor holds them would; from the log on, they are as safe as any
// report.
//
// # Bounds
//
// The body is read in place (no message tree is built): memory is the
// bodies being received and decoded, within the memory budget
// (WithMemory; each at most WithMaxBody, 16 MiB as sent and 64 MiB
// decompressed), plus 160 bytes per kept span, at most MaxSpans spans,
// for at most WithInflight requests at once; the windows are bounded by
// WithMaxRows per source and WithMaxSources sources (further ones share
// the service "other"). A JSON body gets a quarter of the decoded limit
// and reserves four times its length, as protojson builds a message tree.
// gRPC's HTTP/2 flow-control windows are fixed at 1 MiB, so a connection
// buffers at most that much unread; the collector caps OTLP/gRPC at 64
// connections, each with 4 × WithInflight streams.
package otlpin
