package otlpin

import (
	"context"
	"errors"
	"fmt"
	"github.com/qtop-dev/qtop/ru"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Errors of the package; test with errors.Is.
var (
	// ErrMalformed: the body is not an OTLP trace export request.
	ErrMalformed = errors.New("otlpin: malformed request")
	// ErrTooLarge: the body, once decompressed, is above its limit.
	ErrTooLarge = errors.New("otlpin: request too large")
	// ErrBusy: the receiver cannot take the request now; the client should
	// retry later (HTTP 503 / gRPC UNAVAILABLE, with a retry delay).
	ErrBusy = errors.New("otlpin: busy")
	// ErrShutdown: the receiver has been shut down (retryable for the
	// client: another collector, or this one restarted, will take it).
	ErrShutdown = errors.New("otlpin: shut down")
	// ErrInvalid: an option is out of range.
	ErrInvalid = errors.New("otlpin: invalid option")
)

// Defaults of the options.
const (
	DefaultInterval   = time.Second
	DefaultMaxBody    = 16 << 20 // compressed, as sent
	DefaultMaxDecoded = 64 << 20 // after gzip: about 200,000 typical spans
	// DefaultGRPCMaxMessage bounds an OTLP/gRPC message (after gzip): four
	// times the OpenTelemetry Collector's default (4 MiB), about 50,000
	// typical spans, far above an SDK's batch (512 spans, ~200 KiB). A
	// stream's message may hold twice this of the memory budget.
	DefaultGRPCMaxMessage = 16 << 20
	// DefaultLargeMessage: a message at least this large once decompressed
	// is decoded one at a time (admit.go).
	DefaultLargeMessage = 4 << 20
	DefaultInflight     = 2
	DefaultMaxSources   = 128
	DefaultTraceWait    = 10 * time.Second
	DefaultMaxTraces    = 100_000
	DefaultMaxWaiting   = 100_000
	// DefaultMaxRows bounds the tenant × route × kind rows, and the
	// tenants, of one source's window (each row holds a 9 KiB latency
	// histogram); spans of tenants beyond it count under tenant other
	// (qtop_otlp_spans_folded_total).
	DefaultMaxRows = 512
	// DefaultMemory bounds the bytes of requests being received and
	// decoded at once (eight gRPC streams of DefaultGRPCMaxMessage, four
	// HTTP bodies of the decoded limit, or many more of an SDK's size).
	DefaultMemory = 4 * DefaultMaxDecoded
	// DefaultMinRate and DefaultRateGrace: a body must arrive at 16 KiB/s
	// after the first 2 s (a 16 MiB body in 17 minutes at most; one that
	// trickles a byte a second is cut after 2 s).
	DefaultMinRate   = 16 << 10
	DefaultRateGrace = 2 * time.Second
	// DefaultGRPCReadTimeout bounds how long a gRPC message may take to
	// arrive once its stream was admitted.
	DefaultGRPCReadTimeout = 30 * time.Second
	// DefaultClockSkew: a span that ends further than this from the
	// receiver's clock, either way, comes from a clock that is wrong (or
	// from a queue that held it for long): far beyond an SDK's export
	// delay (5 s) and the skew of clocks kept by NTP.
	DefaultClockSkew = time.Hour
)

// Option configures a Receiver.
type Option func(*config)

type config struct {
	tenantAttr string
	interval   time.Duration
	maxBody    int64
	maxDecoded int64
	grpcMax    int64 // WithGRPCMaxMessage
	largeMsg   int64 // WithLargeMessage
	inflight   int
	maxSources int
	traceWait  time.Duration
	maxTraces  int
	maxWaiting int
	maxRows    int
	clock      func() time.Time
	reg        prometheus.Registerer
	log        *slog.Logger
	auth       func(authorization string) bool
	instance   string
	memory     int64
	minRate    int64
	rateGrace  time.Duration
	grpcRead   time.Duration
	skew       time.Duration // WithClockSkew
	model      ru.Model      // WithCostModel (costs.go)
	hooks      hooks
}

func newConfig(opts []Option) (config, error) {
	c := config{
		tenantAttr: AttrTenant,
		interval:   DefaultInterval,
		maxBody:    DefaultMaxBody,
		maxDecoded: DefaultMaxDecoded,
		grpcMax:    DefaultGRPCMaxMessage,
		largeMsg:   DefaultLargeMessage,
		inflight:   DefaultInflight,
		maxSources: DefaultMaxSources,
		traceWait:  DefaultTraceWait,
		maxTraces:  DefaultMaxTraces,
		maxWaiting: DefaultMaxWaiting,
		maxRows:    DefaultMaxRows,
		clock:      time.Now,
		minRate:    DefaultMinRate,
		rateGrace:  DefaultRateGrace,
		grpcRead:   DefaultGRPCReadTimeout,
		skew:       DefaultClockSkew,
		model:      ru.DefaultModel(),
	}
	for _, o := range opts {
		o(&c)
	}
	c.grpcMax = min(c.grpcMax, c.maxDecoded)
	if c.memory == 0 {
		c.memory = max(DefaultMemory, grpcReserve(c.grpcMax))
	}
	switch {
	case c.tenantAttr == "" || len(c.tenantAttr) > 256:
		return c, fmt.Errorf("%w: tenant attribute %q", ErrInvalid, c.tenantAttr)
	case c.interval <= 0:
		return c, fmt.Errorf("%w: interval %v", ErrInvalid, c.interval)
	case c.maxBody < 1 || c.maxDecoded < c.maxBody:
		return c, fmt.Errorf("%w: body limits %d, %d (want 1 ≤ body ≤ decoded)", ErrInvalid, c.maxBody, c.maxDecoded)
	case c.inflight < 1 || c.inflight > 256:
		return c, fmt.Errorf("%w: inflight %d (want 1 to 256)", ErrInvalid, c.inflight)
	case c.maxSources < 1 || c.maxSources > 100_000:
		return c, fmt.Errorf("%w: max sources %d (want 1 to 100000)", ErrInvalid, c.maxSources)
	case c.traceWait < 0 || c.traceWait > time.Minute:
		return c, fmt.Errorf("%w: trace wait %v (want 0 to 1m)", ErrInvalid, c.traceWait)
	case c.maxTraces < 1 || c.maxWaiting < 1:
		return c, fmt.Errorf("%w: max traces %d, max waiting %d (want ≥ 1)", ErrInvalid, c.maxTraces, c.maxWaiting)
	case c.maxRows < 1 || c.maxRows > 8192:
		return c, fmt.Errorf("%w: max rows %d (want 1 to 8192)", ErrInvalid, c.maxRows)
	case c.grpcMax < 1 || c.largeMsg < 1:
		return c, fmt.Errorf("%w: gRPC message limit %d, large message %d (want ≥ 1)", ErrInvalid, c.grpcMax, c.largeMsg)
	case c.memory < grpcReserve(c.grpcMax):
		return c, fmt.Errorf("%w: memory %d below twice the gRPC message limit %d (one gRPC message must fit)", ErrInvalid, c.memory, c.grpcMax)
	case c.minRate < 1 || c.rateGrace < 0 || c.grpcRead <= 0:
		return c, fmt.Errorf("%w: min rate %d B/s after %v, gRPC read timeout %v (want a rate ≥ 1, a grace ≥ 0, a timeout > 0)", ErrInvalid, c.minRate, c.rateGrace, c.grpcRead)
	case c.clock == nil:
		return c, fmt.Errorf("%w: nil clock", ErrInvalid)
	case c.skew <= 0:
		return c, fmt.Errorf("%w: clock skew %v (want > 0)", ErrInvalid, c.skew)
	}
	if err := c.model.Validate(); err != nil {
		return c, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// WithClockSkew sets how far from the receiver's clock (either way) a
// span's end may be before its clock counts as wrong (default
// DefaultClockSkew). Such a span is recorded like any other, in the
// window open when it arrives (where every span counts), and counted in
// qtop_otlp_spans_skewed_total by direction (past, future): its work was
// done, only its clock is wrong, so it is never refused, and it never
// takes the other spans of its request with it.
func WithClockSkew(d time.Duration) Option { return func(c *config) { c.skew = d } }

// WithTenantAttribute names the span attribute that holds the tenant
// (default AttrTenant, "tenant.id", which is also what the SDKs' baggage
// span processors copy from the W3C baggage member tenant.id).
func WithTenantAttribute(name string) Option { return func(c *config) { c.tenantAttr = name } }

// WithInterval sets how often each source's window is cut and merged as a
// report (default DefaultInterval, as qtop's own reporter).
func WithInterval(d time.Duration) Option { return func(c *config) { c.interval = d } }

// WithMaxBody bounds a request body as sent (compressed) and once
// decompressed. Defaults DefaultMaxBody and DefaultMaxDecoded. A gRPC
// message is bounded by WithGRPCMaxMessage, at most the decoded limit.
func WithMaxBody(compressed, decoded int64) Option {
	return func(c *config) { c.maxBody, c.maxDecoded = compressed, decoded }
}

// WithInflight bounds the requests decoded at once (default
// DefaultInflight: decoding is CPU work, more at once than cores gains
// nothing); a request that finds them taken waits up to 250 ms for one
// before it is answered busy. What requests may hold in memory is
// WithMemory's.
func WithInflight(n int) Option { return func(c *config) { c.inflight = n } }

// WithGRPCMaxMessage bounds an OTLP/gRPC message, after gzip (default
// DefaultGRPCMaxMessage, at most the decoded limit of WithMaxBody): a
// longer one is refused from its length prefix, unread
// (RESOURCE_EXHAUSTED). A stream's message may hold twice this of
// WithMemory's budget as it arrives (and reserves it all before its
// message is read on a server not serving on GRPCListener, where a lower
// limit lets more streams in at once).
func WithGRPCMaxMessage(bytes int64) Option { return func(c *config) { c.grpcMax = bytes } }

// WithLargeMessage sets the size (after gzip) from which a message is
// decoded one at a time, whatever the transport (default
// DefaultLargeMessage): decoding one takes a core for a while (about
// 150 ms for 64 MiB), so the other cores stay with everything else. A
// large message waits up to 2 s for its turn, first come first served,
// then is answered busy.
func WithLargeMessage(bytes int64) Option { return func(c *config) { c.largeMsg = bytes } }

// WithMaxSources bounds the distinct (service.name, service.instance.id,
// host.name) sources with a window of their own; spans of further sources
// are counted under the service "other". Default DefaultMaxSources.
func WithMaxSources(n int) Option { return func(c *config) { c.maxSources = n } }

// WithTraceWait sets how long a database span whose tenant is its trace's
// waits for the trace's root span to arrive (default DefaultTraceWait,
// twice the SDKs' default export delay); the root tenants of traces are
// remembered as long. 0: no wait.
func WithTraceWait(d time.Duration) Option { return func(c *config) { c.traceWait = d } }

// WithTraceLimits bounds the remembered root tenants and the waiting
// database spans (defaults DefaultMaxTraces, DefaultMaxWaiting). A span
// that finds the wait list full is recorded for ingest.UnknownTenant.
func WithTraceLimits(traces, waiting int) Option {
	return func(c *config) { c.maxTraces, c.maxWaiting = traces, waiting }
}

// WithMaxRows bounds the rows of one source's window (default
// DefaultMaxRows).
func WithMaxRows(n int) Option { return func(c *config) { c.maxRows = n } }

// WithClock sets the clock that dates windows and waits (default
// time.Now).
func WithClock(now func() time.Time) Option { return func(c *config) { c.clock = now } }

// WithRegisterer registers the receiver's metrics on reg; without it there
// are none.
func WithRegisterer(reg prometheus.Registerer) Option { return func(c *config) { c.reg = reg } }

// WithLogger sets the logger (default: none).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// WithAuth has every request checked by fn, given its Authorization
// header (HTTP) or authorization metadata (gRPC); a request fn refuses
// gets 401 / UNAUTHENTICATED. Default: no check.
func WithAuth(fn func(authorization string) bool) Option { return func(c *config) { c.auth = fn } }

// WithInstance sets the suffix that makes the receiver's report sources
// unique to this receiver's lifetime (default: random), so that a
// restarted collector never takes a new report for one it merged before.
func WithInstance(id string) Option { return func(c *config) { c.instance = id } }

// WithMemory bounds the bytes that requests being received and decoded
// may take at once, over both transports (default DefaultMemory, or twice
// the gRPC message limit when that is more; at least twice the gRPC
// message limit). Each request reserves its share before its bytes are
// read — HTTP: its body as it arrives (16 KiB, doubling up to the length
// it declares), then what it may decompress to; gRPC: as its connection
// delivers its bytes (128 KiB, then twice what arrived, doubling, up to
// twice the message limit: gRPC's buffers and the message's copy) on
// GRPCListener, twice the message limit from the stream's headers
// elsewhere; at most half the budget per connection — and a request that
// does not fit, after waiting up to 250 ms for memory to be given back, is
// answered busy (503 / UNAVAILABLE, retry later).
func WithMemory(bytes int64) Option { return func(c *config) { c.memory = bytes } }

// WithMinRate cuts an HTTP body that arrives slower than bytesPerSec after
// grace (defaults DefaultMinRate, DefaultRateGrace), so slow senders hold
// no memory or decode slot for long: 408, and the connection closed. A
// gRPC message is held to the same rate on a server serving on
// GRPCListener (CANCELLED).
func WithMinRate(bytesPerSec int64, grace time.Duration) Option {
	return func(c *config) { c.minRate, c.rateGrace = bytesPerSec, grace }
}

// WithGRPCReadTimeout bounds how long an admitted gRPC stream's message
// may take to arrive (default DefaultGRPCReadTimeout).
func WithGRPCReadTimeout(d time.Duration) Option { return func(c *config) { c.grpcRead = d } }

// WithAdmission sets a check every export passes after its credential and
// before its body is read: a non-nil error (with a delay when it is a
// report.RetryableError) answers 503 with Retry-After over HTTP and
// UNAVAILABLE with RetryInfo over gRPC, so that nothing is acknowledged
// that the consumer could not keep — the collector refuses exports this
// way while its data directory's free space is below the reserve, as it
// refuses reports. declared is the body's Content-Length (-1 unknown, and
// for gRPC).
func WithAdmission(admit func(declared int64) error) Option {
	return func(c *config) { c.hooks.admit = admit }
}

// WithRefusalHold has the answer to a request refused for what it is (a
// wrong credential, a malformed or too large body, another media type)
// held back by hold, which returns when the answer may go (at the latest
// when ctx ends) and false when it could not hold it (too many are held:
// the answer goes at once and an HTTP connection is closed). So a client
// sending junk in a loop makes a request a second, not thousands. The
// collector passes its own, shared with POST /v1/reports. Default: none.
func WithRefusalHold(hold func(ctx context.Context) bool) Option {
	return func(c *config) { c.hooks.hold = hold }
}

// WithGated tells the receiver which services a gate (cmd/gate) stands in
// front of now: their SERVER spans give their traces' tenants but are not
// recorded as requests, since the gate counted and charged each of those
// requests already (qtop_otlp_spans_total{result="request_gated"}); their
// statements, pool waits and jobs are recorded as any service's. gated
// is called once per resource of an export request, and must be quick.
func WithGated(gated func(service string) bool) Option {
	return func(c *config) { c.hooks.gated = gated }
}

// hooks are what the receiver asks of the collector it runs in.
type hooks struct {
	hold  func(ctx context.Context) bool // WithRefusalHold
	admit func(declared int64) error     // WithAdmission
	gated func(service string) bool      // WithGated
}
