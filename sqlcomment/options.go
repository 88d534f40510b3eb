package sqlcomment

import (
	"database/sql/driver"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultMaxLen is the default cap on a comment's length in bytes.
const DefaultMaxLen = 1024

// minMaxLen is the smallest cap WithMaxLen accepts: room for a tenant.
const minMaxLen = 64

// An Option configures a Commenter, and through it WrapConnector,
// WrapDriver, Open, Register and the pgxcomment package.
type Option func(*config)

type config struct {
	application string
	dbDriver    string
	static      []pair // WithTag, in the order given
	key         bool
	trace       bool
	maxLen      int
	observer    Observer
	reg         prometheus.Registerer
	leadingArgs []driver.Value
	budgets     *Budgets
	sess        sessionConfig // WithMode, WithSession, WithTenantNames
}

func newConfig(opts []Option) config {
	c := config{maxLen: DefaultMaxLen}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	// Validation in one place: a cap too small to hold a tenant would drop
	// every tag, which is never what was meant.
	if c.maxLen < minMaxLen {
		c.maxLen = minMaxLen
	}
	return c
}

// WithApplication adds the static tag application='name' to every
// statement.
func WithApplication(name string) Option { return func(c *config) { c.application = name } }

// WithDBDriver adds the static tag db_driver='name' to every statement,
// for example "pgx/v5". Open and Register set it to the driver's name
// unless this option is given.
func WithDBDriver(name string) Option { return func(c *config) { c.dbDriver = name } }

// WithTag adds a static tag key='value' to every statement. Keep values
// bounded: every distinct comment is a distinct statement text to caches.
// An empty key is ignored; a key this package writes itself is ignored.
func WithTag(key, value string) Option {
	return func(c *config) {
		if key == "" || builtinKey(key) {
			return
		}
		for i := range c.static {
			if c.static[i].k == key {
				c.static[i].v = value
				return
			}
		}
		c.static = append(c.static, pair{key, value})
	}
}

// WithKey adds tenant.Tags.Key as key='…'. Off by default: keys have
// unbounded cardinality, so every statement text becomes unique.
func WithKey() Option { return func(c *config) { c.key = true } }

// WithTraceContext adds the W3C traceparent and tracestate of the OTel span
// in the context. Off by default: a traceparent makes every statement text
// unique. It is never added to statements that are prepared (PrepareContext,
// and pgx modes that cache by text); enable it for database/sql only with a
// driver that does not prepare ExecContext and QueryContext texts, such as
// pgx's stdlib with pgxcomment.StdlibExecMode.
func WithTraceContext() Option { return func(c *config) { c.trace = true } }

// WithMaxLen caps the comment at n bytes, "/*" and "*/" included (default
// DefaultMaxLen). Tags are kept in priority order while they fit (tenant,
// route, tier, application, db_driver, WithTag tags, traceparent,
// tracestate, key), so the lowest-priority tags go first and one oversized
// value costs only itself. Drops are counted (Commenter.Dropped,
// and qtop_sqlcomment_dropped_tags_total with WithRegisterer). Values below
// 64 are raised to 64.
func WithMaxLen(n int) Option { return func(c *config) { c.maxLen = n } }

// WithObserver calls o once per statement, begin, commit and rollback with
// its tags, duration, rows and error. Without it the wrapper does not read
// the clock nor wrap rows, statements or transactions.
func WithObserver(o Observer) Option { return func(c *config) { c.observer = o } }

// WithRegisterer registers qtop_sqlcomment_dropped_tags_total{key} with
// reg. Several commenters may share one registerer; they share the counter.
func WithRegisterer(reg prometheus.Registerer) Option { return func(c *config) { c.reg = reg } }

// WithLeadingArgs prepends args to the arguments of every commented
// statement that the database/sql wrapper sends through ExecContext or
// QueryContext. Drivers that take per-statement options as leading
// arguments use it: pgxcomment.StdlibExecMode passes pgx.QueryExecModeExec
// so that pgx's stdlib does not prepare and cache each commented text.
// Statements without tags are sent unchanged.
func WithLeadingArgs(args ...driver.Value) Option {
	return func(c *config) { c.leadingArgs = append([]driver.Value(nil), args...) }
}

func builtinKey(k string) bool {
	switch k {
	case KeyApplication, KeyDBDriver, KeyKey, KeyRoute, KeyTenant, KeyTier, KeyTraceparent, KeyTracestate:
		return true
	}
	return false
}
