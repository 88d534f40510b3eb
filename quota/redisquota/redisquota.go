// Package redisquota sums the quota usage of several collectors through
// Redis: once per interval each collector writes its own per-tenant sums
// and reads the others', each with how long ago it was written (by the
// server's clock, or the caller's: WithClock), in one round trip (a Lua
// script run with the client's Script helper: EVALSHA, EVAL when the
// server does not have it yet). quota.Fleet's SetRemote takes the answer.
//
// Keys live under one hash tag, "{qtop-quota}", so that they share a slot
// on a Redis Cluster. A collector's sums expire after the TTL it writes
// them with, so a collector that crashes counts for no longer than that;
// one that stops calls Leave.
//
// Each collector needs an id of its own: two that exchange under one id
// overwrite each other's sums and each sees the fleet without the other,
// so together they admit up to twice a limit. A Sync marks its id as its
// own in Redis at each exchange; when another Sync wrote under the id
// since, Exchange fails with ErrDuplicateID (every exchange, on both) and
// writes nothing.
package redisquota

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/qtop-dev/qtop/quota"
)

// ErrRedis wraps a failed round trip or an answer that cannot be read.
var ErrRedis = errors.New("redisquota: redis")

// ErrDuplicateID reports another collector exchanging under this
// collector's id.
var ErrDuplicateID = errors.New("redisquota: another collector exchanges its sums under this id: give each collector an id of its own (collector serve --writer)")

// dupReply is the error the script answers a duplicate id with.
const dupReply = "QTOPDUPID"

// DefaultPrefix is the key prefix of a Sync.
const DefaultPrefix = "{qtop-quota}:"

// maxPairs bounds the tenants one collector writes per round trip.
const maxPairs = quota.DefaultMaxTenants

// maxOthers bounds the other collectors one exchange returns.
const maxOthers = 64

// The script first checks that the id is this Sync's: KEYS[3] holds the
// token (ARGV[7]) of the Sync that last exchanged under it; one that has
// exchanged before (ARGV[8] = '1') and finds another token there fails
// with dupReply, and claims the id, so that the other fails too. Then it
// writes this collector's sums (a hash of tenant → "demand
// admitted", replacing the last, and under the empty field, never a
// tenant, the time it was written), marks it alive until now + ttl in the
// collectors' sorted set, and returns every other live collector's sums,
// each as a list: how many ms ago it wrote them, then tenant, sums, ...
// Time is the server's (ARGV[5] empty), so the collectors' clocks need not
// agree, or the caller's in ms (ARGV[5]): then the keys themselves expire
// by the server's clock after ARGV[6] ms, a grace beyond the TTL, so that
// a caller's clock running ahead of the server's (a test on fake time)
// does not see sums vanish that are live by its own.
var syncScript = redis.NewScript(`
local now
local keep = tonumber(ARGV[2])
if ARGV[5] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
else
  now = tonumber(ARGV[5])
  keep = keep + tonumber(ARGV[6])
end
local ttl = tonumber(ARGV[2])
local owner = redis.call('GET', KEYS[3])
redis.call('SET', KEYS[3], ARGV[7], 'PX', keep)
if owner and owner ~= ARGV[7] and ARGV[8] == '1' then
  return redis.error_reply('` + dupReply + ` another collector exchanges under this id')
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
redis.call('PEXPIRE', KEYS[1], keep)
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[2], '', now)
local kv = {}
for i = 9, #ARGV do
  kv[#kv + 1] = ARGV[i]
  if #kv == 1000 then
    redis.call('HSET', KEYS[2], unpack(kv))
    kv = {}
  end
end
if #kv > 0 then redis.call('HSET', KEYS[2], unpack(kv)) end
redis.call('PEXPIRE', KEYS[2], keep)
local out = {}
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[4]))) do
  if id ~= ARGV[1] then
    local h = redis.call('HGETALL', ARGV[3] .. 'usage:' .. id)
    local one = {'0'}
    for i = 1, #h, 2 do
      if h[i] == '' then
        one[1] = tostring(math.max(0, now - tonumber(h[i + 1])))
      else
        one[#one + 1] = h[i]
        one[#one + 1] = h[i + 1]
      end
    end
    out[#out + 1] = one
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
	now    func() time.Time // nil: the server's clock
	token  string           // this Sync's mark on its id
	wrote  *atomic.Bool     // an exchange has marked the id
}

// clockGrace is how much longer than the TTL a Sync with its own clock
// (WithClock) keeps its keys by the server's clock.
const clockGrace = time.Minute

// New returns a Sync for collector id (unique in the fleet) whose sums
// count for ttl after each exchange (give two or three intervals).
func New(client redis.Scripter, id string, ttl time.Duration) (*Sync, error) {
	if client == nil || id == "" || len(id) > 256 || strings.ContainsAny(id, "{}") {
		return nil, fmt.Errorf("%w: a client and an id of 1 to 256 bytes without braces are required", quota.ErrConfig)
	}
	if ttl < time.Millisecond {
		return nil, fmt.Errorf("%w: ttl %v (want ≥ 1 ms)", quota.ErrConfig, ttl)
	}
	var b [8]byte
	_, _ = crand.Read(b[:])
	return &Sync{client: client, id: id, prefix: DefaultPrefix, ttl: ttl, token: hex.EncodeToString(b[:]), wrote: new(atomic.Bool)}, nil
}

// WithPrefix returns a copy of s whose keys start with prefix (tests give
// each run its own); keep a hash tag in it for Redis Cluster.
func (s *Sync) WithPrefix(prefix string) *Sync {
	c := *s
	c.prefix = prefix
	c.wrote = new(atomic.Bool)
	return &c
}

// WithClock returns a copy of s that dates its sums and the others' ages
// by now instead of by the Redis server's clock. Every collector sharing
// the prefix must then use the same clock: tests on fake time
// (testing/synctest) give time.Now, which in the bubble stands still
// during a round trip while the server's clock runs on. In a fleet, keep
// the server's clock.
func (s *Sync) WithClock(now func() time.Time) *Sync {
	c := *s
	c.now = now
	c.wrote = new(atomic.Bool)
	return &c
}

// leaveScript takes this collector out of the others' sums at once, and
// frees its id if this Sync holds it.
var leaveScript = redis.NewScript(`
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('DEL', KEYS[2])
if redis.call('GET', KEYS[3]) == ARGV[2] then
  redis.call('DEL', KEYS[3])
end
return 1
`)

// keys are the Sync's keys: the collectors' set, its sums, its id's mark.
func (s *Sync) keys() []string {
	return []string{s.prefix + "collectors", s.prefix + "usage:" + s.id, s.prefix + "owner:" + s.id}
}

// Leave removes this collector's sums (a collector that stops), so that
// the others do not count them until their TTL. One round trip.
func (s *Sync) Leave(ctx context.Context) error {
	if err := leaveScript.Run(ctx, s.client, s.keys(), s.id, s.token).Err(); err != nil {
		return fmt.Errorf("%w: leave: %w", ErrRedis, err)
	}
	return nil
}

// Exchange writes local (this collector's sums per tenant, at most
// quota.DefaultMaxTenants of them; the rest are not shared) and returns
// the sums of every other live collector (at most 64), each with how long
// ago it wrote them. One round trip. It fails with ErrDuplicateID when
// another collector exchanged under this id since this Sync's last
// exchange.
func (s *Sync) Exchange(ctx context.Context, local map[string]quota.Rates) ([]quota.Remote, error) {
	args := make([]any, 0, 8+2*min(len(local), maxPairs))
	args = append(args, s.id, s.ttl.Milliseconds(), s.prefix, maxOthers)
	if s.now != nil {
		args = append(args, s.now().UnixMilli(), clockGrace.Milliseconds())
	} else {
		args = append(args, "", "")
	}
	wrote := ""
	if s.wrote.Load() {
		wrote = "1"
	}
	args = append(args, s.token, wrote)
	n := 0
	for name, r := range local {
		if n == maxPairs {
			break
		}
		if name == "" {
			continue
		}
		args = append(args, name, strconv.FormatFloat(r.Demand, 'g', -1, 64)+" "+strconv.FormatFloat(r.Admitted, 'g', -1, 64))
		n++
	}
	res, err := syncScript.Run(ctx, s.client, s.keys(), args...).Slice()
	if err != nil {
		var re redis.Error
		if errors.As(err, &re) && strings.HasPrefix(re.Error(), dupReply) {
			return nil, fmt.Errorf("%w (id %q)", ErrDuplicateID, s.id)
		}
		return nil, fmt.Errorf("%w: exchange: %w", ErrRedis, err)
	}
	s.wrote.Store(true)
	if len(res) > maxOthers+1 {
		return nil, fmt.Errorf("%w: exchange: %d collectors in the answer, at most %d", ErrRedis, len(res), maxOthers+1)
	}
	out := make([]quota.Remote, 0, len(res))
	for _, one := range res {
		l, ok := one.([]any)
		if !ok || len(l)%2 != 1 || len(l) > 1+2*maxPairs {
			return nil, fmt.Errorf("%w: exchange: a collector's answer is not a list of an age and at most %d pairs", ErrRedis, maxPairs)
		}
		str := func(v any) string { s, _ := v.(string); return s }
		ms, err := strconv.ParseInt(str(l[0]), 10, 64)
		if err != nil || ms < 0 {
			return nil, fmt.Errorf("%w: exchange: age %q", ErrRedis, str(l[0]))
		}
		r := quota.Remote{Age: time.Duration(ms) * time.Millisecond, Rates: make(map[string]quota.Rates, len(l)/2)}
		for i := 1; i < len(l); i += 2 {
			name, v := str(l[i]), str(l[i+1])
			d, a, ok := strings.Cut(v, " ")
			dv, err1 := strconv.ParseFloat(d, 64)
			av, err2 := strconv.ParseFloat(a, 64)
			if name == "" || !ok || err1 != nil || err2 != nil || !(dv >= 0) || !(av >= 0) || math.IsInf(dv, 0) || math.IsInf(av, 0) {
				return nil, fmt.Errorf("%w: exchange: tenant %q has sums %q", ErrRedis, name, v)
			}
			r.Rates[name] = quota.Rates{Demand: dv, Admitted: av}
		}
		out = append(out, r)
	}
	return out, nil
}
