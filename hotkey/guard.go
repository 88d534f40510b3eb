package hotkey

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/qtop-dev/qtop/spacesaving"
)

// Guard defends a backend against hot keys. Misses are counted in a
// Space-Saving sketch; a key found hot is kept in a small local cache for
// a short TTL (default 3 s), and concurrent misses of a key are coalesced
// into one load, so under a storm each process sends about one request per
// hot key per TTL to the backend. Cold keys are never cached: the guard
// adds no staleness to the long tail.
//
// Coalescing respects every caller's context: a waiter whose context ends
// leaves at once with its error; the shared load runs under the guard's
// own context (so one caller leaving does not fail the others), bounded
// by WithLoadTimeout; a panic in the load is re-raised, as a *PanicError,
// in every caller waiting for it. Errors are never cached.
//
// A cache hit is lock-free and does not allocate. Time is an argument
// (GetAt); Get reads the clock once. Safe for concurrent use; make one
// with New and end it with Shutdown.
type Guard[K comparable, V any] struct {
	load    func(ctx context.Context, key K) (V, error)
	str     func(K) string
	ttl     int64
	window  int64
	minHits uint64
	share   float64
	maxKeys int
	timeout time.Duration

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // loads running on their own goroutine

	cache   atomic.Pointer[map[K]*hotEntry[V]]
	cacheMu sync.Mutex

	mu        sync.Mutex
	calls     map[K]*call[V]
	sketch    *spacesaving.Sketch
	windowEnd int64
	closed    bool

	misses, loads, coalesced uint64 // under mu
	left, panics, cached     atomic.Uint64
}

type hotEntry[V any] struct {
	state   atomic.Pointer[hotValue[V]]
	touched atomic.Bool // hit since stored: still hot when it expires
}

type hotValue[V any] struct {
	v   V
	exp int64
}

// call hands a load's result to the callers waiting for it. The leader of
// a load that nobody waits for needs none (its entry in calls is nil).
type call[V any] struct {
	done  chan struct{} // closed once v, err and panic are set
	v     V
	err   error
	panic *PanicError
}

// PanicError is what every caller waiting on a load that panicked panics
// with: the value the load panicked with and its stack.
type PanicError struct {
	Value any
	Stack []byte
}

func (p *PanicError) Error() string {
	return fmt.Sprintf("hotkey: load panicked: %v\n\n%s", p.Value, p.Stack)
}

type config struct {
	ttl, window, timeout time.Duration
	minHits              int
	share                float64
	maxKeys              int
}

// Option configures New.
type Option func(*config)

// WithTTL sets how long a hot key's value is served from the local cache
// (default 3 s).
func WithTTL(d time.Duration) Option { return func(c *config) { c.ttl = d } }

// WithThreshold sets how many misses of a key within one detection
// window (default the TTL) make it hot (default 3).
func WithThreshold(misses int, window time.Duration) Option {
	return func(c *config) { c.minHits, c.window = misses, window }
}

// WithShare also requires a hot key to account for at least share of
// the window's misses (default 0.001), so that a uniform spread over many
// keys, each missed a few times, does not fill the cache.
func WithShare(share float64) Option { return func(c *config) { c.share = share } }

// WithCacheSize bounds the hot keys cached (default 1,024) and sets the
// sketch's capacity (default 4 × that).
func WithCacheSize(n int) Option { return func(c *config) { c.maxKeys = n } }

// WithLoadTimeout bounds each shared load (default: no bound but the
// guard's own context, which Shutdown cancels).
func WithLoadTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// New returns a guard in front of load. keyString turns a key into
// the sketch's string key; nil is allowed when K is string (or any type
// whose fmt form identifies it, at the cost of an allocation per miss).
func New[K comparable, V any](load func(ctx context.Context, key K) (V, error), keyString func(K) string, opts ...Option) (*Guard[K, V], error) {
	if load == nil {
		return nil, fmt.Errorf("%w: nil load function", ErrConfig)
	}
	c := config{ttl: 3 * time.Second, minHits: 3, share: 0.001, maxKeys: 1024}
	for _, o := range opts {
		o(&c)
	}
	if c.window == 0 {
		c.window = c.ttl
	}
	if c.ttl <= 0 || c.window <= 0 || c.minHits < 1 || c.maxKeys < 1 || c.timeout < 0 || !(c.share >= 0 && c.share < 1) {
		return nil, fmt.Errorf("%w: guard ttl %v, window %v, threshold %d, share %v, cache size %d, load timeout %v (want all > 0, share in [0, 1), timeout ≥ 0)",
			ErrConfig, c.ttl, c.window, c.minHits, c.share, c.maxKeys, c.timeout)
	}
	if keyString == nil {
		keyString = func(k K) string {
			if s, ok := any(k).(string); ok {
				return s
			}
			return fmt.Sprint(k)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	g := &Guard[K, V]{load: load, str: keyString, ttl: int64(c.ttl), window: int64(c.window), minHits: uint64(c.minHits), share: c.share,
		maxKeys: c.maxKeys, timeout: c.timeout, ctx: ctx, cancel: cancel,
		calls: make(map[K]*call[V]), sketch: spacesaving.New(4 * c.maxKeys)}
	m := make(map[K]*hotEntry[V])
	g.cache.Store(&m)
	return g, nil
}

// Get returns key's value from the hot-key cache or from a (shared) load,
// reading the clock once; see GetAt.
func (g *Guard[K, V]) Get(ctx context.Context, key K) (V, error) {
	return g.GetAt(ctx, time.Now(), key)
}

// GetAt is Get at now: the cache-hit path costs no clock read, and a hot
// key loaded on this miss is cached until now + TTL.
func (g *Guard[K, V]) GetAt(ctx context.Context, now time.Time, key K) (V, error) {
	n := now.UnixNano()
	if e := (*g.cache.Load())[key]; e != nil {
		if s := e.state.Load(); n < s.exp {
			if !e.touched.Load() {
				e.touched.Store(true)
			}
			return s.v, nil
		}
	}
	return g.miss(ctx, n, key)
}

func (g *Guard[K, V]) miss(ctx context.Context, n int64, key K) (V, error) {
	g.mu.Lock()
	g.misses++
	if g.closed {
		g.mu.Unlock()
		var zero V
		return zero, ErrClosed
	}
	if n >= g.windowEnd || n < g.windowEnd-2*g.window {
		g.sketch.Reset()
		g.windowEnd = n + g.window
	}
	sk := g.str(key)
	g.sketch.Add(sk, 1)
	if c, ok := g.calls[key]; ok {
		// A load is in flight: wait for it. The first waiter makes the
		// call that the result is handed over in.
		if c == nil {
			c = &call[V]{done: make(chan struct{})}
			g.calls[key] = c
		}
		g.coalesced++
		g.mu.Unlock()
		return g.wait(ctx, c)
	}
	// A load that finished since this caller looked may have cached the
	// key: look again before starting another.
	if e := (*g.cache.Load())[key]; e != nil {
		if s := e.state.Load(); n < s.exp {
			g.mu.Unlock()
			return s.v, nil
		}
	}
	g.loads++
	if ctx.Done() == nil {
		// This caller can never leave: run the load here, no goroutine,
		// and no call unless someone joins.
		g.calls[key] = nil
		g.mu.Unlock()
		v, pe, err := g.run(n, key, sk)
		if pe != nil {
			panic(pe)
		}
		return v, err
	}
	c := &call[V]{done: make(chan struct{})}
	g.calls[key] = c
	g.wg.Add(1)
	g.mu.Unlock()
	go func() {
		defer g.wg.Done()
		_, _, _ = g.run(n, key, sk)
	}()
	return g.wait(ctx, c)
}

func (g *Guard[K, V]) wait(ctx context.Context, c *call[V]) (V, error) {
	select {
	case <-c.done:
		return g.result(c)
	case <-ctx.Done():
		select {
		case <-c.done:
			return g.result(c)
		default:
		}
		g.left.Add(1)
		var zero V
		return zero, ctx.Err()
	}
}

func (g *Guard[K, V]) result(c *call[V]) (V, error) {
	if c.panic != nil {
		panic(c.panic)
	}
	return c.v, c.err
}

// run performs the shared load under the guard's context, caches the
// value when the key is hot, and hands the result to every waiter. A
// panic in the load is recovered and returned as pe.
func (g *Guard[K, V]) run(n int64, key K, sk string) (v V, pe *PanicError, err error) {
	defer func() {
		if r := recover(); r != nil {
			g.panics.Add(1)
			pe = &PanicError{Value: r, Stack: debug.Stack()}
			err = pe
		}
		g.finish(n, key, sk, v, err, pe)
	}()
	ctx := g.ctx
	if g.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, g.timeout)
		defer cancel()
	}
	v, err = g.load(ctx, key)
	return v, nil, err
}

func (g *Guard[K, V]) finish(n int64, key K, sk string, v V, err error, pe *PanicError) {
	g.mu.Lock()
	hot := false
	if err == nil {
		if cnt, e, ok := g.sketch.Estimate(sk); ok && cnt-e >= g.minHits && float64(cnt-e) >= g.share*float64(g.sketch.Total()) {
			hot = true
		} else if e := (*g.cache.Load())[key]; e != nil && e.touched.Load() {
			hot = true // hit while cached: still hot
		}
	}
	if hot {
		// Store before the call is removed, so that no request in
		// between loads the key a second time.
		g.mu.Unlock()
		g.store(n, key, v)
		g.mu.Lock()
	}
	c := g.calls[key]
	delete(g.calls, key)
	if c != nil {
		c.v, c.err, c.panic = v, err, pe
		close(c.done)
	}
	g.mu.Unlock()
}

func (g *Guard[K, V]) store(n int64, key K, v V) {
	val := &hotValue[V]{v: v, exp: n + g.ttl}
	if e := (*g.cache.Load())[key]; e != nil {
		e.touched.Store(false)
		e.state.Store(val)
		return
	}
	g.cacheMu.Lock()
	defer g.cacheMu.Unlock()
	old := *g.cache.Load()
	if e := old[key]; e != nil {
		e.touched.Store(false)
		e.state.Store(val)
		return
	}
	// Copy on write: hot keys are few and change rarely, and readers
	// never lock. Expired, untouched entries are dropped on the way.
	m := make(map[K]*hotEntry[V], len(old)+1)
	for k, e := range old {
		if s := e.state.Load(); s.exp > n || e.touched.Load() {
			m[k] = e
		}
	}
	if len(m) >= g.maxKeys {
		g.cache.Store(&m)
		return // full of live hot keys: serve this one by coalescing only
	}
	e := &hotEntry[V]{}
	e.state.Store(val)
	m[key] = e
	g.cache.Store(&m)
	g.cached.Add(1)
}

// Invalidate drops key from the cache, for callers that write it. A load
// of the key already in flight may still store what it read before the
// write, for at most one TTL.
func (g *Guard[K, V]) Invalidate(key K) {
	g.cacheMu.Lock()
	defer g.cacheMu.Unlock()
	old := *g.cache.Load()
	if _, ok := old[key]; !ok {
		return
	}
	m := make(map[K]*hotEntry[V], len(old))
	for k, e := range old {
		if k != key {
			m[k] = e
		}
	}
	g.cache.Store(&m)
}

// Stats are cumulative counters of a Guard.
type Stats struct {
	// Misses are requests not served from the cache; Loads the calls made
	// to the backend; Coalesced the misses that joined a load in flight;
	// Left the waiters whose context ended first; Panics the loads that
	// panicked; Cached the hot keys stored; Entries the keys cached now.
	Misses, Loads, Coalesced, Left, Panics, Cached uint64
	Entries                                        int
}

// Stats returns the guard's counters.
func (g *Guard[K, V]) Stats() Stats {
	g.mu.Lock()
	misses, loads, coalesced := g.misses, g.loads, g.coalesced
	g.mu.Unlock()
	return Stats{Misses: misses, Loads: loads, Coalesced: coalesced,
		Left: g.left.Load(), Panics: g.panics.Load(), Cached: g.cached.Load(), Entries: len(*g.cache.Load())}
}

// Hot returns the n keys with the most misses in the current window, as
// the sketch sees them.
func (g *Guard[K, V]) Hot(n int) []spacesaving.Counter {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.sketch.Top(n)
}

// Shutdown cancels loads in flight and waits for them to return, or for
// ctx to end. Later calls that miss the cache get ErrClosed.
func (g *Guard[K, V]) Shutdown(ctx context.Context) error {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.cancel()
	done := make(chan struct{})
	go func() { g.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("hotkey: shutdown: %w", ctx.Err())
	}
}
