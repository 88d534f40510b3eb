package redisquota_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/quota"
	"github.com/qtop-dev/qtop/quota/redisquota"
)

// counter counts the commands a client sends (its round trips: the Script
// helper sends one command per call, two when the script was not loaded).
type counter struct{ n atomic.Int64 }

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.n.Add(1); return next(ctx, cmd) }
}
func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { c.n.Add(1); return next(ctx, cmds) }
}

func client(t *testing.T) (*redis.Client, *counter) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: testsvc.Redis(t)})
	t.Cleanup(func() { c.Close() })
	n := &counter{}
	c.AddHook(n)
	return c, n
}

// fakeClock is a clock the test moves by hand.
type fakeClock struct{ ms atomic.Int64 }

func (c *fakeClock) now() time.Time      { return time.UnixMilli(c.ms.Load()) }
func (c *fakeClock) add(d time.Duration) { c.ms.Add(d.Milliseconds()) }
func newClock() *fakeClock {
	c := &fakeClock{}
	c.ms.Store(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli())
	return c
}
func local(i int) map[string]quota.Rates {
	return map[string]quota.Rates{"bigco": {Demand: float64(100 * (i + 1)), Admitted: 50}, fmt.Sprint("only", i): {Demand: 1, Admitted: 1}}
}

// syncs returns n Syncs under a prefix of their own, each with its own
// client and round-trip counter, dated by clock (nil: the server's).
func syncs(t *testing.T, n int, clock *fakeClock) ([]*redisquota.Sync, []*counter) {
	t.Helper()
	ctx := context.Background()
	prefix := fmt.Sprintf("{qtop-quota-test-%d}:", rand.Uint64())
	var out []*redisquota.Sync
	var counters []*counter
	for i := range n {
		c, cnt := client(t)
		s, err := redisquota.New(c, fmt.Sprint("c", i), 300*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		s = s.WithPrefix(prefix)
		if clock != nil {
			s = s.WithClock(clock.now)
		}
		out = append(out, s)
		counters = append(counters, cnt)
	}
	t.Cleanup(func() {
		c, _ := client(t)
		keys, _ := c.Keys(ctx, prefix+"*").Result()
		if len(keys) > 0 {
			c.Del(ctx, keys...)
		}
	})
	return out, counters
}

// TestExchange: three collectors, each with its own client, see the sums
// of the two others in one round trip each, each with its exact age by
// the collectors' clock; a collector that stops exchanging drops out
// exactly after its TTL, and one that leaves at once.
func TestExchange(t *testing.T) {
	ctx := context.Background()
	clock := newClock()
	syncs, counters := syncs(t, 3, clock)
	for i, s := range syncs {
		if _, err := s.Exchange(ctx, local(i)); err != nil {
			t.Fatal(err)
		}
	}
	// 100 ms later each exchanges again, 10 ms apart: c0 sees c1 and c2
	// as of 100 ms ago, c1 sees c0 10 ms ago and c2 110 ms ago, ...
	clock.add(100 * time.Millisecond)
	for i, s := range syncs {
		if i > 0 {
			clock.add(10 * time.Millisecond)
		}
		before := counters[i].n.Load()
		got, err := s.Exchange(ctx, local(i))
		if err != nil {
			t.Fatal(err)
		}
		if n := counters[i].n.Load() - before; n != 1 {
			t.Errorf("collector %d: %d round trips for one exchange, want 1", i, n)
		}
		if len(got) != 2 {
			t.Fatalf("collector %d sees %d others, want 2", i, len(got))
		}
		sum := quota.Rates{}
		var ages []time.Duration
		for _, o := range got {
			if len(o.Rates) != 2 {
				t.Errorf("collector %d sees %+v: want two tenants", i, o)
			}
			if _, ok := o.Rates[fmt.Sprint("only", i)]; ok {
				t.Errorf("collector %d sees its own sums", i)
			}
			ages = append(ages, o.Age)
			sum.Demand += o.Rates["bigco"].Demand
			sum.Admitted += o.Rates["bigco"].Admitted
		}
		slices.Sort(ages)
		want := map[int][]time.Duration{0: {100 * time.Millisecond, 100 * time.Millisecond}, 1: {10 * time.Millisecond, 110 * time.Millisecond}, 2: {10 * time.Millisecond, 20 * time.Millisecond}}[i]
		if fmt.Sprint(ages) != fmt.Sprint(want) {
			t.Errorf("collector %d sees the others' ages %v, want %v", i, ages, want)
		}
		if want := 600.0 - float64(100*(i+1)); sum.Demand != want || sum.Admitted != 100 {
			t.Errorf("collector %d sees bigco %+v from the two others, want demand %v, admitted 100", i, sum, want)
		}
	}
	// c2 stops after its exchange at +120 ms; it counts until +420 ms
	// (its TTL of 300 ms), not after. c1 goes on.
	clock.add(299 * time.Millisecond) // +419 ms
	if _, err := syncs[1].Exchange(ctx, local(1)); err != nil {
		t.Fatal(err)
	}
	if got, err := syncs[0].Exchange(ctx, local(0)); err != nil || len(got) != 2 {
		t.Fatalf("1 ms before c2's TTL: %+v, %v; want two others", got, err)
	}
	clock.add(time.Millisecond)
	got, err := syncs[0].Exchange(ctx, local(0))
	if err != nil || len(got) != 1 || got[0].Rates["bigco"].Demand != 200 {
		t.Fatalf("at c2's TTL: %+v, %v; want c1's sums alone", got, err)
	}
	// c1 leaves: at once out of c0's sums.
	if err := syncs[1].Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := syncs[0].Exchange(ctx, local(0)); err != nil || len(got) != 0 {
		t.Fatalf("after c1 left: %+v, %v; want no other collector", got, err)
	}
}

// TestExchangeServerClock: without WithClock the server's clock dates the
// sums: the others are seen, with an age that is not negative.
func TestExchangeServerClock(t *testing.T) {
	ctx := context.Background()
	syncs, _ := syncs(t, 2, nil)
	if _, err := syncs[0].Exchange(ctx, local(0)); err != nil {
		t.Fatal(err)
	}
	got, err := syncs[1].Exchange(ctx, local(1))
	if err != nil || len(got) != 1 || got[0].Age < 0 || got[0].Rates["bigco"].Demand != 100 {
		t.Fatalf("c1 sees %+v, %v; want c0's sums", got, err)
	}
}

// TestExchangeRedisDown: an unreachable Redis is an error (the collector
// keeps its own sums), not a hang.
func TestExchangeRedisDown(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	s, _ := redisquota.New(c, "c0", time.Second)
	if _, err := s.Exchange(context.Background(), map[string]quota.Rates{"a": {}}); err == nil {
		t.Fatal("exchange with no Redis succeeded")
	}
	if _, err := redisquota.New(c, "", time.Second); err == nil {
		t.Fatal("empty id accepted")
	}
	if _, err := redisquota.New(c, "a{b}", time.Second); err == nil {
		t.Fatal("id with braces accepted")
	}
}

// TestDuplicateID: two collectors given one id (one --writer for every
// replica) would overwrite each other's sums and each count the fleet
// without the other, admitting twice the limit. Each exchange after their
// first fails on both with ErrDuplicateID, so that it is logged and
// counted; a collector restarted under its id (a new Sync, the old one
// gone) is not taken for a duplicate.
func TestDuplicateID(t *testing.T) {
	ctx := context.Background()
	pair, _ := syncs(t, 2, nil)
	prefix := fmt.Sprintf("{qtop-quota-test-%d}:", rand.Uint64())
	t.Cleanup(func() {
		c, _ := client(t)
		keys, _ := c.Keys(ctx, prefix+"*").Result()
		if len(keys) > 0 {
			c.Del(ctx, keys...)
		}
	})
	same := func() *redisquota.Sync {
		c, _ := client(t)
		s, err := redisquota.New(c, "c0", 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return s.WithPrefix(prefix)
	}
	a, b, other := same(), same(), pair[1].WithPrefix(prefix)
	for i, s := range []*redisquota.Sync{a, b, other} {
		if _, err := s.Exchange(ctx, local(i)); err != nil {
			t.Fatalf("first exchange of %d: %v", i, err)
		}
	}
	for round := range 2 {
		for i, s := range []*redisquota.Sync{a, b} {
			if _, err := s.Exchange(ctx, local(i)); !errors.Is(err, redisquota.ErrDuplicateID) {
				t.Fatalf("round %d, collector %d under a shared id: %v, want ErrDuplicateID", round, i, err)
			}
		}
	}
	got, err := other.Exchange(ctx, local(2))
	if err != nil || len(got) != 1 {
		t.Fatalf("a collector of its own id sees %d others (%v), want 1", len(got), err)
	}
	// b stops; a restarted collector under the id exchanges, and so on.
	restarted := same()
	for range 2 {
		if _, err := restarted.Exchange(ctx, local(0)); err != nil {
			t.Fatalf("a restarted collector: %v", err)
		}
	}
	if err := restarted.Leave(ctx); err != nil {
		t.Fatal(err)
	}
}
