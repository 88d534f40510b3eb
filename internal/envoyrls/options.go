package envoyrls

import (
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/ru"
)

type config struct {
	now     func() time.Time
	auth    func(authorization string) bool
	admit   func() error
	reg     prometheus.Registerer
	log     *slog.Logger
	cost    float64
	maxKeys int
	streams uint32
	calls   int
	read    time.Duration
}

// Option configures New.
type Option func(*config)

// WithClock sets the clock of the answers (default time.Now); tests pass
// a fake one.
func WithClock(now func() time.Time) Option { return func(c *config) { c.now = now } }

// WithAuth checks each call's "authorization" metadata (e.g. "Bearer
// …"), from the stream's headers, before its message is read; a call fn
// refuses is answered Unauthenticated. Default: no credential.
func WithAuth(fn func(authorization string) bool) Option { return func(c *config) { c.auth = fn } }

// WithAdmission sets a check each call passes after its credential and
// before its message is read: a call fn returns an error for is answered
// with that error's gRPC status (Unavailable when it carries none) and
// counted as refused. The collector refuses calls this way while it
// replays its write-ahead log. Default: none.
func WithAdmission(fn func() error) Option { return func(c *config) { c.admit = fn } }

// WithRegisterer registers the metrics on reg: qtop_rls_requests_total
// (label code: ok, over_limit, invalid, unauthenticated, refused, busy,
// slow),
// qtop_rls_answer_seconds, qtop_rls_shadow_over_limit_total,
// qtop_rls_buckets and qtop_rls_buckets_evicted_total. Default: none.
func WithRegisterer(reg prometheus.Registerer) Option { return func(c *config) { c.reg = reg } }

// WithLogger logs refused calls at debug level (default: nothing).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// WithCost sets the RU of one hit before price rules (default the RU
// model's fixed cost of a read, ru.DefaultModel().Base[ru.OpRead]).
func WithCost(ru float64) Option { return func(c *config) { c.cost = ru } }

// WithMaxKeys bounds the throttle buckets tracked, and the tenants of the
// fleet-quota usage (default DefaultMaxKeys).
func WithMaxKeys(n int) Option { return func(c *config) { c.maxKeys = n } }

// WithMaxConcurrentStreams bounds the calls one connection runs at once
// (default 256; Envoy multiplexes its checks on a connection per worker).
func WithMaxConcurrentStreams(n uint32) Option { return func(c *config) { c.streams = n } }

// WithMaxCalls bounds the calls open at once over every connection, from
// their headers to their answer (default DefaultMaxCalls); a call beyond
// it is answered Unavailable from its headers (Envoy then applies its
// failure_mode_deny: by default it lets the request through).
func WithMaxCalls(n int) Option { return func(c *config) { c.calls = n } }

// WithReadTimeout bounds how long a call's message may take to arrive
// after its headers (default DefaultReadTimeout); a call whose message
// does not arrive in time is cut (Cancelled), so calls that send their
// headers and nothing else do not stay open.
func WithReadTimeout(d time.Duration) Option { return func(c *config) { c.read = d } }

const (
	// DefaultMaxCalls: about 13 KB a call open (its stream and goroutine),
	// so at most ~50 MB; Envoy's calls take microseconds here, a handful
	// of them open at a time even at 100,000 a second.
	DefaultMaxCalls = 4096
	// DefaultReadTimeout: Envoy sends a call's message with its headers and
	// waits 20 ms for the answer by default (its rate-limit filter's
	// timeout).
	DefaultReadTimeout = time.Second
)

func newConfig(opts []Option) (config, error) {
	c := config{now: time.Now, cost: ru.DefaultModel().Base[ru.OpRead], maxKeys: DefaultMaxKeys,
		streams: 256, calls: DefaultMaxCalls, read: DefaultReadTimeout, log: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(&c)
	}
	switch {
	case c.now == nil:
		return c, fmt.Errorf("envoyrls: nil clock")
	case !(c.cost > 0) || math.IsInf(c.cost, 0):
		return c, fmt.Errorf("envoyrls: cost per hit %v (want a finite number > 0)", c.cost)
	case c.maxKeys < 1 || c.maxKeys > 1_000_000:
		return c, fmt.Errorf("envoyrls: max keys %d (want 1 to 1,000,000)", c.maxKeys)
	case c.streams == 0:
		return c, fmt.Errorf("envoyrls: max concurrent streams 0")
	case c.calls < 1 || c.read <= 0:
		return c, fmt.Errorf("envoyrls: max calls %d, read timeout %v (want ≥ 1 and > 0)", c.calls, c.read)
	}
	return c, nil
}
