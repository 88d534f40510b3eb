// Package meter turns finished work into per-window, per-tenant
// aggregates inside each application process and ships them to the
// collector in compact batches.
//
// Records ([Record]) come from the OTel span processor
// (otelmeter.NewSpanProcessor), the sqlcomment observer
// (sqlmeter.SQLObserver) or the application itself; a [Recorder]
// aggregates them per tenant × route × kind with bounded memory; a
// [Reporter] cuts a report.Report every interval and sends it to the
// collector, never on the request path.
//
// The reporter sends through an [Exporter]: HTTP to the collector's POST
// /v1/reports by default ([NewReporter]; the protocol and the format are
// package report's), or a report.Consumer in process ([NewReporterTo],
// [ConsumerExporter]). Parts of a process that report a section of their
// own add it with [WithSectionSource].
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
// (Reporter); reason "exporter" counts a retryable refusal of an
// Exporter given to NewReporterTo.
//
// # Span processor cost
//
// The span processor is package meter/otelmeter; what it costs beside
// the SDK's own span is measured in bench/README.md.
package meter
