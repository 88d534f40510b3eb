package meter

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/quota"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/tlsfiles"
)

// RecorderOption configures NewRecorder and ReporterOption NewReporter.
// An Option (WithClock,
// WithRegisterer) configures a Recorder or a Reporter. An option given to
// a constructor it does not apply to does not compile.
type (
	RecorderOption interface{ applyRecorder(*config) }
	ReporterOption interface{ applyReporter(*config) }
	Option         interface {
		RecorderOption
		ReporterOption
	}
)

type (
	recorderOption func(*config)
	reporterOption func(*config)
	sharedOption   func(*config)
)

func (o recorderOption) applyRecorder(c *config) { o(c) }
func (o reporterOption) applyReporter(c *config) { o(c) }
func (o sharedOption) applyRecorder(c *config)   { o(c) }
func (o sharedOption) applyReporter(c *config)   { o(c) }

// config holds the settings of the two constructors; each validates
// only its own part.
type config struct {
	// recorder and reporter
	clock func() time.Time
	reg   prometheus.Registerer

	// recorder
	source      report.Source
	maxTenants  int
	maxRoutes   int
	maxRows     int
	keyCapacity int
	shards      int
	topTenants  int

	// reporter
	ticker      func(time.Duration) (<-chan time.Time, func())
	interval    time.Duration
	timeout     time.Duration
	token       tokenOption // WithToken, WithTokenFunc, WithTokenFile (token.go)
	client      *http.Client
	tls         tlsOption // WithTLS, WithTLSFiles
	queueLen    int
	backoff     struct{ min, max time.Duration } // WithBackoff
	onPolicy    func(policy.Policy)
	policyView  bool // WithPolicyView (policyview.go)
	enforcement func() report.Enforcement
	onCut       func(*report.Report)
	sections    []func() report.Section
	failover    struct {
		collectors []string      // more collectors (failover.go)
		failback   time.Duration // (failover.go)
	}
	quota  *quota.Gate
	logger *slog.Logger // WithLogger
}

// Defaults.
const (
	DefaultMaxTenants  = 512
	DefaultMaxRoutes   = 32
	DefaultMaxRows     = 2048
	DefaultKeyCapacity = 1000
	DefaultInterval    = time.Second
	DefaultTimeout     = 5 * time.Second
	DefaultQueueLen    = 60
	DefaultTopTenants  = 10
)

func defaults() config {
	return config{
		maxTenants:  DefaultMaxTenants,
		maxRoutes:   DefaultMaxRoutes,
		maxRows:     DefaultMaxRows,
		keyCapacity: DefaultKeyCapacity,
		clock:       time.Now,
		topTenants:  DefaultTopTenants,
		interval:    DefaultInterval,
		timeout:     DefaultTimeout,
		policyView:  true,
		queueLen:    DefaultQueueLen,
		backoff:     struct{ min, max time.Duration }{100 * time.Millisecond, 30 * time.Second},
	}
}

func newRecorderConfig(opts []RecorderOption) (config, error) {
	c := defaults()
	for _, o := range opts {
		if o != nil {
			o.applyRecorder(&c)
		}
	}
	switch {
	case c.maxTenants < 1 || c.maxTenants > report.MaxRows:
		return c, fmt.Errorf("%w: max tenants %d (want 1 to %d)", ErrInvalid, c.maxTenants, report.MaxRows)
	case c.maxRoutes < 1:
		return c, fmt.Errorf("%w: max routes %d (want ≥ 1)", ErrInvalid, c.maxRoutes)
	case c.maxRows < 1 || c.maxRows > report.MaxRows/2:
		return c, fmt.Errorf("%w: max rows %d (want 1 to %d)", ErrInvalid, c.maxRows, report.MaxRows/2)
	case c.keyCapacity < 1 || c.keyCapacity > 1<<16:
		return c, fmt.Errorf("%w: key capacity %d (want 1 to 65536)", ErrInvalid, c.keyCapacity)
	case c.shards < 0 || c.shards > 1024:
		return c, fmt.Errorf("%w: shards %d (want 0 to 1024)", ErrInvalid, c.shards)
	case c.topTenants < 1 || c.topTenants > 1000:
		return c, fmt.Errorf("%w: top tenants %d (want 1 to 1000)", ErrInvalid, c.topTenants)
	case c.clock == nil:
		return c, fmt.Errorf("%w: nil clock", ErrInvalid)
	}
	for _, s := range []string{c.source.Service, c.source.Instance, c.source.Host} {
		if len(s) > report.MaxStringLen {
			return c, fmt.Errorf("%w: source field of %d bytes, at most %d", ErrInvalid, len(s), report.MaxStringLen)
		}
	}
	if c.source.Service == "" {
		c.source.Service = filepath.Base(os.Args[0])
	}
	if c.source.Host == "" {
		c.source.Host, _ = os.Hostname()
	}
	if c.source.Instance == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		c.source.Instance = hex.EncodeToString(b[:])
	}
	return c, nil
}

func newReporterConfig(opts []ReporterOption) (config, error) {
	c := defaults()
	for _, o := range opts {
		if o != nil {
			o.applyReporter(&c)
		}
	}
	switch {
	case c.clock == nil:
		return c, fmt.Errorf("%w: nil clock", ErrInvalid)
	case c.interval <= 0:
		return c, fmt.Errorf("%w: interval %v", ErrInvalid, c.interval)
	case c.timeout <= 0:
		return c, fmt.Errorf("%w: timeout %v", ErrInvalid, c.timeout)
	case c.queueLen < 1:
		return c, fmt.Errorf("%w: queue length %d", ErrInvalid, c.queueLen)
	case c.backoff.min <= 0 || c.backoff.max < c.backoff.min:
		return c, fmt.Errorf("%w: backoff %v to %v", ErrInvalid, c.backoff.min, c.backoff.max)
	}
	return c, nil
}

// WithSource sets the identity of the reporting process. An empty Service
// defaults to the program name, an empty Host to the host name, an empty
// Instance to a random one.
func WithSource(s report.Source) RecorderOption {
	return recorderOption(func(c *config) { c.source = s })
}

// WithMaxTenants bounds the tenants tracked per window; the load of the
// others is folded into report.OtherTenant. Default DefaultMaxTenants.
func WithMaxTenants(n int) RecorderOption {
	return recorderOption(func(c *config) { c.maxTenants = n })
}

// WithMaxRoutes bounds the routes of one tenant per window; further
// routes are counted under report.OtherRoute. Default DefaultMaxRoutes.
func WithMaxRoutes(n int) RecorderOption { return recorderOption(func(c *config) { c.maxRoutes = n }) }

// WithMaxRows bounds the tenant × route × kind rows per window; beyond it
// new routes go to report.OtherRoute. Each row holds a latency histogram of about
// 9 KiB, so this bounds the recorder's memory. Default DefaultMaxRows.
func WithMaxRows(n int) RecorderOption { return recorderOption(func(c *config) { c.maxRows = n }) }

// WithKeyCapacity sets the capacity of the hot-key sketch. Default
// DefaultKeyCapacity.
func WithKeyCapacity(n int) RecorderOption {
	return recorderOption(func(c *config) { c.keyCapacity = n })
}

// WithShards sets the number of lock shards (rounded up to a power of
// two); 0, the default, picks 4 × GOMAXPROCS.
func WithShards(n int) RecorderOption { return recorderOption(func(c *config) { c.shards = n }) }

// WithTopTenants sets how many tenants the per-tenant metrics
// (qtop_ingest_tenant_*) name; the others are "other". Default
// DefaultTopTenants.
func WithTopTenants(n int) RecorderOption {
	return recorderOption(func(c *config) { c.topTenants = n })
}

// WithClock sets the clock that dates windows: the first window's start
// (Recorder) and the end of each window the Reporter cuts. The Reporter
// also times its failback by it (WithFailback). Default time.Now.
func WithClock(now func() time.Time) Option { return sharedOption(func(c *config) { c.clock = now }) }

// WithRegisterer registers the metrics of a Recorder or Reporter on reg.
// Without it there are no metrics; the default registerer is never used.
func WithRegisterer(reg prometheus.Registerer) Option {
	return sharedOption(func(c *config) { c.reg = reg })
}

// WithInterval sets how often the Reporter cuts and sends a window.
// Default DefaultInterval.
func WithInterval(d time.Duration) ReporterOption {
	return reporterOption(func(c *config) { c.interval = d })
}

// WithTicker replaces the Reporter's time.Ticker: newTicker(interval)
// returns the channel that triggers each cut and a function that stops
// it. Tests use it to cut at will.
func WithTicker(newTicker func(interval time.Duration) (ticks <-chan time.Time, stop func())) ReporterOption {
	return reporterOption(func(c *config) { c.ticker = newTicker })
}

// WithTimeout bounds each POST of the Reporter. Default DefaultTimeout.
func WithTimeout(d time.Duration) ReporterOption {
	return reporterOption(func(c *config) { c.timeout = d })
}

// WithHTTPClient sets the Reporter's HTTP client (default: a client of its
// own with no overall timeout; WithTimeout bounds each attempt).
func WithHTTPClient(hc *http.Client) ReporterOption {
	return reporterOption(func(c *config) { c.client = hc })
}

// tlsOption is the TLS the reporter's own transport uses: a config, or
// files read by NewReporter.
type tlsOption struct {
	conf  *tls.Config
	files tlsfiles.ClientFiles
}

func (o tlsOption) config() (*tls.Config, error) {
	if o.conf != nil {
		return o.conf, nil
	}
	return o.files.Config()
}

// WithTLS sets the TLS configuration of the Reporter's own transport (a
// private CA, a client certificate for mTLS). Ignored with WithHTTPClient.
func WithTLS(conf *tls.Config) ReporterOption {
	return reporterOption(func(c *config) { c.tls = tlsOption{conf: conf} })
}

// WithTLSFiles is WithTLS from PEM files (see package tlsfiles; for
// instance tlsfiles.ClientFromEnv()): NewReporter reads them and fails
// when they are bad. Ignored with WithHTTPClient.
func WithTLSFiles(files tlsfiles.ClientFiles) ReporterOption {
	return reporterOption(func(c *config) { c.tls = tlsOption{files: files} })
}

// WithLogger sets where the Reporter says that its reports fail (at
// warn level, with the error and what to do about the usual causes:
// an unknown CA, a refused token, nothing listening), again every minute
// while they keep failing, and when they are delivered again (info).
// Default: nowhere (the qtop_reporter_* metrics count the failures).
func WithLogger(l *slog.Logger) ReporterOption {
	return reporterOption(func(c *config) { c.logger = l })
}

// WithQueueLen bounds the encoded reports waiting to be sent; when full,
// the oldest is dropped, counted and logged (WithLogger). The queue holds
// one report an interval, so it rides out a collector outage (or a
// refused token) of n intervals: DefaultQueueLen at DefaultInterval is a
// minute. A kept report costs its encoding, about 0.2 KB plus 60 bytes a
// tenant × route row (about 2 KB for 30 rows, 120 KB at the default
// WithMaxRows). Default DefaultQueueLen.
func WithQueueLen(n int) ReporterOption { return reporterOption(func(c *config) { c.queueLen = n }) }

// WithBackoff sets the Reporter's retry delays: the first retry waits
// about min, each next one twice as long up to max, with full jitter.
// Default 100 ms to 30 s.
func WithBackoff(min, max time.Duration) ReporterOption {
	return reporterOption(func(c *config) { c.backoff.min, c.backoff.max = min, max })
}

// WithPolicyHandler has the Reporter call fn with each new policy (a
// higher Version than the last one handed over) found in a reply. fn runs
// on the reporter's goroutine and should return quickly.
func WithPolicyHandler(fn func(policy.Policy)) ReporterOption {
	return reporterOption(func(c *config) { c.onPolicy = fn })
}

// WithPolicyView has a Reporter with a policy handler ask for its own
// view of the policy (the rules of the tenants it reported over the last
// minutes, the tier rules, budgets, runaway rules and freshness; see
// policy.View) rather than the whole policy, and hold it by its tag:
// with a policy of thousands of rules a reply is then kilobytes, and ~85
// bytes while the view is unchanged. The collector keeps each process's
// tenants of the last five minutes in its view, so a tenant idle for a
// while keeps its rules; a tenant the process reports for the first time
// gets them with that report (until then, for at most one interval, it
// is not limited there). It is the default; WithWholePolicy turns it off.
func WithPolicyView() ReporterOption {
	return reporterOption(func(c *config) { c.policyView = true })
}

// WithWholePolicy has a Reporter with a policy handler ask for the whole
// policy in every reply that changes it, not its view (WithPolicyView):
// every rule is in the process before the tenant's first request there.
func WithWholePolicy() ReporterOption {
	return reporterOption(func(c *config) { c.policyView = false })
}

// WithEnforcementSource has the Reporter fill each report's report.Enforcement
// with fn's counters for the window (fn returns the counters since its
// previous call).
func WithEnforcementSource(fn func() report.Enforcement) ReporterOption {
	return reporterOption(func(c *config) { c.enforcement = fn })
}

// WithCutHook has the Reporter call fn with each window's report, after
// the recorder's rows and WithEnforcementSource's counters are in and
// before it is encoded, so that what the recorder does not hold (pool
// waits, enforcement detail) is added to it. fn runs on the reporter's
// goroutine and must not keep rep.
func WithCutHook(fn func(rep *report.Report)) ReporterOption {
	return reporterOption(func(c *config) { c.onCut = fn })
}

// WithQuota has the Reporter carry g's per-tenant usage in each report
// (g.Cut at every window) and apply the quota verdicts of every accepted
// report's reply to g (g.Apply), for fleet-wide limits. A reply that does
// not come (the collector unreachable) changes nothing: g keeps the last
// verdicts until they expire.
func WithQuota(g *quota.Gate) ReporterOption {
	return reporterOption(func(c *config) { c.quota = g })
}

// WithSectionSource has the Reporter add fn's section to each report (fn
// returns what happened since its previous call, nil when nothing did),
// for the parts of a process that report a section of their own:
// freshness.Source, sqlcomment's Budgets.WindowSource. It may be given
// more than once, for sections of different tags.
func WithSectionSource(fn func() report.Section) ReporterOption {
	return reporterOption(func(c *config) { c.sections = append(c.sections, fn) })
}
