package pgactivity

import "time"

// Option configures a Sampler.
type Option func(*config)

type config struct {
	idle    bool
	allDBs  bool // WithAllDatabases
	now     func() time.Time
	timeout time.Duration
	metrics *Metrics
	names   func(id string) (string, bool) // WithTenantNames
}

// DefaultTimeout is how long Run lets one sample take.
const DefaultTimeout = 5 * time.Second

func newConfig(opts []Option) config {
	c := config{now: time.Now, timeout: DefaultTimeout}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	return c
}

// WithIdle makes snapshots include idle sessions (state "idle"), which
// carry the tags of their last statement. By default they are left out:
// they add no load, and a server with thousands of pooled connections
// would otherwise ship them all every second. Sessions idle in a
// transaction are always included, since they can hold locks.
func WithIdle(include bool) Option { return func(c *config) { c.idle = include } }

// WithAllDatabases makes snapshots include the sessions of every database
// of the server. By default only the sessions of the database the pool
// connects to are read: those are the statements its pg_stat_statements
// totals cover, and a collector bills and cancels (budgets) from them, so
// another application's sessions on the same server must not count.
func WithAllDatabases(all bool) Option { return func(c *config) { c.allDBs = all } }

// WithClock sets the clock that stamps Snapshot.Time (time.Now by
// default). Statement durations come from the server's clock regardless.
func WithClock(now func() time.Time) Option { return func(c *config) { c.now = now } }

// WithTimeout limits how long one sample may take in Run (DefaultTimeout
// when d is not positive). Sample itself is bounded by its context only.
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// WithMetrics counts the statements whose tags could not be read into m
// (see Metrics); by default they are only flagged on each Backend.
func WithMetrics(m *Metrics) Option { return func(c *config) { c.metrics = m } }
