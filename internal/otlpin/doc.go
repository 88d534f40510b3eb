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
//	SERVER                                 request (report.KindRequest)
//	CONSUMER                               job (report.KindJob)
//	CLIENT, db.system or db.system.name    DB time (report.KindDB)
//	  = postgresql
//	anything else (INTERNAL, PRODUCER,     counted (qtop_otlp_spans_total{result="dropped"})
//	  other clients)                        and dropped
//	a zero start, or end before start      rejected: partial_success.rejected_spans
//
//	field     where it comes from
//	────────  ───────────────────────────────────────────────────────────────────────
//	tenant    the span attribute tenant.id (WithTenantAttribute names another; the
//	          SDKs' baggage span processors copy the W3C baggage member tenant.id
//	          onto every span), else the resource's; a DB span without one takes
//	          the tenant of a sqlcommenter comment in db.query.text / db.statement
//	          (tenant='…'), else its trace's root (see below); none: "(untagged)"
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
//	RU        qtop.ru
//
// Values are validated as the collector validates reports: a tenant that
// fails tenant.ValidateTenant (too long, invalid UTF-8, unprintable) counts
// as "(untagged)", a route that fails tenant.ValidateRoute as "other", and
// each replacement is counted (qtop_otlp_invalid_values_total).
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
// 401 when WithAuth refuses; 503 with Retry-After when busy (1 s while
// every decode slot is taken, 5 s while the collector refuses reports or
// shuts down), which SDK exporters retry — and only that (tested with the
// Go SDK's exporter). RegisterGRPC serves the same over gRPC: INVALID_ARGUMENT,
// UNAUTHENTICATED, or UNAVAILABLE with a RetryInfo delay.
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
// body, at most WithMaxBody (16 MiB as sent, 64 MiB after gzip, so a gzip
// bomb stops there), plus 160 bytes per kept span, at most MaxSpans spans,
// for at most WithInflight requests at once; the windows are bounded by
// WithMaxRows per source and WithMaxSources sources (further ones share
// the service "other"). A JSON body gets a quarter of the decoded limit,
// as protojson builds a message tree. The collector caps OTLP/gRPC at 64
// connections, each with 4 × WithInflight streams.
package otlpin
