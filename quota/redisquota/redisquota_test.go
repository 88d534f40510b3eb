package redisquota_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
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

// TestExchange: three collectors, each with its own client, see the sums
// of the two others in one round trip each, each with its age; a
// collector that stops exchanging drops out after its TTL, and one that
// leaves at once.
func TestExchange(t *testing.T) {
	ctx := context.Background()
	prefix := fmt.Sprintf("{qtop-quota-test-%d}:", rand.Uint64())
	var syncs []*redisquota.Sync
	var counters []*counter
	for i := range 3 {
		c, n := client(t)
		s, err := redisquota.New(c, fmt.Sprint("c", i), 300*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		syncs = append(syncs, s.WithPrefix(prefix))
		counters = append(counters, n)
	}
	t.Cleanup(func() {
		c, _ := client(t)
		keys, _ := c.Keys(ctx, prefix+"*").Result()
		if len(keys) > 0 {
			c.Del(ctx, keys...)
		}
	})
	local := func(i int) map[string]quota.Rates {
		return map[string]quota.Rates{"bigco": {Demand: float64(100 * (i + 1)), Admitted: 50}, fmt.Sprint("only", i): {Demand: 1, Admitted: 1}}
	}
	for i, s := range syncs {
		if _, err := s.Exchange(ctx, local(i)); err != nil {
			t.Fatal(err)
		}
	}
	for i, s := range syncs {
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
		for _, o := range got {
			if o.Age < 0 || o.Age > 5*time.Second || len(o.Rates) != 2 {
				t.Errorf("collector %d sees %+v: want an age of the last exchange and two tenants", i, o)
			}
			if _, ok := o.Rates[fmt.Sprint("only", i)]; ok {
				t.Errorf("collector %d sees its own sums", i)
			}
			sum.Demand += o.Rates["bigco"].Demand
			sum.Admitted += o.Rates["bigco"].Admitted
		}
		if want := 600.0 - float64(100*(i+1)); sum.Demand != want || sum.Admitted != 100 {
			t.Errorf("collector %d sees bigco %+v from the two others, want demand %v, admitted 100", i, sum, want)
		}
	}
	// c2 stops; after its TTL the others no longer count it.
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := syncs[0].Exchange(ctx, local(0))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 1 {
			if got[0].Rates["bigco"].Demand != 200 {
				t.Fatalf("after c2 expired: %+v", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("c2's sums never expired")
		}
		syncs[1].Exchange(ctx, local(1))
		time.Sleep(50 * time.Millisecond)
	}
	// c1 leaves: at once out of c0's sums.
	if err := syncs[1].Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := syncs[0].Exchange(ctx, local(0)); err != nil || len(got) != 0 {
		t.Fatalf("after c1 left: %+v, %v; want no other collector", got, err)
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
