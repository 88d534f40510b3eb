package enforce

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/qtop-dev/qtop/ratio"
	"github.com/qtop-dev/qtop/tenant"
)

// Signal is the latency-ratio signal the price controller follows:
// p95 over a long window divided by p95 over a short window, about 1.0
// when healthy and falling as latency rises. *ratio.Signal implements it.
type Signal interface {
	ObserveAt(now time.Time, seconds float64)
	ValueAt(now time.Time) (ratio float64, ok bool)
}

var _ Signal = (*ratio.Signal)(nil)

// PriceConfig tunes a PriceController. Zero fields take the defaults.
type PriceConfig struct {
	// Steps are the multipliers a tier climbs through before it is shed
	// (default 2, 4, 8). Each must be > 1 and greater than the one before.
	Steps []float64
	// Enter is the ratio below which the controller escalates (default
	// 0.8); Exit the ratio above which it recovers (default 0.95). Between
	// them it holds: that band is the hysteresis.
	Enter, Exit float64
	// Severe is the ratio below which each escalation takes two steps
	// (default 0.5): big degradations are caught faster.
	Severe float64
	// EscalateEvery is the least time between two escalations (default
	// 1 s); RecoverEvery between two recoveries (default 5 s), so recovery
	// is gradual.
	EscalateEvery, RecoverEvery time.Duration
}

func (c *PriceConfig) fill() error {
	if len(c.Steps) == 0 {
		c.Steps = []float64{2, 4, 8}
	}
	prev := 1.0
	for _, s := range c.Steps {
		if !(s > prev) || math.IsInf(s, 0) {
			return fmt.Errorf("%w: price steps %v (want finite, increasing, > 1)", ErrConfig, c.Steps)
		}
		prev = s
	}
	if c.Enter == 0 {
		c.Enter = 0.8
	}
	if c.Exit == 0 {
		c.Exit = 0.95
	}
	if c.Severe == 0 {
		c.Severe = 0.5
	}
	if c.EscalateEvery == 0 {
		c.EscalateEvery = time.Second
	}
	if c.RecoverEvery == 0 {
		c.RecoverEvery = 5 * time.Second
	}
	if !(c.Severe > 0 && c.Severe <= c.Enter && c.Enter < c.Exit) {
		return fmt.Errorf("%w: ratios severe %v, enter %v, exit %v (want 0 < severe ≤ enter < exit)", ErrConfig, c.Severe, c.Enter, c.Exit)
	}
	if c.EscalateEvery < 0 || c.RecoverEvery < 0 {
		return fmt.Errorf("%w: negative controller interval", ErrConfig)
	}
	return nil
}

// PriceController turns the latency ratio into RU price multipliers per
// tier. When the ratio falls below Enter it raises the price of T3 step by
// step until T3 is shed, then T2, then T1; T0 is never priced up nor shed.
// When the ratio is back above Exit it lowers prices one step per
// RecoverEvery in the reverse order (T1 first). Reading a multiplier is a
// single atomic load; UpdateAt is cheap and safe to call from any request.
type PriceController struct {
	cfg   PriceConfig
	mu    sync.Mutex
	level int // escalation steps taken in total, 0 … 3 × (len(Steps)+1)
	last  time.Time
	mult  [tenant.NumTiers]atomic.Uint64 // float64 bits; +Inf means shed
	lvl   atomic.Int64
}

// newPriceController returns a controller at rest (every multiplier 1).
func newPriceController(cfg PriceConfig) (*PriceController, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	p := &PriceController{cfg: cfg}
	p.publish()
	return p, nil
}

func (p *PriceController) perTier() int { return len(p.cfg.Steps) + 1 }

// MaxLevel is the level at which T3, T2 and T1 are all shed.
func (p *PriceController) MaxLevel() int { return 3 * p.perTier() }

// Level returns the escalation steps currently taken.
func (p *PriceController) Level() int { return int(p.lvl.Load()) }

// UpdateAt feeds the controller the ratio at now (ok false: no signal,
// hold). It returns true when the prices changed.
func (p *PriceController) UpdateAt(now time.Time, ratio float64, ok bool) bool {
	if !ok || math.IsNaN(ratio) {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	since := now.Sub(p.last)
	if now.Before(p.last) {
		// The clock went backwards: restart the timers from now.
		p.last = now
		return false
	}
	switch {
	case ratio < p.cfg.Enter && p.level < p.MaxLevel() && (p.last.IsZero() || since >= p.cfg.EscalateEvery):
		p.level++
		if ratio < p.cfg.Severe && p.level < p.MaxLevel() {
			p.level++
		}
	case ratio > p.cfg.Exit && p.level > 0 && since >= p.cfg.RecoverEvery:
		p.level--
	default:
		return false
	}
	p.last = now
	p.publish()
	return true
}

// SetLevel forces the controller to level (clamped), for operators and
// tests; the timers restart at now.
func (p *PriceController) SetLevel(now time.Time, level int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.level = min(max(level, 0), p.MaxLevel())
	p.last = now
	p.publish()
}

func (p *PriceController) publish() {
	p.lvl.Store(int64(p.level))
	per := p.perTier()
	p.mult[0].Store(math.Float64bits(1))
	// Tier index 3 (T3) takes the first steps, then 2, then 1.
	for idx := 3; idx >= 1; idx-- {
		s := min(max(p.level-(3-idx)*per, 0), per)
		m := 1.0
		switch {
		case s == per:
			m = math.Inf(1)
		case s > 0:
			m = p.cfg.Steps[s-1]
		}
		p.mult[idx].Store(math.Float64bits(m))
	}
}

// Multiplier returns tier's current RU price multiplier: 1 at rest, +Inf
// when the tier is shed. An unset or invalid tier reads as T3.
func (p *PriceController) Multiplier(tier tenant.Tier) float64 {
	i := tier.Index()
	if i < 0 {
		i = 3
	}
	return math.Float64frombits(p.mult[i].Load())
}

// Shed reports whether tier is being shed.
func (p *PriceController) Shed(tier tenant.Tier) bool { return math.IsInf(p.Multiplier(tier), 1) }
