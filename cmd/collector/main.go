// Command collector is the qtop collector server: it merges the reports of
// application processes, samples pg_stat_activity, stores per-minute
// rollups in DuckDB or ClickHouse, serves the live API read by qtop, owns
// the enforcement policy, and prints cost-attribution reports.
//
// Run `collector --help` for the commands and their flags.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/qtop-dev/qtop/internal/buildinfo"
	"github.com/qtop-dev/qtop/internal/collector"
	"github.com/qtop-dev/qtop/internal/pprofserve"
	"github.com/qtop-dev/qtop/tlsfiles"
)

const usage = `collector — the qtop collector server

Usage:
  collector serve  [flags]   run the server (ingest, live API, policy, metrics)
  collector report [flags]   print a cost-attribution report
  collector audit  [flags]   print the policy changes (who, when, the rule, its expiry)
  collector autopilot --replay FILE   run the autopilot's rules over a recording, print the decisions
  collector erase  [flags]   erase one tenant's rows from the store, the spool, the WAL and the baselines, audited
  collector help [command]   show help
  collector --version        print the version, revision and Go version

Every flag can also be set from the environment variable named beside it.

Examples:
  # A single collector on the embedded DuckDB store, with the demo fleet:
  collector serve --demo

  # Many collectors sharing a ClickHouse cluster, sampling PostgreSQL
  # (off loopback: TLS, and a token each for reporting and reading):
  QTOP_TOKEN_FILE=/etc/qtop/report.token QTOP_READ_TOKEN_FILE=/etc/qtop/read.token \
    collector serve --listen 0.0.0.0:7070 --tls-cert /etc/qtop/tls.crt --tls-key /etc/qtop/tls.key \
      --store clickhouse://ch1:9000/qtop --cluster prod \
      --postgres 'postgres://qtop_monitor@db:5432/app'

  # Three collectors on a replicated cluster, one fleet: each shows the
  # fleet's live view (--peers, over TLS as they serve) and shares one
  # policy through the store:
  collector serve --listen 0.0.0.0:7070 --tls-cert tls.crt --tls-key tls.key \
      --store clickhouse://ch1:9000,ch2:9000/qtop --cluster prod --shared-policy \
      --peers https://c2:7070,https://c3:7070 --peer-ca-file ca.pem \
      --token-file report.token --read-token-file read.token --peer-token-file peer.token

  # Last week's shared database bill split by RU:
  collector report --from 7d --measure ru --cost 12000 --currency USD
`

const serveUsage = `Usage: collector serve [flags]

Runs the collector: POST /v1/reports (from meter.Reporter: agents, gates),
POST /v1/traces (OTLP/HTTP from any OpenTelemetry SDK or Collector;
OTLP/gRPC with --otlp-grpc), GET /v1/live and /v1/live/stream (for qtop), GET/POST
/v1/policy, GET /v1/report, /metrics; with --rls-listen, Envoy's rate-limit
service (gRPC ShouldRateLimit) answered from the policy and fleet quotas.
The autopilot runs the policy's autopilot rules every second (GET/POST
/v1/autopilot: status, pause, resume, cancel; /v1/policy/autopilot: the
rules; README "Autopilot"); with --postgres, POST /v1/pg/signal cancels or
terminates what qtop shows (admin token).
With --tls-cert and --tls-key every listener serves TLS 1.2+ (the files are
reloaded when they change; --tls-client-ca requires client certificates).
Off loopback the collector refuses to start without TLS, --token and
--read-token, unless --insecure.
Token files (--token-file, --read-token-file, --peer-token-file,
--admin-token-file, the generated --data-dir/admin-token) are read again
within a second of a change: the new token replaces the old at once, with no
grace period (rename the new file into place); an empty or unreadable file
keeps the old token and is logged. A token file that others may read, or its
group write, is warned of at start (fix: chmod 600 FILE).
Accepted reports are logged to --data-dir before they are acknowledged, so a
killed collector loses nothing: restart it on the same --data-dir. It then
listens at once and replays that log first: meanwhile /healthz answers,
/readyz and every other door answer 503 with Retry-After (the processes send
their reports again), and OTLP/gRPC and --rls-listen answer UNAVAILABLE. Without
--store the history is kept there too, in DuckDB (--data-dir/qtop.duckdb;
a qtop.duckdb in the working directory, where earlier collectors kept it,
is still read there until it is moved, and the log says so).

The engines' credentials come from the environment only, never a flag or a
URL, and are never logged (README "Running in production"):
  QTOP_CLICKHOUSE_USER, QTOP_CLICKHOUSE_PASSWORD or QTOP_CLICKHOUSE_PASSWORD_FILE;
  with ?secure=1, QTOP_CLICKHOUSE_CA_FILE (default: the system's roots) and
  QTOP_CLICKHOUSE_CERT_FILE/QTOP_CLICKHOUSE_KEY_FILE for a client certificate.
  QTOP_REDIS_USER, QTOP_REDIS_PASSWORD or QTOP_REDIS_PASSWORD_FILE; with a
  rediss:// --quota-redis, QTOP_REDIS_CA_FILE, QTOP_REDIS_CERT_FILE, QTOP_REDIS_KEY_FILE.

Examples:
  collector serve --demo
  collector serve --store clickhouse://127.0.0.1:9000/qtop --token-file report.token
  collector serve --retention 90d   # keep 90 days of history; collector erase removes one tenant
  collector serve --listen 0.0.0.0:7070 --token-file report.token --read-token-file read.token \
      --tls-cert /etc/qtop/tls.crt --tls-key /etc/qtop/tls.key [--tls-client-ca /etc/qtop/clients-ca.pem]
  collector serve --otlp-grpc 127.0.0.1:4317 --otlp-tenant-attribute app.tenant
  collector serve --rls-listen 127.0.0.1:8081 --token-file report.token   # Envoy's rate-limit service
  rucalib -json load.csv > ru.json && collector serve --otlp-ru-model ru.json
  QTOP_STORE=duckdb:///var/lib/qtop/qtop.duckdb QTOP_POSTGRES=postgres://… collector serve
  collector serve --listen 127.0.0.1:7071 --writer c2 --quota-redis 127.0.0.1:6379   # one of several collectors (off loopback: with TLS and tokens, as above)
  QTOP_CLICKHOUSE_USER=qtop QTOP_CLICKHOUSE_PASSWORD_FILE=/etc/qtop/ch.password \
    QTOP_CLICKHOUSE_CA_FILE=/etc/qtop/ch-ca.pem QTOP_REDIS_PASSWORD_FILE=/etc/qtop/redis.password \
    collector serve --store 'clickhouse://ch1:9440/qtop?secure=1' --quota-redis rediss://redis:6380
  collector serve --pprof 127.0.0.1:6060   # then: go tool pprof http://127.0.0.1:6060/debug/pprof/profile

Flags:
`

const reportUsage = `Usage: collector report [flags]

Prints every tenant's usage over a range, its share of the chosen measure,
its part of a shared cost, and an "(unattributed)" line for load that no
tenant tag covers. Reads the store directly (--store), or asks a running
collector (--collector), which is needed for a DuckDB file the collector holds
open. A progress bar goes to stderr for long ranges when stderr is a terminal.

DB time (db_seconds, --measure db_time) is the statements' time services
report (agents, OTLP statement spans) and the active-session time the
--postgres sampler saw, each statement once: minute by minute, a tenant gets
the larger of its statements' and its sessions' time (as qtop's live DB load
does), and "(unattributed)" keeps the untagged sessions that no reported
statement accounts for (an OTLP service's sessions carry no tenant; its spans
do). With several collectors, only the statements that reached the collector
sampling PostgreSQL are matched.

Times: RFC 3339, YYYY-MM-DD (UTC), "now", or an age such as 24h or 7d.
The store keeps whole minutes: each bound is taken back to the start of its
minute (UTC), and the report says the range it counted, so --to now leaves
out the minute still open and two reports that share a bound count each
minute once. A range within one minute, or that starts in the future, is
refused. A minute is written about 10 s after its end: asked of a
collector, a report that ends in one not written yet waits for it (an hourly
job at :00 gets its report); read from the store, it says so in its note. A
range that ends after the minute open now counts up to it, and its note says
so (for a CSV, on stderr).

The cost is split in whole cents that add up to it, by largest remainder:
each line gets the whole cents of its share, and the cents left over go one
each to the largest fractions. By route, the cents are split between tenants
first, then each tenant's between its routes, so a tenant's lines add up to
what the report by tenant bills it, and its bill alone (--tenant) is the
same either way.

Examples:
  collector report --from 2026-03-01 --to 2026-04-01 --cost 12000 --currency USD
  collector report --from 24h --by tenant,route --measure db_time --format csv > usage.csv
  collector report --collector 127.0.0.1:7070 --from 7d --format json
  collector report --from 2026-03-01 --to 2026-04-01 --cost 12000 --tenant acme   # acme's bill alone
  collector report --collector 127.0.0.1:7070 --repeats   # GETs repeating an identical response within 24 h

Flags:
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stdout, stderr)
	case "report":
		return report(args[1:], stdout, stderr)
	case "audit":
		return audit(args[1:], stdout, stderr)
	case "autopilot":
		return autopilotCmd(args[1:], stdout, stderr)
	case "erase":
		return erase(args[1:], stdout, stderr)
	case "version", "--version", "-version":
		buildinfo.Print(stdout, "collector")
		return 0
	case "help", "-h", "--help", "-help":
		if len(args) > 1 && args[0] == "help" {
			return run([]string{args[1], "--help"}, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "collector: unknown command %q\n\n%s", args[0], usage)
	return 2
}

// env returns the environment variable name's value, or def.
func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

// flagSet builds a FlagSet whose usage prints head and every flag with
// its environment variable.
func flagSet(name, head string, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprint(out, head)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses a command's flags; done says the command ends there, with
// code: 0 after --help, 2 after a bad flag or an argument (no command
// takes any).
func parse(fs *flag.FlagSet, args []string, stderr io.Writer) (code int, done bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, true
		}
		return 2, true
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "collector %s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return 2, true
	}
	return 0, false
}

type envFlag struct {
	name, env string
}

func strFlag(fs *flag.FlagSet, envs *[]envFlag, name, envName, def, help string) *string {
	*envs = append(*envs, envFlag{name, envName})
	return fs.String(name, env(envName, def), help+" ($"+envName+")")
}

func boolFlag(fs *flag.FlagSet, envs *[]envFlag, name, envName string, help string) (*bool, error) {
	*envs = append(*envs, envFlag{name, envName})
	def := false
	if v, ok := os.LookupEnv(envName); ok && v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("$%s=%q: want true or false", envName, v)
		}
		def = b
	}
	return fs.Bool(name, def, help+" ($"+envName+")"), nil
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text", "":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("log format %q: want text or json", format)
}

func serve(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("serve", serveUsage, stderr)
	f, err := newServeFlags(fs)
	if err != nil {
		fmt.Fprintln(stderr, "collector serve:", err)
		return 2
	}
	if code, done := parse(fs, args, stderr); done {
		return code
	}
	cfg, err := f.config(stderr)
	if err != nil {
		fmt.Fprintln(stderr, "collector serve:", err)
		return 2
	}
	if *f.pprof != "" {
		_, closePprof, err := pprofserve.Serve(*f.pprof, cfg.Logger)
		if err != nil {
			fmt.Fprintln(stderr, "collector serve:", err)
			return 2
		}
		defer closePprof()
	}
	return runServer(cfg)
}

// serveFlags are the flags of `collector serve`.
type serveFlags struct {
	listen, storeURL, cluster, peers, pg           *string
	dataDir, writer, grace, refusalDelay, spoolMax *string
	quotaRedis, pprof, rlsListen                   *string
	otlp                                           struct{ grpc, grpcMax, grpcConns, maxRows, tenant, ruModel *string }
	logFormat, logLevel                            *string
	demo, shared, clientDBTime, pgAll              *bool
	creds                                          *credentials
	tls                                            *tlsFlags
	peerToken                                      *secret
	limits                                         *limitFlags
}

func newServeFlags(fs *flag.FlagSet) (*serveFlags, error) {
	var envs []envFlag
	f := &serveFlags{
		listen:   strFlag(fs, &envs, "listen", "QTOP_LISTEN", collector.DefaultListen, "HTTP address"),
		storeURL: strFlag(fs, &envs, "store", "QTOP_STORE", "", "store: duckdb://PATH[?memory_limit=SIZE, DuckDB's memory, default 1GiB], clickhouse://HOST:PORT/DB[?mode=explicit|replicated-database|cloud&async_insert=1&secure=1] (docs/cluster.md; user, password and CA from QTOP_CLICKHOUSE_USER, QTOP_CLICKHOUSE_PASSWORD[_FILE], QTOP_CLICKHOUSE_CA_FILE), or none"+storeDefaultNote),
		cluster:  strFlag(fs, &envs, "cluster", "QTOP_CLUSTER", "", "ClickHouse cluster name: ON CLUSTER DDL, Replicated engines (ZooKeeper) and Distributed tables"),
		peers:    strFlag(fs, &envs, "peers", "QTOP_PEERS", "", "the other collectors of the fleet, host:port or https://host:port,…: /v1/live shows the whole fleet (https peers verified with --peer-ca-file); the list may hold this collector's own address (one list for every replica): it knows itself and does not count its view twice"),
		pg:       strFlag(fs, &envs, "postgres", "QTOP_POSTGRES", "", "PostgreSQL DSN whose pg_stat_activity is sampled every second (a role with pg_monitor): the sessions of its database only, unless --postgres-all-databases"),
	}
	var err error
	if f.creds, err = credentialFlags(fs, &envs); err != nil {
		return nil, err
	}
	f.tls = newTLSFlags(fs, &envs)
	f.peerToken = secretFlagNote(fs, &envs, "peer-token", "QTOP_PEER_TOKEN", "peer credential: sent to --peers when asking for their views, and accepted from them as a read credential (default: the read token)", tokenFileNote)
	f.dataDir = strFlag(fs, &envs, "data-dir", "QTOP_DATA_DIR", collector.DefaultDataDir, "folder for the write-ahead log, the store spool, the policy and, with --postgres, pg_stat_statements' totals of the last minutes")
	f.writer = strFlag(fs, &envs, "writer", "QTOP_WRITER", "", "this collector's identity in the store (default: made once and kept in --data-dir)")
	f.grace = strFlag(fs, &envs, "grace", "QTOP_GRACE", collector.DefaultGrace.String(), "how long after a minute ends its rollups are written")
	f.refusalDelay = strFlag(fs, &envs, "refusal-delay", "QTOP_REFUSAL_DELAY", collector.DefaultRefusalDelay.String(), "how long the answer to a report refused for its content or credentials (400, 401, 413, 415) is held back, to slow a client sending junk in a loop (0: at once)")
	f.spoolMax = strFlag(fs, &envs, "spool-max-bytes", "QTOP_SPOOL_MAX_BYTES", "0", "cap of the on-disk spool while the store is down (0: 256 MiB)")
	f.limits = newLimitFlags(fs, &envs)
	f.otlp.grpc = strFlag(fs, &envs, "otlp-grpc", "QTOP_OTLP_GRPC", "", "address of the OTLP/gRPC trace receiver, e.g. 127.0.0.1:4317 (default off; off loopback it needs --token and --tls-cert, or --insecure; OTLP/HTTP is always on --listen at /v1/traces)")
	f.rlsListen = strFlag(fs, &envs, "rls-listen", "QTOP_RLS_LISTEN", "", "gRPC address of Envoy's rate-limit service, answered from the policy and fleet quotas, e.g. 127.0.0.1:8081 (default off; calls take the report token; off loopback it needs --token and --tls-cert, or --insecure; see docs/envoy.md)")
	f.otlp.maxRows = strFlag(fs, &envs, "otlp-max-rows", "QTOP_OTLP_MAX_ROWS", "0", "most tenants (and tenant×route×kind rows) one OTLP service's spans name in a second; spans of tenants beyond count under tenant other (qtop_otlp_spans_folded_total). Each row holds about 9 KiB while its second is open, per service (0: 512; at most 8192)")
	f.otlp.grpcConns = strFlag(fs, &envs, "otlp-grpc-max-conns", "QTOP_OTLP_GRPC_MAX_CONNS", "0", "most OTLP/gRPC connections at once, one per exporting process; one beyond is closed at once (the exporter retries) and counted in qtop_collector_grpc_connections_refused_total (0: 4096; an idle connection costs about 40 KiB)")
	f.otlp.grpcMax = strFlag(fs, &envs, "otlp-grpc-max-bytes", "QTOP_OTLP_GRPC_MAX_BYTES", "0", "largest OTLP/gRPC message, after gzip; a longer one is refused unread, and a stream's message may hold twice this of the memory budget as it arrives (0: 16 MiB)")
	f.otlp.tenant = strFlag(fs, &envs, "otlp-tenant-attribute", "QTOP_OTLP_TENANT_ATTRIBUTE", "tenant.id", "span attribute that holds the tenant of OTLP spans")
	f.otlp.ruModel = strFlag(fs, &envs, "otlp-ru-model", "QTOP_OTLP_RU_MODEL", "", "JSON file of the RU cost model (rucalib -json) that prices OTLP requests without a qtop.ru attribute (default: the agent's default model)")
	f.quotaRedis = strFlag(fs, &envs, "quota-redis", "QTOP_QUOTA_REDIS", "", "the Redis through which several collectors sum fleet-wide quota usage: host:port, redis://HOST:PORT[/DB] or rediss://HOST:PORT[/DB] for TLS, no credentials in it (user, password and CA from QTOP_REDIS_USER, QTOP_REDIS_PASSWORD[_FILE], QTOP_REDIS_CA_FILE; empty: one collector)")
	f.pprof = strFlag(fs, &envs, "pprof", "QTOP_PPROF", "", "loopback address on which to serve Go profiles (/debug/pprof/), e.g. 127.0.0.1:6060 (default off)")
	f.logFormat = strFlag(fs, &envs, "log-format", "QTOP_LOG_FORMAT", "text", "log format: text or json")
	f.logLevel = strFlag(fs, &envs, "log-level", "QTOP_LOG_LEVEL", "info", "log level: debug, info, warn, error")
	if f.demo, err = boolFlag(fs, &envs, "demo", "QTOP_DEMO", "run a synthetic fleet in process (dozens of tenants, a heavy import by bigcorp)"); err != nil {
		return nil, err
	}
	if f.shared, err = boolFlag(fs, &envs, "shared-policy", "QTOP_SHARED_POLICY", "keep the policy in the ClickHouse store, one policy for every collector writing to it"); err != nil {
		return nil, err
	}
	if f.clientDBTime, err = boolFlag(fs, &envs, "otlp-client-db-time", "QTOP_OTLP_CLIENT_DB_TIME", "keep the DB time OTLP statement spans measured, their clients' scheduling included (default with --postgres: each statement shape's time in the store is pg_stat_statements' for the minute, split between tenants by their calls and what the spans measured)"); err != nil {
		return nil, err
	}
	if f.pgAll, err = boolFlag(fs, &envs, "postgres-all-databases", "QTOP_POSTGRES_ALL_DATABASES", "sample the sessions of every database of the --postgres server, not only its DSN's: they count in the live view, history and cost reports, and budgets may cancel them"); err != nil {
		return nil, err
	}
	return f, nil
}

// config checks the parsed flags and makes the collector's Config, with a
// logger writing to stderr.
func (f *serveFlags) config(stderr io.Writer) (collector.Config, error) {
	log, err := newLogger(stderr, *f.logFormat, *f.logLevel)
	if err != nil {
		return collector.Config{}, err
	}
	logRedisTo(log)
	g, err := time.ParseDuration(*f.grace)
	if err != nil || g <= 0 {
		return collector.Config{}, fmt.Errorf("--grace %q: want a positive duration such as 10s", *f.grace)
	}
	rd, err := time.ParseDuration(*f.refusalDelay)
	if err != nil || rd < 0 {
		return collector.Config{}, fmt.Errorf("--refusal-delay %q: want a duration such as 1s, or 0", *f.refusalDelay)
	}
	if rd == 0 {
		rd = -1 // Config's zero is the default
	}
	sm, err := parseBytes("spool-max-bytes", *f.spoolMax)
	if err != nil {
		return collector.Config{}, err
	}
	dr, err := parseBytes("disk-reserve", *f.limits.diskReserve)
	if err != nil {
		return collector.Config{}, err
	}
	if dr == 0 {
		dr = -1 // Config's zero is the default
	}
	ret, err := parseRetention(*f.limits.retention)
	if err != nil {
		return collector.Config{}, err
	}
	cfg := collector.Config{
		Listen: *f.listen, Store: *f.storeURL, Postgres: *f.pg, PostgresAllDatabases: *f.pgAll,
		Demo: *f.demo, DataDir: *f.dataDir, Writer: *f.writer, Grace: g, Logger: log,
		StoreConfig:  collector.StoreConfig{SpoolMaxBytes: sm, Retention: ret},
		FleetConfig:  collector.FleetConfig{Cluster: *f.cluster, SharedPolicy: *f.shared},
		IntakeConfig: collector.IntakeConfig{RefusalDelay: rd, DiskReserve: dr},
		OTLPConfig:   collector.OTLPConfig{OTLPGRPC: *f.otlp.grpc, OTLPTenantAttribute: *f.otlp.tenant, OTLPClientDBTime: *f.clientDBTime},
		QuotaConfig:  collector.QuotaConfig{QuotaRedis: *f.quotaRedis},
	}
	// A long replay of the log after a crash is behind a 503, not a port
	// that a liveness probe finds dead.
	cfg.ListenFirst = true
	if cfg.OTLPGRPCMaxBytes, err = parseBytes("otlp-grpc-max-bytes", *f.otlp.grpcMax); err != nil {
		return collector.Config{}, err
	}
	if cfg.OTLPGRPCMaxBytes > 0 && cfg.OTLPGRPCMaxBytes < 64<<10 {
		// An SDK's batch of a few spans does not fit below.
		return collector.Config{}, fmt.Errorf("--otlp-grpc-max-bytes %q: at least 64KiB (0: the default, 16MiB)", *f.otlp.grpcMax)
	}
	if cfg.OTLPGRPCMaxConns, err = strconv.Atoi(*f.otlp.grpcConns); err != nil || cfg.OTLPGRPCMaxConns < 0 {
		return collector.Config{}, fmt.Errorf("--otlp-grpc-max-conns %q: want a number of connections (0: the default, %d)", *f.otlp.grpcConns, collector.DefaultOTLPGRPCMaxConns)
	}
	if cfg.OTLPMaxRows, err = strconv.Atoi(*f.otlp.maxRows); err != nil || cfg.OTLPMaxRows < 0 || cfg.OTLPMaxRows > 8192 {
		return collector.Config{}, fmt.Errorf("--otlp-max-rows %q: want a number of rows from 1 to 8192 (0: the default, 512)", *f.otlp.maxRows)
	}
	if cfg.OTLPRUModel, err = loadRUModel(*f.otlp.ruModel); err != nil {
		return collector.Config{}, err
	}
	if cfg.RLSListen = *f.rlsListen; cfg.RLSListen != "" {
		cfg.RLS = newRLS(cfg.OTLPRUModel)
	}
	if err := f.creds.apply(&cfg); err != nil {
		return collector.Config{}, err
	}
	f.tls.apply(&cfg)
	if err := f.limits.apply(&cfg); err != nil {
		return collector.Config{}, err
	}
	if err := f.peerToken.into(&cfg.PeerToken, &cfg.TokenFiles.PeerToken); err != nil {
		return collector.Config{}, err
	}
	if *f.peers != "" {
		cfg.Peers = strings.Split(*f.peers, ",")
	}
	return cfg, nil
}

// runServer runs a collector until SIGINT or SIGTERM, then shuts it down.
func runServer(cfg collector.Config) int {
	log := cfg.Logger
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s, err := collector.New(cfg)
	if err != nil {
		log.Error("cannot start", "err", err)
		return 1
	}
	if err := s.Start(ctx); err != nil {
		log.Error("cannot start", "err", err)
		s.Shutdown(context.Background())
		return 1
	}
	<-ctx.Done()
	log.Info("shutting down: writing open minutes and flushing the spool")
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Shutdown(sctx); err != nil {
		log.Error("shutdown", "err", err)
		return 1
	}
	log.Info("stopped")
	return 0
}

// flagGiven says whether the command line set flag name (not its
// environment variable, nor its default).
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

func report(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("report", reportUsage, stderr)
	var envs []envFlag
	from := fs.String("from", "24h", "start of the range (inclusive)")
	to := fs.String("to", "now", "end of the range (exclusive)")
	by := fs.String("by", "tenant", "tenant or tenant,route")
	measure := fs.String("measure", "ru", "what splits the cost: ru, db_time or requests")
	cost := fs.String("cost", "", "shared cost to split in proportion (e.g. 12000)")
	currency := fs.String("currency", "USD", "currency of --cost")
	tenantName := fs.String("tenant", "", "only this tenant's lines, each with its share and cost of every tenant's total (default: every tenant)")
	format := fs.String("format", "table", "table, csv or json (in table and csv the last row, (total), sums the others: leave it out when summing a column)")
	storeFlag := newStoreFlags(fs, &envs, "store to read: duckdb://PATH or clickhouse://HOST:PORT[,HOST:PORT…]/DB", nil)
	cluster := strFlag(fs, &envs, "cluster", "QTOP_CLUSTER", "", "ClickHouse cluster name")
	remote := strFlag(fs, &envs, "collector", "QTOP_COLLECTOR", "", "ask a running collector (host:port) instead of opening the store")
	readToken := secretFlag(fs, &envs, "read-token", "QTOP_READ_TOKEN", "the collector's read token, with --collector")
	var tlsFiles tlsfiles.ClientFiles // with an https:// --collector
	tlsFiles.RegisterFlags(fs)
	retention := strFlag(fs, &envs, "retention", "QTOP_RETENTION", "0", "with --store: the collector's --retention (e.g. 90d; 0: everything), so a report counts no minute past it, as the collector leaves them out (ClickHouse keeps the day that straddles it)")
	repeats := fs.Bool("repeats", false, "print the share of GETs per route that repeated an identical response within 24 h, and the freshness rules (needs --collector)")
	if code, done := parse(fs, args, stderr); done {
		return code
	}
	now := time.Now()
	req, outFormat, err := collector.ParseReportQuery(*from, *to, *by, *measure, *cost, *currency, *format, *tenantName, now)
	if err != nil {
		fmt.Fprintln(stderr, "collector report:", err)
		return 2
	}
	if outFormat == "" {
		outFormat = collector.FormatTable
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if *remote != "" && flagGiven(fs, "store") {
		fmt.Fprintln(stderr, "collector report: --store and --collector: give one (--collector asks a running collector, --store reads a store)")
		return 2
	}
	if *repeats || *remote != "" {
		rc, err := newRemote(*remote, readToken, tlsFiles)
		if err != nil {
			fmt.Fprintln(stderr, "collector report:", err)
			return 2
		}
		if *repeats {
			return repeatsReport(ctx, rc, outFormat, stdout, stderr)
		}
		return remoteReport(ctx, rc, req, *by, outFormat, stdout, stderr)
	}
	ret, err := parseRetention(*retention)
	if err != nil {
		fmt.Fprintln(stderr, "collector report:", err)
		return 2
	}
	return storeReport(ctx, storeFlag, *cluster, req, ret, now, outFormat, stdout, stderr)
}

// storeReport prints the report req read from the store of sf (on
// ClickHouse cluster, if named), kept for retention, at now.
func storeReport(ctx context.Context, sf storeFlags, cluster string, req collector.ReportRequest, ret time.Duration, now time.Time, outFormat string, stdout, stderr io.Writer) int {
	storeURL, err := sf.resolve("report", true, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "collector report:", err)
		return 1
	}
	st, err := collector.OpenExistingStore(ctx, storeURL, collector.Config{FleetConfig: collector.FleetConfig{Cluster: cluster}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Fprintln(stderr, "collector report:", err)
		if strings.Contains(err.Error(), "lock") {
			fmt.Fprintln(stderr, "collector report: a running collector holds the DuckDB file; ask it instead: --collector HOST:PORT")
		}
		return 1
	}
	defer st.Close()
	bar := newProgress(stderr, req.To.Sub(req.From) > 48*time.Hour)
	rep, err := collector.BuildRetainedReport(ctx, st, req, ret, now, bar.update)
	bar.done()
	if err != nil {
		fmt.Fprintln(stderr, "collector report:", err)
		return 1
	}
	if n := unwrittenNote(req.To, time.Now()); n != "" {
		rep.AddNote(n)
	}
	if rep.Note != "" && outFormat == collector.FormatCSV { // a CSV has no place for it
		fmt.Fprintln(stderr, "collector report: note:", rep.Note)
	}
	if err := rep.Write(stdout, outFormat, req.ByRoute); err != nil {
		fmt.Fprintln(stderr, "collector report:", err)
		return 1
	}
	return 0
}

// unwrittenNote says, of a report read from the store directly and
// ending at to, that its last minutes may not be written yet by a running
// collector (which writes a minute DefaultGrace after its end); "" when
// they are all older than that. Asked of a collector (--collector), the
// collector itself waits for them.
func unwrittenNote(to, now time.Time) string {
	first := now.Add(-time.Minute - collector.DefaultGrace).Truncate(time.Minute).Add(time.Minute)
	// The report counts whole minutes, up to to's.
	if !to.Truncate(time.Minute).After(first) {
		return ""
	}
	return fmt.Sprintf("a running collector writes a minute %v after its end: the minutes from %s may not be in the store yet and count nothing here "+
		"(end the report at %s, or ask the collector: --collector)", collector.DefaultGrace, first.UTC().Format(time.RFC3339), first.UTC().Format(time.RFC3339))
}

// hreqHost is the host:port of a --collector address.
func hreqHost(addr string) string {
	if u, err := url.Parse(addr); err == nil && u.Host != "" {
		return u.Host
	}
	return addr
}

// remote is how collector report reaches a running collector: its
// address, the read token and an HTTP client verifying its certificate
// against --ca-file (QTOP_CA_FILE), presenting --cert-file when asked.
type remote struct {
	addr, token string
	http        *http.Client
}

func newRemote(addr string, token *secret, files tlsfiles.ClientFiles) (remote, error) {
	t, err := token.get()
	if err != nil {
		return remote{}, err
	}
	tr, err := files.Transport()
	if err != nil {
		return remote{}, err
	}
	return remote{addr: addr, token: t, http: &http.Client{Transport: bearer{tr, t}}}, nil
}

// bearer adds the read token to every request that has no Authorization.
type bearer struct {
	next  http.RoundTripper
	token string
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	if b.token == "" || r.Header.Get("Authorization") != "" {
		return b.next.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// noAnswer says, for a request to the collector at addr that failed with
// err, that nothing answers there and what --collector takes, where that
// is why it failed (ok).
func noAnswer(addr string, err error) (msg string, ok bool) {
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" {
		return "", false
	}
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	return fmt.Sprintf("no collector answers at %s (%v): is `collector serve` running there? --collector takes the address of its --listen", addr, op.Err), true
}

// reportRetries is how often a report is asked again when the collector
// answers 503 with a Retry-After of at most maxReportWait: the minute a
// report ends in is written some seconds after it ends, so a report asked
// at :00 (an hourly job) waits for it rather than failing.
const (
	reportRetries = 3
	maxReportWait = 30 * time.Second
)

// waitRetry waits d or until ctx ends (tests replace it).
var waitRetry = func(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// reportWaiting asks for the report at u, waiting as the collector says
// when it answers 503 with a short Retry-After (see reportRetries).
func reportWaiting(ctx context.Context, rc remote, u string, stderr io.Writer) (*http.Response, error) {
	for try := 0; ; try++ {
		hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return nil, err
		}
		if rc.token != "" {
			hreq.Header.Set("Authorization", "Bearer "+rc.token)
		}
		resp, err := rc.http.Do(hreq)
		if err != nil || resp.StatusCode != http.StatusServiceUnavailable || try == reportRetries {
			return resp, err
		}
		secs, perr := strconv.Atoi(resp.Header.Get("Retry-After"))
		if perr != nil || secs < 0 || time.Duration(secs)*time.Second > maxReportWait {
			return resp, nil
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		var e struct {
			Error string `json:"error"`
		}
		json.Unmarshal(b, &e)
		fmt.Fprintf(stderr, "collector report: %s; asking again in %d s\n", printable(e.Error), secs)
		if err := waitRetry(ctx, time.Duration(secs)*time.Second); err != nil {
			return nil, err
		}
	}
}

func remoteReport(ctx context.Context, rc remote, req collector.ReportRequest, by, format string, stdout, stderr io.Writer) int {
	addr := rc.addr
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	q := url.Values{}
	q.Set("from", req.From.Format(time.RFC3339))
	q.Set("to", req.To.Format(time.RFC3339))
	q.Set("by", by)
	q.Set("measure", req.Measure)
	if req.Cost > 0 {
		q.Set("cost", strconv.FormatFloat(req.Cost, 'f', -1, 64))
	}
	q.Set("currency", req.Currency)
	q.Set("format", format)
	if req.Tenant != "" {
		q.Set("tenant", req.Tenant)
	}
	resp, err := reportWaiting(ctx, rc, strings.TrimSuffix(addr, "/")+"/v1/report?"+q.Encode(), stderr)
	if err != nil {
		if msg, ok := noAnswer(addr, err); ok {
			err = errors.New(msg)
		}
		fmt.Fprintln(stderr, "collector report:", err)
		return 1
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return remoteReportFailed(resp, addr, stderr)
	}
	if n := resp.Header.Get(collector.NoteHeader); n != "" && format == collector.FormatCSV {
		fmt.Fprintln(stderr, "collector report: note:", printable(n)) // a CSV has no place for it
	}
	io.Copy(stdout, resp.Body)
	return 0
}

// remoteReportFailed says why the collector at addr refused a report, in
// its own words, and returns the exit code.
func remoteReportFailed(resp *http.Response, addr string, stderr io.Writer) int {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	msg := strings.TrimSpace(string(b))
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error != "" {
		msg = e.Error // the collector's words, not its JSON
		if ra := resp.Header.Get("Retry-After"); ra != "" {
			msg += " (retry in " + ra + " s)"
		}
	}
	if resp.StatusCode == http.StatusBadRequest && strings.Contains(msg, "HTTP request to an HTTPS server") {
		msg += " The collector serves TLS: give --collector https://" + hreqHost(addr) + " (and --ca-file for a private CA)."
	}
	fmt.Fprintf(stderr, "collector report: %s: %s\n", resp.Status, printable(msg))
	if resp.StatusCode == http.StatusUnauthorized {
		fmt.Fprintln(stderr, "collector report: pass the collector's read token (its --read-token-file; the admin token, DATA_DIR/admin-token, reads too): --read-token-file FILE or QTOP_READ_TOKEN")
	}
	return 1
}

// progress draws a bar on stderr, only when stderr is a terminal and the
// range is long enough to be worth it.
type progress struct {
	w     io.Writer
	on    bool
	drawn bool
}

func newProgress(w io.Writer, long bool) *progress {
	p := &progress{w: w}
	if f, ok := w.(*os.File); ok && long {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.on = true
		}
	}
	return p
}

func (p *progress) update(done float64) {
	if !p.on {
		return
	}
	const width = 40
	n := int(done * width)
	fmt.Fprintf(p.w, "\r[%s%s] %3.0f%%", strings.Repeat("#", n), strings.Repeat(".", width-n), 100*done)
	p.drawn = true
}

func (p *progress) done() {
	if p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
