package testsvc_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/qtop-dev/qtop/internal/testsvc"
)

// TestRedisRoundTrip proves the plumbing: the address from
// scripts/services reaches a real Redis that runs Lua scripts.
func TestRedisRoundTrip(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: testsvc.Redis(t)})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	key := fmt.Sprintf("qtop-testsvc-%d", rand.Uint64())
	defer c.Del(context.Background(), key)
	n, err := redis.NewScript(`return redis.call('INCRBY', KEYS[1], ARGV[1])`).Run(ctx, c, []string{key}, 42).Int()
	if err != nil || n != 42 {
		t.Fatalf("script: %d, %v", n, err)
	}
}
