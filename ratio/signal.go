package ratio

import (
	"fmt"
	"github.com/qtop-dev/qtop/histogram"
	"sync"
	"time"
)

// Signal is the latency ratio of one service: a quantile (p95) of latency
// over a long window divided by the same quantile over a short window.
// About 1.0 when latency is steady, it falls toward 1/3 when latency
// triples, and recovers as the long window catches up with the new level.
// It is a change detector: it says that latency just got worse, and how
// much, whatever the service's normal latency.
//
// DegradedAt turns it into a state with hysteresis: degraded once the ratio
// falls below the enter threshold, healthy again once it rises above the
// exit threshold. Below a minimum number of observations in the short
// window the ratio is unknown (ValueAt reports ok false) and the state does
// not change, so low traffic raises no false alarm.
//
// A Signal is safe for concurrent use. With the default 10 + 10 slots it
// holds 20 histograms, about 190 KB.
type Signal struct {
	cfg config

	mu       sync.Mutex
	short    *histogram.Window
	long     *histogram.Window
	degraded bool
}

// Default settings of NewSignal.
const (
	DefaultShortWindow = 10 * time.Second
	DefaultLongWindow  = 5 * time.Minute
	DefaultQuantile    = 0.95
	DefaultEnter       = 0.5
	DefaultExit        = 0.65
	DefaultMinSamples  = 250
)

type config struct {
	short, long           time.Duration
	shortSlots, longSlots int
	q                     float64
	enter, exit           float64
	minSamples            uint64
}

// Option configures a Signal.
type Option func(*config)

// WithShortWindow sets the short window (default 10 s, in 10 slots).
func WithShortWindow(span time.Duration) Option { return func(c *config) { c.short = span } }

// WithLongWindow sets the long window (default 5 min, in 10 slots).
func WithLongWindow(span time.Duration) Option { return func(c *config) { c.long = span } }

// WithSlots sets how many sub-windows make the short and the long window
// (defaults 10 and 10): more slots expire old observations more smoothly,
// and each costs a Histogram (about 9.4 KB).
func WithSlots(short, long int) Option {
	return func(c *config) { c.shortSlots, c.longSlots = short, long }
}

// WithQuantile sets the quantile compared (default 0.95).
func WithQuantile(q float64) Option { return func(c *config) { c.q = q } }

// WithThreshold sets the hysteresis band: degraded when the ratio falls
// below enter, healthy again when it rises above exit (defaults 0.5 and
// 0.65); 0 < enter ≤ exit.
func WithThreshold(enter, exit float64) Option {
	return func(c *config) { c.enter, c.exit = enter, exit }
}

// WithMinSamples sets how many observations the short window needs before
// the ratio is known (default 250, 25 per second over 10 s). At fewer, the
// short-window p95 is too noisy to compare. For latency whose logarithm has
// a standard deviation σ (lognormal: σ = ln(p50/p16)), the p95 of n samples
// has a log-standard-deviation of about 2.1σ/√n; keeping a halving of the
// ratio five of those away takes n ≥ 250σ². The default suits σ up to 1
// (p95 about 5× p50); heavier tails want more.
func WithMinSamples(n uint64) Option { return func(c *config) { c.minSamples = n } }

func (c *config) validate() error {
	switch {
	case c.short <= 0 || c.long <= 0:
		return fmt.Errorf("windows %v and %v must be positive", c.short, c.long)
	case c.long <= c.short:
		return fmt.Errorf("long window %v must be longer than short window %v", c.long, c.short)
	case c.shortSlots <= 0 || c.longSlots <= 0:
		return fmt.Errorf("slots %d and %d must be positive", c.shortSlots, c.longSlots)
	case c.short/time.Duration(c.shortSlots) <= 0 || c.long/time.Duration(c.longSlots) <= 0:
		return fmt.Errorf("slots %d and %d too many for windows %v and %v", c.shortSlots, c.longSlots, c.short, c.long)
	case !(c.q > 0 && c.q < 1):
		return fmt.Errorf("quantile %v outside (0, 1)", c.q)
	case !(c.enter > 0 && c.enter <= c.exit):
		return fmt.Errorf("thresholds %v, %v: want 0 < enter ≤ exit", c.enter, c.exit)
	}
	return nil
}

// NewSignal returns a Signal with the defaults changed by opts. It panics
// on invalid options (a window that is not positive, a long window not
// longer than the short one, a quantile outside (0, 1), thresholds not
// 0 < enter ≤ exit), as those are programming errors.
func NewSignal(opts ...Option) *Signal {
	c := config{
		short:      DefaultShortWindow,
		long:       DefaultLongWindow,
		shortSlots: 10,
		longSlots:  10,
		q:          DefaultQuantile,
		enter:      DefaultEnter,
		exit:       DefaultExit,
		minSamples: DefaultMinSamples,
	}
	for _, o := range opts {
		o(&c)
	}
	if err := c.validate(); err != nil {
		panic("ratio: NewSignal: " + err.Error())
	}
	return &Signal{
		cfg:   c,
		short: histogram.NewWindow(c.short, c.shortSlots),
		long:  histogram.NewWindow(c.long, c.longSlots),
	}
}

// ObserveAt adds one latency in seconds observed at instant now.
func (s *Signal) ObserveAt(now time.Time, seconds float64) {
	s.mu.Lock()
	s.short.ObserveAt(now, seconds)
	s.long.ObserveAt(now, seconds)
	s.mu.Unlock()
}

// Observe adds one latency in seconds observed now.
func (s *Signal) Observe(seconds float64) { s.ObserveAt(time.Now(), seconds) }

// MergeAt adds every observation of h, as observed at instant now (for
// example a histogram reported by a process for the interval ending now).
func (s *Signal) MergeAt(now time.Time, h *histogram.Histogram) {
	s.mu.Lock()
	s.short.MergeAt(now, h)
	s.long.MergeAt(now, h)
	s.mu.Unlock()
}

// MergeSparseAt is MergeAt for a Sparse histogram (a collector's merge of
// the rows of a report), with no dense histogram in between.
func (s *Signal) MergeSparseAt(now time.Time, h *histogram.Sparse) {
	s.mu.Lock()
	s.short.MergeSparseAt(now, h)
	s.long.MergeSparseAt(now, h)
	s.mu.Unlock()
}

// ValueAt returns the ratio at instant now: the long-window quantile over
// the short-window quantile. ok is false while the short window holds fewer
// observations than the minimum; the ratio is then 0. It costs a few
// microseconds (two window quantiles): call it once per control interval,
// not per request.
func (s *Signal) ValueAt(now time.Time) (ratio float64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.valueLocked(now)
}

// Value returns ValueAt(time.Now()).
func (s *Signal) Value() (ratio float64, ok bool) { return s.ValueAt(time.Now()) }

func (s *Signal) valueLocked(now time.Time) (float64, bool) {
	if n := s.short.CountAt(now); n == 0 || n < s.cfg.minSamples {
		return 0, false
	}
	short := s.short.QuantileAt(now, s.cfg.q)
	long := s.long.QuantileAt(now, s.cfg.q)
	return long / short, true // both are at least MinSeconds
}

// DegradedAt evaluates the signal at instant now and returns whether
// latency is degraded: it becomes true when the ratio falls below the enter
// threshold and false again when it rises above the exit threshold; while
// the ratio is unknown (too few observations) the state holds. Call it
// periodically, for example once per control interval.
func (s *Signal) DegradedAt(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.valueLocked(now)
	switch {
	case !ok:
	case s.degraded && r > s.cfg.exit:
		s.degraded = false
	case !s.degraded && r < s.cfg.enter:
		s.degraded = true
	}
	return s.degraded
}

// Degraded returns DegradedAt(time.Now()).
func (s *Signal) Degraded() bool { return s.DegradedAt(time.Now()) }

// Thresholds returns the hysteresis band: DegradedAt turns true below
// enter and false again above exit.
func (s *Signal) Thresholds() (enter, exit float64) { return s.cfg.enter, s.cfg.exit }
