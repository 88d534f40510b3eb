// OpenTelemetry set-up, loaded before the service (node --require ./tracing.js).
// Nothing here is qtop's: the stock SDK, the stock OTLP/HTTP protobuf
// exporter pointed at the qtop collector (OTEL_EXPORTER_OTLP_ENDPOINT, e.g.
// http://127.0.0.1:7070), and the baggage span processor, which copies the
// W3C baggage members (tenant.id, tenant.tier) onto every span.
'use strict';

const { NodeSDK } = require('@opentelemetry/sdk-node');
const { BatchSpanProcessor } = require('@opentelemetry/sdk-trace-base');
const { OTLPTraceExporter } = require('@opentelemetry/exporter-trace-otlp-proto');
const { HttpInstrumentation } = require('@opentelemetry/instrumentation-http');
const { PgInstrumentation } = require('@opentelemetry/instrumentation-pg');
const { BaggageSpanProcessor, ALLOW_ALL_BAGGAGE_KEYS } = require('@opentelemetry/baggage-span-processor');

// dbTime sums, per tenant, the duration of the PostgreSQL statement spans
// (those with a statement; not the pool's pg-pool.connect and pg.connect
// spans, which qtop counts as pool wait) as the SDK measured them: what
// the service reports on GET /stats, to be compared with what qtop
// attributes after the spans went through OTLP.
const dbTime = {};
const dbTimeProcessor = {
  onStart() {},
  onEnd(span) {
    const a = span.attributes;
    if (a['db.system'] !== 'postgresql' && a['db.system.name'] !== 'postgresql') return;
    if (!a['db.statement'] && !a['db.query.text'] && !a['db.operation.name']) return;
    const tenant = a['tenant.id'] ?? '';
    const [s, ns] = span.duration;
    dbTime[tenant] = (dbTime[tenant] ?? 0) + s + ns / 1e9;
  },
  forceFlush() { return Promise.resolve(); },
  shutdown() { return Promise.resolve(); },
};

const sdk = new NodeSDK({
  spanProcessors: [
    new BaggageSpanProcessor(ALLOW_ALL_BAGGAGE_KEYS),
    new BatchSpanProcessor(new OTLPTraceExporter()),
    dbTimeProcessor,
  ],
  instrumentations: [new HttpInstrumentation(), new PgInstrumentation()],
});
sdk.start();

async function shutdown() {
  try {
    await sdk.shutdown();
  } finally {
    process.exit(0);
  }
}
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);

module.exports = { sdk, dbTime };
