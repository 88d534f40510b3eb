// Package redisquota sums the quota usage of several collectors through
// Redis: once per interval each collector writes its own per-tenant sums
// and reads the others' in one round trip (a Lua script run with the
// client's Script helper: EVALSHA, EVAL when the server does not have it
// yet).
//
// Keys live under one hash tag, "{qtop-quota}", so that they share a slot
// on a Redis Cluster. A collector's sums expire after the TTL it writes
// them with, so a collector that stops counts for no longer than that.
package redisquota

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/qtop-dev/qtop/quota"
)

// ErrRedis wraps a failed round trip or an answer that cannot be read.
var ErrRedis = errors.New("redisquota: redis")

// DefaultPrefix is the key prefix of a Sync.
const DefaultPrefix = "{qtop-quota}:"

// maxPairs bounds the tenants one collector writes per round trip.
const maxPairs = quota.DefaultMaxTenants

// The script writes this collector's sums (a hash of tenant → "demand
// admitted", replacing the last), marks it alive until now + ttl in the
// collectors' sorted set, and returns every other live collector's sums.
// Time is the server's, so the collectors' clocks need not agree.
var syncScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('DEL', KEYS[2])
local kv = {}
for i = 4, #ARGV do
  kv[#kv + 1] = ARGV[i]
  if #kv == 1000 then
    redis.call('HSET', KEYS[2], unpack(kv))
    kv = {}
  end
end
if #kv > 0 then redis.call('HSET', KEYS[2], unpack(kv)) end
redis.call('PEXPIRE', KEYS[2], ttl)
local out = {}
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  if id ~= ARGV[1] then
    local h = redis.call('HGETALL', ARGV[3] .. 'usage:' .. id)
    for i = 1, #h do out[#out + 1] = h[i] end
  end
end
return out
`)

// Sync exchanges one collector's sums with the others'. Safe for
// concurrent use; make one with New.
type Sync struct {
	client redis.Scripter
	id     string
	prefix string
	ttl    time.Duration
}

// New returns a Sync for collector id (unique in the fleet) whose sums
// count for ttl after each exchange (give two or three intervals).
func New(client redis.Scripter, id string, ttl time.Duration) (*Sync, error) {
	if client == nil || id == "" || len(id) > 256 || strings.ContainsAny(id, "{}") {
		return nil, fmt.Errorf("%w: a client and an id of 1 to 256 bytes without braces are required", quota.ErrConfig)
	}
	if ttl < time.Millisecond {
		return nil, fmt.Errorf("%w: ttl %v (want ≥ 1 ms)", quota.ErrConfig, ttl)
	}
	return &Sync{client: client, id: id, prefix: DefaultPrefix, ttl: ttl}, nil
}

// WithPrefix returns a copy of s whose keys start with prefix (tests give
// each run its own); keep a hash tag in it for Redis Cluster.
func (s *Sync) WithPrefix(prefix string) *Sync {
	c := *s
	c.prefix = prefix
	return &c
}

// Exchange writes local (this collector's sums per tenant, at most
// quota.DefaultMaxTenants of them; the rest are not shared) and returns
// the sums of every other live collector, added per tenant. One round
// trip.
func (s *Sync) Exchange(ctx context.Context, local map[string]quota.Rates) (map[string]quota.Rates, error) {
	args := make([]any, 0, 3+2*min(len(local), maxPairs))
	args = append(args, s.id, s.ttl.Milliseconds(), s.prefix)
	n := 0
	for name, r := range local {
		if n == maxPairs {
			break
		}
		args = append(args, name, strconv.FormatFloat(r.Demand, 'g', -1, 64)+" "+strconv.FormatFloat(r.Admitted, 'g', -1, 64))
		n++
	}
	keys := []string{s.prefix + "collectors", s.prefix + "usage:" + s.id}
	res, err := syncScript.Run(ctx, s.client, keys, args...).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("%w: exchange: %w", ErrRedis, err)
	}
	if len(res)%2 != 0 {
		return nil, fmt.Errorf("%w: exchange: odd answer of %d strings", ErrRedis, len(res))
	}
	out := make(map[string]quota.Rates, len(res)/2)
	for i := 0; i < len(res); i += 2 {
		d, a, ok := strings.Cut(res[i+1], " ")
		dv, err1 := strconv.ParseFloat(d, 64)
		av, err2 := strconv.ParseFloat(a, 64)
		if !ok || err1 != nil || err2 != nil || !(dv >= 0) || !(av >= 0) {
			return nil, fmt.Errorf("%w: exchange: tenant %q has sums %q", ErrRedis, res[i], res[i+1])
		}
		r := out[res[i]]
		r.Demand += dv
		r.Admitted += av
		out[res[i]] = r
	}
	return out, nil
}
