// Command gate is qtop's reverse proxy: it puts the agent's request path
// (tenant, admission, charge, one record per request, the collector's
// policy) in front of an HTTP service written in any language. See
// package gate and `gate --help`.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/qtop-dev/qtop/agent"
	"github.com/qtop-dev/qtop/freshness"
	"github.com/qtop-dev/qtop/gate"
	"github.com/qtop-dev/qtop/internal/buildinfo"
	"github.com/qtop-dev/qtop/internal/pprofserve"
	"github.com/qtop-dev/qtop/meter"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/tlsfiles"
)

const usage = `gate — qtop's reverse proxy in front of a service written in any language

Every request is attributed to its tenant, admitted by qtop (tier
shedding, CoDel, the tenant's RU bucket, the collector's throttles, fleet
quotas and freshness rules), forwarded to --upstream, charged its real
cost when the upstream has answered and recorded once. The gate reports
to --collector every --interval as a process of --service and applies
the policy of the replies: nothing on the request path calls anything
remote. Refused requests get 429 + Retry-After (throttled) or 503 (shed);
an upstream that is down gets 502, one that is too slow 504.

Usage:
  gate --upstream http://127.0.0.1:3000 --service shop-node [flags]

Examples:
  # A Node.js service on :3000, tenants in X-Tenant/X-Tier set by the edge:
  gate --listen :8080 --upstream http://127.0.0.1:3000 --service shop-node \
       --collector http://collector:7070 --token-file /etc/qtop/report.token

  # Tenant from an HS256 JWT (claims "tenant" and "tier"), else from baggage:
  gate --upstream http://127.0.0.1:3000 --service api --tenant jwt,baggage \
       --jwt-key-file /etc/qtop/jwt.key

  # Tenant from the identity provider's tokens (RS256/ES256/EdDSA by kid):
  gate --upstream http://127.0.0.1:3000 --service api --tenant jwt \
       --jwks-url https://idp.example.com/.well-known/jwks.json \
       --jwt-issuer https://idp.example.com/ --jwt-audience api --jwt-tenant-claim org_id

  # Tenant from the first path segment (/acme/orders), metrics on :9101:
  QTOP_UPSTREAM=http://127.0.0.1:3000 QTOP_SERVICE=api QTOP_GATE_TENANT=path \
  gate --metrics-listen 127.0.0.1:9101

The tenant reaches the upstream as W3C baggage (tenant.id, tenant.tier),
which OpenTelemetry instrumentation puts on its spans.

GOGC is 400 unless set in the environment (a few MB of heap more, the
garbage collector's CPU cut by about four; GOGC=100 for Go's default).
The heap may grow to five times what is live: under a container memory
limit, set GOMEMLIMIT to about 90% of it.
GOMAXPROCS=1 costs 10-20% less CPU a request where the gate uses well
under a core (no idle P's thread spinning for work at each wake-up),
and caps it at one core.

Flags (each also read from the environment variable in brackets):
`

func main() {
	setGC()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, nil))
}

// gcPercent is the gate's GOGC unless the environment sets one. The
// gate's live heap is a few MB, so at Go's default of 100 the garbage
// collector ran about 11 times a second at 5,000 req/s, each cycle a
// few ms of CPU and a pause of up to 2 ms; at 400 it runs about twice a
// second for a heap of ~16 MB instead of ~5.
const gcPercent = 400

func setGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
}

// flags are the parsed command line.
type flags struct {
	listen, upstream, service, collector, token, tokenFile string
	tenantFlags
	proxyFlags
	slots, reportQueue                              int
	grace, drainDelay, interval                     time.Duration
	shadow, version                                 bool
	etagKeyFile, metricsListen, logFormat, logLevel string
	plans, pprof                                    string
	tls                                             tlsfiles.ClientFiles // to the collector
}

// tenantFlags say where the tenant is found.
type tenantFlags struct {
	tenant, tenantHeader, tierHeader string
	jwt                              jwtFlags
	pathSegment                      int
}

// proxyFlags tune the proxy.
type proxyFlags struct {
	maxIdle                                              int
	maxConns, maxHeaderBytes                             int
	timeout, dialTimeout, sendTimeout, bodyTimeout       time.Duration
	readTimeout                                          time.Duration
	flushInterval                                        time.Duration
	h2cUpstream, preserveHost, trustForwarded, noBaggage bool
	stdTransport, stdServer                              bool
}

func parse(args []string, stderr io.Writer) (flags, error) {
	var f flags
	fs := flag.NewFlagSet("gate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	b := binder{fs: fs}
	b.str(&f.listen, "listen", "QTOP_GATE_LISTEN", ":8080", "address the gate answers on (HTTP/1.1 and h2c)")
	b.str(&f.upstream, "upstream", "QTOP_UPSTREAM", "", "the service behind the gate, http://host:port (required)")
	b.str(&f.service, "service", "QTOP_SERVICE", "", "the service's name in qtop; the gate reports as one of its processes (required)")
	b.str(&f.collector, "collector", "QTOP_COLLECTOR", "", "the collector, http(s)://host:7070 (empty: enforce locally, report nothing); https is verified with --ca-file")
	b.str(&f.token, "token", "QTOP_TOKEN", "", "the collector's report token (prefer --token-file)")
	b.str(&f.tokenFile, "token-file", "QTOP_TOKEN_FILE", "", "file holding the collector's report token, read again when it changes (a file renamed into place, a Kubernetes Secret update): a rotation needs no restart")
	b.str(&f.tenant, "tenant", "QTOP_GATE_TENANT", "header,baggage", "where the tenant is found, tried in order: header, jwt, path, baggage")
	b.str(&f.tenantHeader, "tenant-header", "QTOP_GATE_TENANT_HEADER", "X-Tenant", "header holding the tenant (set by a trusted edge); the upstream gets it set to the tenant the gate read, from whichever source")
	b.str(&f.tierHeader, "tier-header", "QTOP_GATE_TIER_HEADER", "X-Tier", "header holding the tier T0…T3 (empty: none); the upstream gets it set to the tier the gate read, or not at all")
	b.jwtFlags(&f.jwt)
	b.int(&f.pathSegment, "path-segment", "QTOP_GATE_PATH_SEGMENT", 0, "path segment holding the tenant for --tenant path (0: /acme/…)")
	b.int(&f.slots, "slots", "QTOP_GATE_SLOTS", 1024, "requests served at once before CoDel queues them (event streams and WebSockets give theirs back once answered; 0: no queue)")
	b.int(&f.maxIdle, "max-idle-conns", "QTOP_GATE_MAX_IDLE_CONNS", gate.DefaultMaxIdleConnsPerHost, "keep-alive connections kept open to the upstream")
	b.int(&f.maxConns, "max-conns", "QTOP_GATE_MAX_CONNS", 0, "client connections kept open at once; at the bound the one idle the longest is closed to make room, as nginx does (qtop_gate_connections_closed_total) (0: half the open-file limit, at most 10000)")
	b.int(&f.maxHeaderBytes, "max-header-bytes", "QTOP_GATE_MAX_HEADER_BYTES", gate.DefaultMaxHeaderBytes, "longest request head (request line and headers) taken; a longer one is answered 431 (at least 4096)")
	b.dur(&f.timeout, "upstream-timeout", "QTOP_GATE_UPSTREAM_TIMEOUT", gate.DefaultTimeout, "wait for the upstream's response headers, or for it to take more of a request body it stopped reading, before answering 504")
	b.dur(&f.readTimeout, "upstream-read-timeout", "QTOP_GATE_UPSTREAM_READ_TIMEOUT", gate.DefaultReadTimeout, "cut off an answer (body, event stream, WebSocket) of which nothing more arrives from the upstream for this long after its headers, as nginx's proxy_read_timeout (-1ns: never)")
	b.dur(&f.dialTimeout, "dial-timeout", "QTOP_GATE_DIAL_TIMEOUT", gate.DefaultDialTimeout, "wait for a connection to the upstream before answering 502")
	b.dur(&f.sendTimeout, "send-timeout", "QTOP_GATE_SEND_TIMEOUT", gate.DefaultSendTimeout, "cut off a client that reads nothing of its response for this long, giving its admission slot back (-1ns: never)")
	b.dur(&f.bodyTimeout, "body-timeout", "QTOP_GATE_BODY_TIMEOUT", gate.DefaultBodyTimeout, "answer 408 to a client that sends nothing more of its request body for this long, giving its admission slot back (-1ns: never)")
	b.dur(&f.flushInterval, "flush-interval", "QTOP_GATE_FLUSH_INTERVAL", 0, "flush response bodies this often (0: event streams and bodies of unknown length at once, others buffered; -1ns: every write)")
	b.dur(&f.grace, "grace", "QTOP_GATE_GRACE", 30*time.Second, "on SIGTERM/SIGINT, how long requests in flight may finish (a second signal stops at once)")
	b.dur(&f.drainDelay, "drain-delay", "QTOP_GATE_DRAIN_DELAY", 0, "on SIGTERM/SIGINT, keep serving this long with /readyz at 503 before draining, while load balancers stop sending (e.g. 5s under Kubernetes)")
	b.dur(&f.interval, "interval", "QTOP_GATE_INTERVAL", time.Second, "how often the gate reports to the collector")
	b.int(&f.reportQueue, "report-queue", "QTOP_GATE_REPORT_QUEUE", defaultReportQueue, "reports kept while the collector cannot take them (down, or refusing the token), one an --interval: the default rides out 5 minutes at 1s; beyond it the oldest are dropped and logged (each costs ~0.2 KB + 60 bytes a tenant × route row)")
	b.bool(&f.h2cUpstream, "h2c-upstream", "QTOP_GATE_H2C_UPSTREAM", "speak HTTP/2 without TLS (h2c) to the upstream")
	b.bool(&f.stdTransport, "std-transport", "QTOP_GATE_STD_TRANSPORT", "send every request upstream through Go's net/http Transport (default: the gate's own HTTP/1.1 client for requests without a body or with one up to 64 KiB, which costs less CPU)")
	b.bool(&f.stdServer, "std-server", "QTOP_GATE_STD_SERVER", "answer every request with Go's net/http server (default: the gate's own HTTP/1.1 server answers requests without a body or with one up to 64 KiB and hands the rest — h2c, upgrades, large or chunked uploads — to net/http's, which costs less CPU)")
	b.bool(&f.preserveHost, "preserve-host", "QTOP_GATE_PRESERVE_HOST", "send the client's Host header upstream (default: the upstream's)")
	b.bool(&f.trustForwarded, "trust-forwarded", "QTOP_GATE_TRUST_FORWARDED", "keep incoming X-Forwarded-For, -Proto and -Host (only behind a trusted load balancer)")
	b.bool(&f.noBaggage, "no-baggage", "QTOP_GATE_NO_BAGGAGE", "do not send the tenant upstream as W3C baggage")
	b.bool(&f.shadow, "shadow", "QTOP_GATE_SHADOW", "shadow mode: decide, count and report, refuse nothing")
	b.str(&f.plans, "plans", "QTOP_GATE_PLANS", "", "JSON file of plans and each tenant's plan (default: free 100 RU/s for every tenant; see README)")
	b.str(&f.etagKeyFile, "etag-key-file", "QTOP_GATE_ETAG_KEY_FILE", "", "file holding the ETag signing key: turns on the freshness shedder (304 under overload, by the collector's rules)")
	b.str(&f.metricsListen, "metrics-listen", "QTOP_GATE_METRICS_LISTEN", "", "address of /metrics (qtop_gate_*, the agent's, Go's), /healthz and /readyz (503 once draining, for a load balancer's or Kubernetes' readiness probe); empty: off")
	b.str(&f.pprof, "pprof", "QTOP_GATE_PPROF", "", "loopback address on which to serve Go profiles (/debug/pprof/), e.g. 127.0.0.1:6060 (default off)")
	b.str(&f.logFormat, "log-format", "QTOP_LOG_FORMAT", "text", "log format: text or json")
	b.str(&f.logLevel, "log-level", "QTOP_LOG_LEVEL", "info", "log level: debug, info, warn, error")
	f.tls.RegisterFlags(fs)
	fs.BoolVar(&f.version, "version", false, "print the version and exit")
	if b.err != nil {
		return f, b.err
	}
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return f, b.checkDurations()
}

// ready, when not nil, receives the gate's address once it listens (for
// tests).
func run(args []string, stdout, stderr io.Writer, ready chan<- string) int {
	f, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return fail(stderr, err)
	}
	if f.version {
		buildinfo.Print(stdout, "gate")
		return 0
	}
	log, err := newLogger(stderr, f.logFormat, f.logLevel)
	if err != nil {
		return fail(stderr, err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	// The key set's refresh lives as long as the process (a drain
	// still verifies tokens).
	keys, dropKeys := context.WithCancel(context.Background())
	defer dropKeys()
	reg := prometheus.NewRegistry()
	g, err := build(keys, f, reg, log)
	if err != nil {
		return fail(stderr, err)
	}
	return serve(ctx, f, g, reg, log, ready)
}

// fail says err once, prefixed "gate:" (errors of the gate package carry
// the prefix already), and returns the exit code of a bad invocation.
func fail(stderr io.Writer, err error) int {
	fmt.Fprintln(stderr, "gate:", strings.TrimPrefix(err.Error(), "gate: "))
	return 2
}

// build makes the agent and the gate from the flags.
func build(ctx context.Context, f flags, reg *prometheus.Registry, log *slog.Logger) (*gate.Gate, error) {
	if f.upstream == "" || f.service == "" {
		return nil, errors.New("--upstream and --service are required (see --help)")
	}
	up, err := url.Parse(f.upstream)
	if err != nil || up.Host == "" {
		return nil, fmt.Errorf("--upstream %q: want the service's URL, http://HOST:PORT (or https://)", f.upstream)
	}
	opts, err := agentOptions(ctx, f, log)
	if err != nil {
		return nil, err
	}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildinfo.Collector())
	opts = append(opts, agent.WithRegisterer(reg), agent.WithLogger(log))
	a, err := agent.New(opts...)
	if err != nil {
		return nil, err
	}
	g, err := gate.New(a, gate.Config{Upstream: up, TenantHeader: f.tenantHeader, TierHeader: f.tierHeader, Timeout: f.timeout, DialTimeout: f.dialTimeout, SendTimeout: f.sendTimeout, BodyTimeout: f.bodyTimeout, ReadTimeout: f.readTimeout,
		MaxIdleConnsPerHost: f.maxIdle, MaxConns: f.maxConns, MaxHeaderBytes: f.maxHeaderBytes, FlushInterval: f.flushInterval, H2CUpstream: f.h2cUpstream,
		PreserveHost: f.preserveHost, TrustForwarded: f.trustForwarded, NoBaggage: f.noBaggage,
		StdTransport: f.stdTransport, StdServer: f.stdServer, Registerer: reg, Logger: log})
	if err != nil {
		a.Shutdown(context.Background())
		return nil, err
	}
	return g, nil
}

// agentOptions turns the flags into the agent's options.
func agentOptions(ctx context.Context, f flags, log *slog.Logger) ([]agent.Option, error) {
	tf, err := tenantFunc(ctx, f, log)
	if err != nil {
		return nil, err
	}
	opts := []agent.Option{agent.WithService(f.service), agent.WithInstance(gateInstance()), agent.WithTenant(tf),
		agent.WithTenantHint(tenantHint(f)), agent.WithSlots(f.slots), agent.WithInterval(f.interval)}
	if f.collector != "" {
		if f.reportQueue < 1 {
			return nil, fmt.Errorf("--report-queue %d: want ≥ 1", f.reportQueue)
		}
		opts = append(opts, agent.WithCollector(f.collector, f.token), agent.WithReportQueue(f.reportQueue))
		if f.tokenFile != "" {
			// Read again when it changes: the collector switches tokens
			// at once, so a gate that read it only at start lost its
			// reports from a rotation until it restarted.
			if _, err := meter.ReadTokenFile(f.tokenFile); err != nil {
				return nil, fmt.Errorf("--token-file: %w", err)
			}
			opts = append(opts, agent.WithTokenFile(f.tokenFile))
		}
		if !f.tls.Empty() {
			opts = append(opts, agent.WithCollectorTLS(f.tls))
		}
	}
	if f.plans != "" {
		plans, planOf, err := readPlans(f.plans)
		if err != nil {
			return nil, err
		}
		opts = append(opts, agent.WithPlans(plans, planOf))
	}
	if f.shadow {
		opts = append(opts, agent.WithShadow())
	}
	if f.etagKeyFile != "" {
		key, err := os.ReadFile(f.etagKeyFile)
		if err != nil {
			return nil, fmt.Errorf("--etag-key-file: %w", err)
		}
		s, err := freshness.NewETagSigner([]byte(strings.TrimSpace(string(key))))
		if err != nil {
			return nil, fmt.Errorf("--etag-key-file: %w", err)
		}
		opts = append(opts, agent.WithFreshness(s))
	}
	return opts, nil
}

// defaultReportQueue is the gate's report queue: 5 minutes of reports at
// the default --interval (a collector restart or a token rotation takes
// longer than the reporter's minute), under a megabyte for a gate's
// usual few dozen rows.
const defaultReportQueue = 300

// tenantFunc builds the --tenant chain from the agent's extractors.
func tenantFunc(ctx context.Context, f flags, log *slog.Logger) (agent.TenantFunc, error) {
	var fs []agent.TenantFunc
	for _, src := range strings.Split(f.tenant, ",") {
		switch strings.TrimSpace(src) {
		case "header":
			fs = append(fs, agent.FromHeader(f.tenantHeader, f.tierHeader))
		case "baggage":
			fs = append(fs, agent.FromBaggage())
		case "path":
			fs = append(fs, agent.FromPathSegment(f.pathSegment))
		case "jwt":
			tf, err := jwtTenant(ctx, f.jwt, log)
			if err != nil {
				return nil, err
			}
			fs = append(fs, tf)
		default:
			return nil, fmt.Errorf("--tenant %q: want a list of header, jwt, path, baggage", f.tenant)
		}
	}
	if len(fs) == 1 {
		return fs[0], nil
	}
	return agent.FirstOf(fs...), nil
}

// tenantHint tells a client whose request carries no tenant where the
// gate looks for one (--tenant), in its order.
func tenantHint(f flags) string {
	var where []string
	for _, src := range strings.Split(f.tenant, ",") {
		switch strings.TrimSpace(src) {
		case "header":
			where = append(where, "the "+f.tenantHeader+" header")
		case "baggage":
			where = append(where, "the W3C baggage member tenant.id")
		case "path":
			where = append(where, fmt.Sprintf("the path's segment %d (counting from 0)", f.pathSegment))
		case "jwt":
			where = append(where, "the "+f.jwt.tenantClaim+" claim of a bearer JWT")
		}
	}
	return "the gate reads it from " + strings.Join(where, ", then ")
}

// serve runs the gate (and /metrics) until ctx is done, then drains.
func serve(ctx context.Context, f flags, g *gate.Gate, reg *prometheus.Registry, log *slog.Logger, ready chan<- string) int {
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		log.Error("gate: listen", "err", err)
		g.Shutdown(context.Background())
		return 1
	}
	var draining atomic.Bool // /readyz answers 503 from the signal on
	msrv, metricsAddr, err := serveMetrics(f.metricsListen, reg, &draining, log)
	if err != nil {
		log.Error("gate: metrics listen", "err", err)
		ln.Close()
		g.Shutdown(context.Background())
		return 1
	}
	if f.pprof != "" {
		_, stopPprof, err := pprofserve.Serve(f.pprof, log)
		if err != nil {
			log.Error("gate: pprof", "err", err)
			ln.Close()
			g.Shutdown(context.Background())
			return 1
		}
		defer stopPprof()
	}
	errc := make(chan error, 1)
	go func() { errc <- g.Serve(ln) }()
	log.Info("gate: listening", "addr", ln.Addr().String(), "upstream", f.upstream, "service", f.service)
	if ready != nil {
		ready <- ln.Addr().String()
		if msrv != nil {
			ready <- metricsAddr
		}
	}
	code := 0
	signalled := false
	select {
	case <-ctx.Done():
		signalled = true
	case err := <-errc:
		log.Error("gate: serve", "err", err)
		code = 1
	}
	draining.Store(true)
	if !drain(f, g, signalled, log) {
		code = 1
	}
	if msrv != nil {
		msrv.Close()
	}
	log.Info("gate: stopped")
	return code
}

// serveMetrics serves /metrics, /healthz and /readyz (503 once draining)
// on addr; nothing when addr is empty.
func serveMetrics(addr string, reg *prometheus.Registry, draining *atomic.Bool, log *slog.Logger) (*http.Server, string, error) {
	if addr == "" {
		return nil, "", nil
	}
	mln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if draining.Load() {
			// A load balancer or Kubernetes stops sending new requests.
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "draining\n")
			return
		}
		io.WriteString(w, "ready\n")
	})
	msrv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go msrv.Serve(mln)
	log.Info("gate: metrics", "addr", mln.Addr().String())
	return msrv, mln.Addr().String(), nil
}

// drain stops the gate after a signal (signalled) or a failure of its
// server: the drain delay first (after a signal), then the requests in
// flight for up to the grace. A second SIGTERM or SIGINT stops waiting
// for either. It reports whether every request finished.
func drain(f flags, g *gate.Gate, signalled bool, log *slog.Logger) bool {
	now, finished := make(chan struct{}), make(chan struct{})
	defer close(finished)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	defer signal.Stop(sig)
	go func() {
		select {
		case <-sig:
			log.Warn("gate: second signal: stopping now", "in_flight", g.InFlight())
			close(now)
		case <-finished:
		}
	}()
	if signalled && f.drainDelay > 0 {
		// Load balancers and Kubernetes take a while to stop sending
		// after /readyz turns 503: the gate keeps serving meanwhile.
		log.Info("gate: not ready; still serving, each connection closed after its next answer", "for", f.drainDelay)
		g.EndKeepAlives()
		t := time.NewTimer(f.drainDelay)
		select {
		case <-t.C:
		case <-now:
			t.Stop()
		}
	}
	log.Info("gate: draining", "grace", f.grace, "in_flight", g.InFlight())
	dctx, cancel := context.WithTimeout(context.Background(), f.grace)
	defer cancel()
	go func() {
		select {
		case <-now:
			cancel()
		case <-dctx.Done():
		case <-finished:
		}
	}()
	if err := g.Shutdown(dctx); err != nil {
		if n := g.InFlight(); n > 0 {
			// Event streams and WebSockets are the usual ones left.
			log.Error("gate: drain ended with requests still in flight", "err", err, "in_flight", n)
		} else {
			log.Error("gate: shutdown", "err", err) // the last report, say
		}
		return false
	}
	return true
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	o := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, o)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, o)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// binder defines flags whose defaults come from environment variables.
type binder struct {
	fs   *flag.FlagSet
	err  error
	durs []string // the duration flags, none of which may be negative (checkDurations)
}

// checkDurations refuses a negative duration flag by its name.
func (b *binder) checkDurations() error {
	for _, name := range b.durs {
		if d := b.fs.Lookup(name).Value.(flag.Getter).Get().(time.Duration); d < 0 {
			return fmt.Errorf("--%s %v: want a duration ≥ 0", name, d)
		}
	}
	return nil
}

func (b *binder) str(p *string, name, env, def, help string) {
	if v, ok := os.LookupEnv(env); ok {
		def = v
	}
	b.fs.StringVar(p, name, def, help+" ($"+env+")")
}

func (b *binder) int(p *int, name, env string, def int, help string) {
	if v, ok := os.LookupEnv(env); ok {
		n, err := strconv.Atoi(v)
		if err != nil && b.err == nil {
			b.err = fmt.Errorf("$%s=%q: want an integer", env, v)
		}
		def = n
	}
	b.fs.IntVar(p, name, def, help+" ($"+env+")")
}

func (b *binder) dur(p *time.Duration, name, env string, def time.Duration, help string) {
	if v, ok := os.LookupEnv(env); ok {
		d, err := time.ParseDuration(v)
		if err != nil && b.err == nil {
			b.err = fmt.Errorf("$%s=%q: want a duration such as 30s", env, v)
		}
		def = d
	}
	b.fs.DurationVar(p, name, def, help+" ($"+env+")")
	b.durs = append(b.durs, name)
}

func (b *binder) bool(p *bool, name, env, help string) {
	def := false
	if v, ok := os.LookupEnv(env); ok && v != "" {
		x, err := strconv.ParseBool(v)
		if err != nil && b.err == nil {
			b.err = fmt.Errorf("$%s=%q: want true or false", env, v)
		}
		def = x
	}
	b.fs.BoolVar(p, name, def, help+" ($"+env+")")
}

// gateInstance is this process's instance id, marked as a gate's so that
// the collector counts it among the processes that apply the policy.
func gateInstance() string {
	var b [8]byte
	rand.Read(b[:])
	return report.GateInstanceMark + hex.EncodeToString(b[:])
}
