package collector

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/qtop-dev/qtop/autopilot"
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

// save keeps the holder's active actions beside the lock, so that the
// collector that takes over follows them to their lift (load) instead of
// leaving them to expire.
func (l *pilotLock) save(ctx context.Context, acts []autopilot.Action) error {
	b, err := json.Marshal(acts)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return l.client.Set(ctx, l.key+"-actions", b, pilotActionsTTL).Err()
}

// load returns the actions the last holder saved (none when it saved
// none).
func (l *pilotLock) load(ctx context.Context) ([]autopilot.Action, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	b, err := l.client.Get(ctx, l.key+"-actions").Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var acts []autopilot.Action
	if err := json.Unmarshal(b, &acts); err != nil {
		return nil, err
	}
	return acts, nil
}
