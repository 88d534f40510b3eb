// A Node.js service that feeds qtop through OpenTelemetry alone. The tenant
// arrives in the W3C baggage header (baggage: tenant.id=acme,tenant.tier=T1),
// as a gateway or an upstream service sets it; the HTTP instrumentation
// extracts it and the baggage span processor puts it on the server span and
// on every PostgreSQL span below it.
//
//   OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:7070 OTEL_SERVICE_NAME=shop-node \
//   DATABASE_URL=postgres://127.0.0.1:5432/postgres npm start
//   curl -H 'baggage: tenant.id=acme' 127.0.0.1:8082/products
'use strict';

const http = require('http');
const { context, propagation, trace } = require('@opentelemetry/api');
const { Pool } = require('pg');
const { dbTime } = require('./tracing.js');

const pool = new Pool({ connectionString: process.env.DATABASE_URL, max: 8 });

// Routes and the statements each runs (pg_sleep stands for real work).
const routes = {
  '/products': ['SELECT pg_sleep(0.002)', 'SELECT count(*) FROM generate_series(1, 1000)'],
  '/reports/{id}': ['SELECT pg_sleep(0.02)', 'SELECT pg_sleep(0.01)'],
  '/orders': ['SELECT pg_sleep(0.005)'],
  // One long statement: the DB time a bill is checked on against
  // pg_stat_statements (go test -run TestNodeBill), where the client's own
  // scheduling is small beside the statement.
  '/exports/{id}': ['SELECT pg_sleep(0.5)'],
};

// What the service itself measured per tenant — requests served, the time
// its PostgreSQL spans took (db_seconds) and the wall time around each
// query, pool and event loop included (db_wall_seconds): the truth qtop's
// attribution is checked against.
const stats = {};
function statsOf(tenant) {
  return (stats[tenant] ??= { requests: 0, db_seconds: 0, db_wall_seconds: 0 });
}

function routeOf(path) {
  if (path === '/products' || path === '/orders') return path;
  if (/^\/reports\/[^/]+$/.test(path)) return '/reports/{id}';
  if (/^\/exports\/[^/]+$/.test(path)) return '/exports/{id}';
  return null;
}

async function handle(req, res) {
  const path = new URL(req.url, 'http://x').pathname;
  if (req.method === 'GET' && path === '/stats') {
    for (const [tenant, s] of Object.entries(dbTime)) statsOf(tenant).db_seconds = s;
    res.setHeader('Content-Type', 'application/json');
    res.end(JSON.stringify(stats));
    return;
  }
  if (req.method === 'POST' && path === '/flush') {
    await trace.getTracerProvider().getDelegate().forceFlush();
    res.end('flushed\n');
    return;
  }
  const route = routeOf(path);
  if (req.method !== 'GET' || route === null) {
    res.statusCode = 404;
    res.end('not found\n');
    return;
  }
  trace.getActiveSpan()?.setAttribute('http.route', route);
  const tenant = propagation.getBaggage(context.active())?.getEntry('tenant.id')?.value ?? '';
  const st = statsOf(tenant);
  st.requests++;
  for (const q of routes[route]) {
    const t0 = process.hrtime.bigint();
    await pool.query(q);
    st.db_wall_seconds += Number(process.hrtime.bigint() - t0) / 1e9;
  }
  res.end('ok\n');
}

const server = http.createServer((req, res) => {
  handle(req, res).catch((err) => {
    res.statusCode = 500;
    res.end(String(err) + '\n');
  });
});

async function main() {
  // Open the pool's connections before serving, so that no request waits
  // for a connection.
  const clients = await Promise.all([1, 2, 3, 4, 5, 6, 7, 8].map(() => pool.connect()));
  clients.forEach((c) => c.release());
  server.listen(Number(process.env.PORT || 8082), '127.0.0.1', () => {
    console.log(`listening on ${server.address().port}`);
  });
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
