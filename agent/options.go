package agent

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/qtop-dev/qtop/enforce"
	"github.com/qtop-dev/qtop/freshness"
	"github.com/qtop-dev/qtop/meter"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/ru"
	"github.com/qtop-dev/qtop/sqlcomment"
	"github.com/qtop-dev/qtop/tlsfiles"
)

// Option configures New.
type Option func(*config)

type config struct {
	collector, token string
	service          string
	instance         string // WithInstance; empty: made by the recorder
	tenant           tenantSource
	plans            map[string]enforce.Plan
	planOf           func(tenant string) string
	shadow           []enforce.Rule
	shadowAll        bool
	reg              prometheus.Registerer
	logger           *slog.Logger
	slots            int
	interval         time.Duration
	op               func(*http.Request) ru.Op
	model            *ru.Model
	tp               *sdktrace.TracerProvider
	baggage          bool
	maxPoolTenants   int
	budgets          *sqlcomment.Budgets
	freshSigner      *freshness.ETagSigner
	freshOpts        []freshness.Option
	sqlMode          sqlcomment.Mode         // WithSQLTagging
	sqlNames         *sqlcomment.TenantNames // the ids of session tags
	tlsFiles         *tlsfiles.ClientFiles   // WithCollectorTLS; nil: the environment's
	reportOpts       []meter.ReporterOption  // WithTokenFile, WithTokenFunc, WithReportQueue
}

// WithCollector sends the agent's reports to the collector at base (for
// example "http://collector:7070"), with "Authorization: Bearer token"
// when token is not empty (WithTokenFile or WithTokenFunc for a token
// that is rotated), and applies the policy of its replies and
// their fleet-wide quota verdicts (package quota: a quota rule limits the
// tenant across every process that reports).
// Without it the agent enforces and records locally and sends nothing.
// Over https, the collector's certificate is verified against
// QTOP_CA_FILE (default: the system's roots), and QTOP_CERT_FILE and
// QTOP_KEY_FILE are the client certificate when the collector requires
// mTLS (see package tlsfiles), unless WithCollectorTLS says otherwise.
func WithCollector(base, token string) Option {
	return func(c *config) { c.collector, c.token = base, token }
}

// WithTokenFile reads the report token from path instead of taking
// WithCollector's, and again before a report when the file has changed
// (another file renamed into place, a Kubernetes Secret's ..data swap),
// so a rotation needs no restart: the collector takes a new token at
// once, with no overlap, and reports it refuses meanwhile are kept (up
// to WithReportQueue). New fails if the file cannot be read or is empty;
// later such a file keeps the last token and is logged.
func WithTokenFile(path string) Option {
	return func(c *config) { c.reportOpts = append(c.reportOpts, meter.WithTokenFile(path)) }
}

// WithTokenFunc asks fn for the report token before each report, instead
// of taking WithCollector's: for a token that a secret store rotates. fn
// should return quickly.
func WithTokenFunc(fn func() string) Option {
	return func(c *config) { c.reportOpts = append(c.reportOpts, meter.WithTokenFunc(fn)) }
}

// WithReportQueue bounds the reports kept while the collector cannot take
// them (down, or refusing the token); beyond it the oldest are dropped,
// counted and logged. One report an interval: the default,
// meter.DefaultQueueLen, covers a minute at the default interval. See
// meter.WithQueueLen for what a kept report costs.
func WithReportQueue(n int) Option {
	return func(c *config) { c.reportOpts = append(c.reportOpts, meter.WithQueueLen(n)) }
}

// WithCollectorTLS names the CA and client certificate files used to
// reach the collector, instead of the environment's.
func WithCollectorTLS(files tlsfiles.ClientFiles) Option {
	return func(c *config) { c.tlsFiles = &files }
}

// WithService names the service in reports and SQL comments (default
// the program name).
func WithService(name string) Option { return func(c *config) { c.service = name } }

// WithTenant sets how the middleware finds a request's tenant (default
// FromContext, then FromBaggage: tags set by an earlier middleware, or
// sent by a trusted upstream service). See FromHeader, FromJWT,
// FromPathSegment and FirstOf.
func WithTenant(f TenantFunc) Option { return func(c *config) { c.tenant.extract = f } }

// tenantSource is where requests' tenants come from (WithTenant) and what
// a request without one is told (WithTenantHint).
type tenantSource struct {
	extract TenantFunc
	hint    string
}

// WithTenantHint adds hint to the 400 answer of a request that carries no
// tenant (ErrNoTenant), so that the client learns where to put it: for
// example "send it in the X-Tenant header". Default: none.
func WithTenantHint(hint string) Option { return func(c *config) { c.tenant.hint = hint } }

// WithPlans sets the plan table and how a tenant's plan is found
// (default enforce.DefaultPlans, every tenant on "free").
func WithPlans(plans map[string]enforce.Plan, planOf func(tenant string) string) Option {
	return func(c *config) { c.plans, c.planOf = plans, planOf }
}

// WithShadow runs the given enforcement stages in shadow mode (all of
// them when none is given): decided, counted, reported and logged, but
// not applied.
func WithShadow(rules ...enforce.Rule) Option {
	return func(c *config) {
		if len(rules) == 0 {
			c.shadowAll = true
		}
		c.shadow = append(c.shadow, rules...)
	}
}

// WithRegisterer exports the recorder's, reporter's and enforcer's
// metrics on reg (default: none; the global registerer is never used).
func WithRegisterer(reg prometheus.Registerer) Option { return func(c *config) { c.reg = reg } }

// WithLogger sets where the agent logs (default: nowhere): shadow
// decisions at debug level, failed jobs at warn.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithSlots sets how many requests the middleware serves at once before
// CoDel queues them (default 256; 0 turns the queue off).
func WithSlots(n int) Option { return func(c *config) { c.slots = n } }

// WithInterval sets how often a report is sent (default 1 s).
func WithInterval(d time.Duration) Option { return func(c *config) { c.interval = d } }

// WithOp sets how a request is priced (default: GET, HEAD and OPTIONS
// read, DELETE deletes, anything else writes).
func WithOp(f func(*http.Request) ru.Op) Option { return func(c *config) { c.op = f } }

// WithCostModel sets the RU cost model (default ru.DefaultModel).
func WithCostModel(m ru.Model) Option { return func(c *config) { c.model = &m } }

// WithTracerProvider turns tracing on: the middleware starts a server
// span per request on tp, and the agent registers its span processor on
// tp, which tags every span with its tenant (tenant.id, tenant.tier) and
// records consumer spans of other instrumentation as jobs.
func WithTracerProvider(tp *sdktrace.TracerProvider) Option { return func(c *config) { c.tp = tp } }

// WithBaggage also puts each request's tenant in the W3C baggage of its
// context, for OpenTelemetry propagators and instrumentations. The
// agent's own Transport needs no baggage in the context.
func WithBaggage() Option { return func(c *config) { c.baggage = true } }

// WithInstance sets the process's instance id in its reports (default: a
// random id made at start). It must differ between processes and between
// restarts; the gate prefixes its own with report.GateInstanceMark so the
// collector counts it as a gate.
func WithInstance(id string) Option { return func(c *config) { c.instance = id } }

// WithSQLTagging chooses where OpenPgxPool and OpenDB put the tenant of
// each statement (sqlcomment.ModeComment by default): the comment, the
// session's application_name (sqlcomment.ModeSession: set in the round
// trip of BEGIN, prepared statements kept), both, or ModeAuto (session
// for pgx and pgx's stdlib, the comment for other drivers). See Sessions
// in the pgxcomment package doc.
func WithSQLTagging(m sqlcomment.Mode) Option { return func(c *config) { c.sqlMode = m } }

func newConfig(opts []Option) (config, error) {
	c := config{slots: 256, interval: meter.DefaultInterval, maxPoolTenants: report.MaxPoolWaits,
		sqlNames: sqlcomment.NewTenantNames(0)}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.collector != "" {
		u, err := url.Parse(c.collector)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return c, fmt.Errorf("%w: collector %q (want http(s)://host:port)", ErrConfig, c.collector)
		}
	}
	if c.slots < 0 {
		return c, fmt.Errorf("%w: slots %d (want ≥ 0)", ErrConfig, c.slots)
	}
	if c.interval <= 0 {
		return c, fmt.Errorf("%w: interval %v (want > 0)", ErrConfig, c.interval)
	}
	if c.sqlMode > sqlcomment.ModeAuto {
		return c, fmt.Errorf("%w: SQL tagging mode %v", ErrConfig, c.sqlMode)
	}
	if c.tenant.extract == nil {
		c.tenant.extract = FirstOf(FromContext(), FromBaggage())
	}
	if c.op == nil {
		c.op = defaultOp
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

func defaultOp(r *http.Request) ru.Op {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return ru.OpRead
	case http.MethodDelete:
		return ru.OpDelete
	}
	return ru.OpWrite
}
