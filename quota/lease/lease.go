// Package lease is a per-tenant concurrency limit that holds across every
// worker process: a Redis sorted set per tenant, one member per running
// job scored by its expiry (seed 003, a lease semaphore). Acquire and
// release are atomic Lua scripts run through the client's Script helper
// (EVALSHA, EVAL when not loaded); Redis's own clock dates the leases, so
// the workers' clocks need not agree (WithClock dates them by the caller's:
// tests on fake time). A heartbeat renews every lease the
// process holds in one round trip; a crashed worker's leases expire after
// the TTL.
//
// A Semaphore implements the fair queue's Limiter: with
// fairqueue.WithLimiter(sem) a worker pool gets "at most N of this tenant's
// jobs at once, fleet-wide"; a refused job goes back to its queue with a
// delay, never dropped.
//
// Redis down: the Semaphore falls back to a per-process cap (by default
// the same N in each process, so the fleet-wide cap is N times the number
// of workers while Redis is away), counts each fallback grant
// (qtop_lease_fallback_total) and logs the change once each way; no job is
// lost or refused for it. Leases Redis lost while their jobs ran (evicted,
// flushed, or expired during an outage longer than the TTL) are put back
// by the next heartbeat and counted once (qtop_lease_lost_total).
//
// Redis slow: every call (acquire, release, heartbeat) returns within
// WithTimeout (250 ms) whatever the client passed — go-redis bounds a call
// by its context only with ContextTimeoutEnabled, so the Semaphore does not
// rely on it — and counts as Redis unreachable; a lease Redis grants after
// its caller went on is given back when the answer comes, and a release
// it answered too late is done then.
package lease

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// ErrConfig reports an invalid option or argument.
var ErrConfig = errors.New("lease: invalid configuration")

// Defaults.
const (
	DefaultTTL      = 10 * time.Second
	DefaultPrefix   = "qtop:lease:"
	DefaultTimeout  = 250 * time.Millisecond
	DefaultRetryMin = 5 * time.Millisecond
	DefaultRetryMax = 200 * time.Millisecond
	// redisPause is how long the Semaphore keeps to its fallback after a
	// failed Redis call before it tries Redis again.
	redisPause = time.Second
)

// The scripts date leases by Redis's clock, or by the caller's (ARGV[4]
// of acquire, ARGV[2] of renew, in ms, empty for Redis's): then the key
// expires by Redis's clock a grace (clockGrace) after the TTL, so that a
// caller's clock running ahead of Redis's does not lose live leases.
var acquireScript = redis.NewScript(`
local now
local ttl = tonumber(ARGV[2])
local keep = ttl
if ARGV[4] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
else
  now = tonumber(ARGV[4])
  keep = ttl + tonumber(ARGV[5])
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local n = redis.call('ZCARD', KEYS[1])
if n < tonumber(ARGV[3]) then
  redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
  redis.call('PEXPIRE', KEYS[1], keep)
  return {1, n + 1, 0}
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {0, n, tonumber(first[2]) - now}
`)

var releaseScript = redis.NewScript(`
return redis.call('ZREM', KEYS[1], ARGV[1])
`)

// renewScript extends every lease given (KEYS[i], ARGV[i+3]) to now + ttl
// and returns, per lease, 1 if it was still held and 0 if it had expired
// or was gone (its key evicted or flushed, Redis restarted empty): such a
// lease is put back, as its job still runs, so that the fleet-wide count
// is right again within one heartbeat.
var renewScript = redis.NewScript(`
local now
local ttl = tonumber(ARGV[1])
local keep = ttl
if ARGV[2] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
else
  now = tonumber(ARGV[2])
  keep = ttl + tonumber(ARGV[3])
end
local out = {}
for i, key in ipairs(KEYS) do
  local s = redis.call('ZSCORE', key, ARGV[i + 3])
  if s and tonumber(s) > now then
    out[i] = 1
  else
    out[i] = 0
  end
  redis.call('ZADD', key, now + ttl, ARGV[i + 3])
  redis.call('PEXPIRE', key, keep)
end
return out
`)

// Semaphore grants per-tenant leases. Safe for concurrent use; make one
// with New, Start its heartbeat, and Shutdown it.
type Semaphore struct {
	client redis.Scripter
	limit  func(tenant string) int
	cfg    config
	owner  string

	mu       sync.Mutex
	held     map[string][]held // per tenant, a stack
	local    map[string]int    // grants in this process per tenant (Redis or fallback)
	backoff  map[string]int    // consecutive refusals per tenant
	pauseTil time.Time         // Redis skipped until then (after a failure)
	down     bool

	seq                                      atomic.Uint64
	trips, acquired, refused, fallback, lost atomic.Uint64
	releaseErrors                            atomic.Uint64
	stop                                     chan struct{}
	wg                                       sync.WaitGroup
	calls                                    sync.WaitGroup // Redis calls still running (call.go)
	started, shut                            bool
}

type held struct {
	id    string
	redis bool // false: a fallback grant
}

type config struct {
	ttl, heartbeat, timeout, retryMin, retryMax time.Duration
	prefix                                      string
	fallback                                    func(tenant string) int
	reg                                         prometheus.Registerer
	log                                         *slog.Logger
	now                                         func() time.Time // nil: Redis's clock
}

// clockGrace is how much longer than the TTL the key of leases dated by
// the caller's clock (WithClock) lives by Redis's.
const clockGrace = time.Minute

// clockArgs are the scripts' clock arguments: the caller's time in ms and
// the grace, or empty for Redis's clock.
func (c *config) clockArgs() []any {
	if c.now == nil {
		return []any{"", ""}
	}
	return []any{c.now().UnixMilli(), clockGrace.Milliseconds()}
}

// Option configures New.
type Option func(*config)

// WithTTL sets how long a lease lives without renewal (default DefaultTTL).
func WithTTL(d time.Duration) Option { return func(c *config) { c.ttl = d } }

// WithHeartbeat sets how often held leases are renewed (default TTL/3).
func WithHeartbeat(d time.Duration) Option { return func(c *config) { c.heartbeat = d } }

// WithTimeout bounds each Redis call (default DefaultTimeout), whatever
// the client: Acquire, Release and the heartbeat return within it even
// when the client ignores contexts' deadlines (go-redis without
// ContextTimeoutEnabled) and Redis stalls.
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// WithRetry sets the delay after a refused acquire: min, doubled per
// refusal in a row up to max, with jitter (defaults 5 ms and 200 ms).
func WithRetry(min, max time.Duration) Option {
	return func(c *config) { c.retryMin, c.retryMax = min, max }
}

// WithPrefix sets the key prefix (default DefaultPrefix); the key of a
// tenant is prefix + tenant.
func WithPrefix(p string) Option { return func(c *config) { c.prefix = p } }

// WithFallback sets the per-process cap used while Redis is unreachable
// (default: the fleet-wide limit itself, in each process).
func WithFallback(f func(tenant string) int) Option { return func(c *config) { c.fallback = f } }

// WithRegisterer registers the metrics: qtop_lease_redis_calls_total,
// qtop_lease_acquired_total, qtop_lease_refused_total,
// qtop_lease_fallback_total, qtop_lease_lost_total,
// qtop_lease_release_errors_total.
func WithRegisterer(r prometheus.Registerer) Option { return func(c *config) { c.reg = r } }

// WithClock dates the leases by now instead of by Redis's clock. Every
// Semaphore sharing the prefix must then use the same clock: tests on fake
// time (testing/synctest) give time.Now, which in the bubble stands still
// during a round trip while Redis's clock runs on. In a fleet, keep
// Redis's clock.
func WithClock(now func() time.Time) Option { return func(c *config) { c.now = now } }

// WithLogger sets the logger (default: none).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// New returns a Semaphore on client whose tenant limits come from limit
// (≤ 0: no limit for that tenant).
func New(client redis.Scripter, limit func(tenant string) int, opts ...Option) (*Semaphore, error) {
	c := config{ttl: DefaultTTL, timeout: DefaultTimeout, retryMin: DefaultRetryMin, retryMax: DefaultRetryMax, prefix: DefaultPrefix}
	for _, o := range opts {
		o(&c)
	}
	if c.heartbeat == 0 {
		c.heartbeat = c.ttl / 3
	}
	switch {
	case client == nil || limit == nil:
		return nil, fmt.Errorf("%w: a client and a limit function are required", ErrConfig)
	case c.ttl < 10*time.Millisecond:
		return nil, fmt.Errorf("%w: ttl %v (want ≥ 10 ms)", ErrConfig, c.ttl)
	case c.heartbeat <= 0 || c.heartbeat >= c.ttl:
		return nil, fmt.Errorf("%w: heartbeat %v (want > 0 and below the ttl %v)", ErrConfig, c.heartbeat, c.ttl)
	case c.timeout <= 0:
		return nil, fmt.Errorf("%w: timeout %v", ErrConfig, c.timeout)
	case c.retryMin <= 0 || c.retryMax < c.retryMin:
		return nil, fmt.Errorf("%w: retry %v to %v", ErrConfig, c.retryMin, c.retryMax)
	}
	if c.fallback == nil {
		c.fallback = limit
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	var b [6]byte
	_, _ = crand.Read(b[:])
	s := &Semaphore{client: client, limit: limit, cfg: c, owner: hex.EncodeToString(b[:]),
		held: map[string][]held{}, local: map[string]int{}, backoff: map[string]int{}, stop: make(chan struct{})}
	if c.reg != nil {
		if err := s.register(c.reg); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Owner is the prefix of this process's lease ids.
func (s *Semaphore) Owner() string { return s.owner }

// Key is the Redis key of tenant's leases.
func (s *Semaphore) Key(tenant string) string { return s.cfg.prefix + tenant }

// Acquire takes one of tenant's slots. It returns false and when to try
// again when the tenant is at its limit across the fleet. With Redis
// unreachable it grants by the per-process fallback cap instead. It
// never returns an error: a job is delayed, never dropped.
func (s *Semaphore) Acquire(ctx context.Context, tenant string) (ok bool, retry time.Duration) {
	n := s.limit(tenant)
	if n <= 0 {
		s.grant(tenant, held{})
		return true, 0
	}
	if s.redisPaused() {
		return s.acquireLocal(tenant)
	}
	id := s.owner + ":" + strconv.FormatUint(s.seq.Add(1), 36)
	key := s.Key(tenant)
	s.trips.Add(1)
	res, err := s.call(ctx, func(ctx context.Context) ([]int64, error) {
		return acquireScript.Run(ctx, s.client, []string{key}, append([]any{id, s.cfg.ttl.Milliseconds(), n}, s.cfg.clockArgs()...)...).Int64Slice()
	}, func(res []int64, err error) {
		// Granted after the caller went on without it: give it back now
		// rather than leave it to its TTL.
		if err == nil && len(res) == 3 && res[0] == 1 {
			if s.releaseLate(key, id) != nil {
				s.releaseErrors.Add(1)
			}
		}
	})
	if err != nil || len(res) != 3 {
		if ctx.Err() != nil {
			return false, s.cfg.retryMin
		}
		s.redisFailed(err)
		return s.acquireLocal(tenant)
	}
	s.redisOK()
	if res[0] == 1 {
		s.grant(tenant, held{id: id, redis: true})
		return true, 0
	}
	s.refused.Add(1)
	s.mu.Lock()
	k := s.backoff[tenant]
	s.backoff[tenant] = min(k+1, 16)
	s.mu.Unlock()
	d := s.cfg.retryMin << k
	if d > s.cfg.retryMax || d <= 0 {
		d = s.cfg.retryMax
	}
	d = d/2 + rand.N(d/2+1)
	if hint := time.Duration(res[2]) * time.Millisecond; hint > 0 && hint < d {
		d = hint
	}
	return false, d
}

func (s *Semaphore) grant(tenant string, h held) {
	s.acquired.Add(1)
	s.mu.Lock()
	s.held[tenant] = append(s.held[tenant], h)
	s.local[tenant]++
	delete(s.backoff, tenant)
	s.mu.Unlock()
}

func (s *Semaphore) acquireLocal(tenant string) (bool, time.Duration) {
	s.mu.Lock()
	ok := s.local[tenant] < max(s.cfg.fallback(tenant), 1)
	s.mu.Unlock()
	if !ok {
		s.refused.Add(1)
		return false, s.cfg.retryMax
	}
	s.fallback.Add(1)
	s.grant(tenant, held{})
	return true, 0
}

func (s *Semaphore) redisPaused() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.down && time.Now().Before(s.pauseTil)
}

func (s *Semaphore) redisFailed(err error) {
	s.mu.Lock()
	was := s.down
	s.down, s.pauseTil = true, time.Now().Add(redisPause)
	s.mu.Unlock()
	if !was {
		s.cfg.log.Warn("lease: Redis unreachable or failing; per-process concurrency caps apply until it answers", "err", err)
	}
}

func (s *Semaphore) redisOK() {
	s.mu.Lock()
	was := s.down
	s.down = false
	s.mu.Unlock()
	if was {
		s.cfg.log.Info("lease: Redis reachable again; fleet-wide concurrency caps apply")
	}
}

// Release gives back one of tenant's slots (the most recent lease), after
// its job ended. A Release whose Redis call fails is counted
// (Stats.ReleaseErrors) and leaves the lease to expire with its TTL; one
// that Redis did not answer within the timeout is done when Redis answers
// (tried again then if that answer is an error).
func (s *Semaphore) Release(tenant string) {
	s.mu.Lock()
	st := s.held[tenant]
	if len(st) == 0 {
		s.mu.Unlock()
		return
	}
	h := st[len(st)-1]
	if len(st) == 1 {
		delete(s.held, tenant)
	} else {
		s.held[tenant] = st[:len(st)-1]
	}
	if s.local[tenant]--; s.local[tenant] <= 0 {
		delete(s.local, tenant)
	}
	s.mu.Unlock()
	if !h.redis {
		return
	}
	key := s.Key(tenant)
	s.trips.Add(1)
	_, err := s.call(context.Background(), func(ctx context.Context) ([]int64, error) {
		return nil, releaseScript.Run(ctx, s.client, []string{key}, h.id).Err()
	}, func(_ []int64, err error) {
		// Redis answered after the caller went on, with an error: the
		// release may not have run (a NOSCRIPT whose EVAL fallback the
		// client would not send on the ended context). Redo it now
		// rather than leave the lease to its TTL; ZREM is idempotent.
		if err != nil {
			_ = s.releaseLate(key, h.id) // counted already, at the timeout
		}
	})
	if err != nil {
		s.releaseErrors.Add(1)
		s.redisFailed(err)
	}
}

// Held returns the leases this process holds for tenant.
func (s *Semaphore) Held(tenant string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.held[tenant])
}

// Start starts the heartbeat that renews held leases every heartbeat
// interval, all in one round trip. A second call does nothing.
func (s *Semaphore) Start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.shut {
		return
	}
	s.started = true
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(s.cfg.heartbeat)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				s.renew()
			}
		}
	}()
}

func (s *Semaphore) renew() {
	s.mu.Lock()
	var keys, tenants []string
	args := append([]any{s.cfg.ttl.Milliseconds()}, s.cfg.clockArgs()...)
	for tenant, st := range s.held {
		for _, h := range st {
			if h.redis {
				keys, tenants = append(keys, s.Key(tenant)), append(tenants, tenant)
				args = append(args, h.id)
			}
		}
	}
	s.mu.Unlock()
	if len(keys) == 0 {
		return
	}
	s.trips.Add(1)
	res, err := s.call(context.Background(), func(ctx context.Context) ([]int64, error) {
		return renewScript.Run(ctx, s.client, keys, args...).Int64Slice()
	}, nil)
	if err == nil && len(res) != len(keys) {
		// Not the script's answer (a proxy or a server that is not
		// Redis): nothing in it can be matched to a lease.
		err = fmt.Errorf("lease: Redis answered %d renewals for %d leases", len(res), len(keys))
	}
	if err != nil {
		s.redisFailed(err)
		return
	}
	s.settleRenewals(res, keys, tenants, args[3:])
}

// settleRenewals counts the leases a renewal found expired or gone (res[i]
// 0) and put back. One released while the renewal ran is not lost: the
// renewal put it back after its release, so it is removed again.
func (s *Semaphore) settleRenewals(res []int64, keys, tenants []string, ids []any) {
	var lost int
	var released []int
	s.mu.Lock()
	for i, v := range res {
		if v != 0 {
			continue
		}
		if s.holdsLocked(tenants[i], ids[i].(string)) {
			lost++
		} else {
			released = append(released, i)
		}
	}
	s.mu.Unlock()
	for _, i := range released {
		s.trips.Add(1)
		if _, err := s.call(context.Background(), func(ctx context.Context) ([]int64, error) {
			return nil, releaseScript.Run(ctx, s.client, []string{keys[i]}, ids[i]).Err()
		}, nil); err != nil {
			s.releaseErrors.Add(1)
		}
	}
	if lost > 0 {
		s.lost.Add(uint64(lost))
		s.cfg.log.Warn("lease: leases had expired or were gone from Redis before their renewal (Redis evicted, flushed or restarted, or the heartbeat was late); put back, the jobs go on",
			"leases", lost)
	}
}

// holdsLocked reports whether the process still holds lease id of tenant.
func (s *Semaphore) holdsLocked(tenant, id string) bool {
	for _, h := range s.held[tenant] {
		if h.id == id {
			return true
		}
	}
	return false
}

// Shutdown stops the heartbeat and releases every lease still held, then
// waits for Redis calls that outlived their callers' timeout, within ctx.
// Later calls do nothing.
func (s *Semaphore) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.shut {
		s.mu.Unlock()
		return nil
	}
	s.shut = true
	s.mu.Unlock()
	close(s.stop)
	s.wg.Wait()
	for {
		s.mu.Lock()
		var tenant string
		for t := range s.held {
			tenant = t
			break
		}
		s.mu.Unlock()
		if tenant == "" {
			return s.waitCalls(ctx)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		s.Release(tenant)
	}
}

// Stats are the Semaphore's counters.
type Stats struct {
	// RedisCalls counts round trips (acquire, release, heartbeat).
	RedisCalls uint64
	// Acquired and Refused count acquires; Fallback those granted by the
	// per-process cap while Redis was unreachable; Lost leases that
	// expired or were gone (evicted, flushed) before a heartbeat renewed
	// them, each time it happened (the heartbeat puts them back, as
	// their jobs still run); ReleaseErrors releases
	// whose Redis call failed or timed out (a timed-out one is done late
	// when Redis answers) and late grants that could not be given back:
	// leases that may be left to expire.
	Acquired, Refused, Fallback, Lost, ReleaseErrors uint64
}

// Stats returns the counters.
func (s *Semaphore) Stats() Stats {
	return Stats{RedisCalls: s.trips.Load(), Acquired: s.acquired.Load(), Refused: s.refused.Load(),
		Fallback: s.fallback.Load(), Lost: s.lost.Load(), ReleaseErrors: s.releaseErrors.Load()}
}

func (s *Semaphore) register(reg prometheus.Registerer) error {
	for _, m := range []struct {
		name, help string
		v          *atomic.Uint64
	}{
		{"qtop_lease_redis_calls_total", "Round trips to Redis (acquire, release, heartbeat).", &s.trips},
		{"qtop_lease_acquired_total", "Leases granted.", &s.acquired},
		{"qtop_lease_refused_total", "Acquires refused (the tenant at its fleet-wide limit); the job waits.", &s.refused},
		{"qtop_lease_fallback_total", "Leases granted by the per-process cap while Redis was unreachable.", &s.fallback},
		{"qtop_lease_lost_total", "Leases that expired or were gone from Redis before a heartbeat renewed them (put back: the job still runs).", &s.lost},
		{"qtop_lease_release_errors_total", "Releases whose Redis call failed or timed out, and late grants not given back: leases that may be left to their TTL.", &s.releaseErrors},
	} {
		v := m.v
		if err := reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: m.name, Help: m.help},
			func() float64 { return float64(v.Load()) })); err != nil {
			return fmt.Errorf("lease: metrics: %w", err)
		}
	}
	return nil
}
