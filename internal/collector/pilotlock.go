package collector

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// pilotLockTTL is how long the autopilot's lock outlives its holder's
// last renewal (a step every second renews it): a collector that dies
// hands the autopilot to another within this.
const pilotLockTTL = 5 * time.Second

// pilotLock is the fleet's autopilot lock: one key in the Redis the
// collectors already share for fleet quotas, held by one collector's id
// with a TTL and renewed by its holder only (a compare-and-renew
// script), so that with several collectors one acts.
type pilotLock struct {
	client *redis.Client
	key    string
	me     string
}

func newPilotLock(c *redis.Client, prefix, me string) *pilotLock {
	if prefix == "" {
		prefix = "{qtop-quota}:"
	}
	return &pilotLock{client: c, key: prefix + "autopilot-lock", me: me}
}

// holdScript renews the lock when ARGV[1] holds it, takes it when nobody
// does, and returns the holder.
var holdScript = redis.NewScript(`
local h = redis.call('GET', KEYS[1])
if h == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return h
end
if not h then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return ARGV[1]
end
return h`)

// hold takes or renews the lock and returns who holds it.
func (l *pilotLock) hold(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return holdScript.Run(ctx, l.client, []string{l.key}, l.me, pilotLockTTL.Milliseconds()).Text()
}

// pilotActionsTTL bounds how long the holder's actions outlive it in
// Redis: no action lasts more than a day (policy.MaxAutopilotSeconds).
const pilotActionsTTL = 24 * time.Hour

// put keeps the holder's saved state (savedPilot: its active actions,
// when its last action started, its recent decisions) beside the lock,
// so that the collector that takes over follows them to their lift
// (load) instead of leaving them to expire, and spaces its new actions
// from the holder's. The holder writes it when it changed (saveActions);
// the TTL outlasts an action's longest time from its last write.
func (l *pilotLock) put(ctx context.Context, b []byte) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return l.client.Set(ctx, l.key+"-actions", b, pilotActionsTTL).Err()
}

// load returns what the last holder saved (nothing when it saved
// nothing; an array of actions from a holder of before the spacing was
// kept).
func (l *pilotLock) load(ctx context.Context) (savedPilot, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	b, err := l.client.Get(ctx, l.key+"-actions").Bytes()
	var sp savedPilot
	if errors.Is(err, redis.Nil) {
		return sp, nil
	}
	if err == nil {
		err = json.Unmarshal(b, &sp)
	}
	return sp, err
}
