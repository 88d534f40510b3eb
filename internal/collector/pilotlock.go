package collector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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
// script), so that with several collectors one acts. Beside it are the
// holder's saved state (put, load) and the cancels sent to the other
// collectors, for the holder (pass).
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

// holdScript renews the lock (KEYS[1]) when ARGV[1] holds it, takes it
// when nobody does, and returns the holder; to the holder, followed by
// "1" when it took the lock now ("0": renewed) and the cancels the
// fleet's other collectors passed to it (KEYS[2], a hash of action id →
// who sent the cancel) as field, value, …; to another collector,
// followed by the state the holder saved (KEYS[3]; "": none), which that
// one lists as the holder's.
var holdScript = redis.NewScript(`
local h = redis.call('GET', KEYS[1])
local took = '0'
if h == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
elseif not h then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  h, took = ARGV[1], '1'
else
  return {h, redis.call('GET', KEYS[3]) or ''}
end
local out = redis.call('HGETALL', KEYS[2])
table.insert(out, 1, h)
table.insert(out, 2, took)
return out`)

// pilotCancel is a cancel sent to a collector of the fleet that does not
// hold the lock, kept beside the lock for the one that does (pass).
type pilotCancel struct {
	ID string // the action's
	By string // who sent it: the credential, as the audit names it
}

// pilotHold is what hold found: who holds the lock; and when it is this
// collector, whether it took the lock now (from nobody: another may
// have held it since this one last did) and the cancels passed to it;
// when it is another, the state that one saved beside the lock (saved;
// nil: none, or unreadable).
type pilotHold struct {
	holder  string
	took    bool
	cancels []pilotCancel
	saved   *savedPilot
}

// hold takes or renews the lock (one round trip, the cancels with it).
func (l *pilotLock) hold(ctx context.Context) (pilotHold, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	out, err := holdScript.Run(ctx, l.client, []string{l.key, l.cancelsKey(), l.actionsKey()}, l.me, pilotLockTTL.Milliseconds()).StringSlice()
	if err == nil && (len(out) == 0 || out[0] == l.me && len(out)%2 != 0) {
		err = fmt.Errorf("the lock's script answered %d values", len(out))
	}
	if err != nil {
		return pilotHold{}, err
	}
	h := pilotHold{holder: out[0]}
	if h.holder != l.me {
		if len(out) > 1 && out[1] != "" {
			var sp savedPilot
			if json.Unmarshal([]byte(out[1]), &sp) == nil {
				h.saved = &sp
			}
		}
		return h, nil
	}
	h.took = out[1] == "1"
	for i := 2; i+1 < len(out); i += 2 {
		h.cancels = append(h.cancels, pilotCancel{ID: out[i], By: out[i+1]})
	}
	return h, nil
}

// releaseScript deletes the lock (KEYS[1]) when ARGV[1] holds it.
var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`)

// release lets the lock go if this collector holds it, at its stop: the
// next collector takes it at its next step rather than when the key runs
// out (pilotLockTTL). What it saved beside the lock stays for that one.
func (l *pilotLock) release(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return releaseScript.Run(ctx, l.client, []string{l.key}, l.me).Err()
}

// holder returns who holds the lock ("": nobody), without taking it.
func (l *pilotLock) holder(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	h, err := l.client.Get(ctx, l.key).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return h, err
}

func (l *pilotLock) cancelsKey() string { return l.key + "-cancels" }
func (l *pilotLock) actionsKey() string { return l.key + "-actions" }

// pass passes c, a cancel sent to this collector, which does not hold
// the lock, to the one that does (holder; "": none now): kept beside the
// lock, it is carried out at the holder's next step (its hold returns
// it), or at the first step of the next holder, and cleared then (done).
// It lasts as long as the saved actions do. The action must be one the
// holder saved (load). pass returns what the answer says of it.
func (l *pilotLock) pass(ctx context.Context, c pilotCancel, holder string) (string, error) {
	sp, err := l.load(ctx)
	if err != nil {
		return "", fmt.Errorf("%w (%v): send the cancel again", errPilotRedis, err)
	}
	if !slices.ContainsFunc(sp.Actions, func(a autopilot.Action) bool { return a.ID == c.ID }) {
		where := "no collector holds the autopilot's lock now, and the fleet's autopilot has no active action"
		if holder != "" {
			where = "GET /v1/autopilot on collector " + holder + ", which holds the autopilot's lock, lists the active actions"
		}
		return "", fmt.Errorf("%w: %q (%s)", autopilot.ErrUnknown, c.ID, where)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := l.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, l.cancelsKey(), c.ID, c.By)
		p.PExpire(ctx, l.cancelsKey(), pilotActionsTTL)
		return nil
	}); err != nil {
		return "", fmt.Errorf("%w (%v): send the cancel again", errPilotRedis, err)
	}
	if holder == "" {
		return "no collector holds the autopilot's lock now: the next to take it ends action " + c.ID + " at its first step", nil
	}
	return "passed to collector " + holder + ", which holds the autopilot's lock: it ends action " + c.ID + " at its next step (within a second)", nil
}

// done clears the cancels of ids, carried out.
func (l *pilotLock) done(ctx context.Context, ids []string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return l.client.HDel(ctx, l.cancelsKey(), ids...).Err()
}

// pilotActionsTTL bounds how long the holder's actions outlive it in
// Redis: no action lasts more than a day (policy.MaxAutopilotSeconds).
const pilotActionsTTL = 24 * time.Hour

// put keeps the holder's saved state (savedPilot: its active actions,
// when its last action started, the tenants its cancels spare, its
// recent decisions) beside the lock,
// so that the collector that takes over follows them to their lift
// (load) instead of leaving them to expire, and spaces its new actions
// from the holder's. The holder writes it when it changed (saveActions);
// the TTL outlasts an action's longest time from its last write.
func (l *pilotLock) put(ctx context.Context, b []byte) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return l.client.Set(ctx, l.actionsKey(), b, pilotActionsTTL).Err()
}

// load returns what the last holder saved (nothing when it saved
// nothing; an array of actions from a holder of before the spacing was
// kept).
func (l *pilotLock) load(ctx context.Context) (savedPilot, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	b, err := l.client.Get(ctx, l.actionsKey()).Bytes()
	var sp savedPilot
	if errors.Is(err, redis.Nil) {
		return sp, nil
	}
	if err == nil {
		err = json.Unmarshal(b, &sp)
	}
	return sp, err
}
