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
	reg     prometheus.Registerer
	log     *slog.Logger
	cost    float64
	maxKeys int
	streams uint32
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

// WithRegisterer registers the metrics on reg: qtop_rls_requests_total
// (label code: ok, over_limit, invalid, unauthenticated),
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

func newConfig(opts []Option) (config, error) {
	c := config{now: time.Now, cost: ru.DefaultModel().Base[ru.OpRead], maxKeys: DefaultMaxKeys,
		streams: 256, log: slog.New(slog.DiscardHandler)}
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
	}
	return c, nil
}
