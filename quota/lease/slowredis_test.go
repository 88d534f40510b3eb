package lease_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/quota/lease"
)

// privateRedis starts a Redis server of the test's own (the shared one
// must not be stalled) and returns its address; it is stopped when the
// test ends.
func privateRedis(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if testsvc.Required() {
			t.Fatalf("redis-server is required here: %v", err)
		}
		t.Skipf("redis-server not installed: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir := t.TempDir()
	cmd := exec.Command(bin, "--bind", "127.0.0.1", "--port", fmt.Sprint(port), "--save", "", "--appendonly", "no",
		"--dir", dir, "--logfile", filepath.Join(dir, "redis.log"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	if !testsvc.Poll(10*time.Second, func() bool { return c.Ping(context.Background()).Err() == nil }) {
		log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
		t.Fatalf("private redis on %s did not start: %s", addr, log)
	}
	return addr
}

// A stalled Redis (CLIENT PAUSE: every command waits, as under DEBUG
// SLEEP) holds neither Acquire nor Release beyond the Semaphore's timeout,
// with a go-redis client that has no read timeout and ignores contexts'
// deadlines (ContextTimeoutEnabled unset): Acquire grants by the fallback
// cap, Release leaves its lease to be removed when Redis answers. Without
// the Semaphore's own bound both calls would wait for the pause to end and
// Acquire would be granted by Redis. When Redis answers, the lease
// granted too late is given back and the released one removed: no lease
// is left behind. Both ways Redis may answer the late release are run:
// with the release script cached (the late EVALSHA removes the lease),
// and without (a fresh or flushed Redis: the late EVALSHA is answered
// NOSCRIPT, and go-redis does not send the EVAL fallback on the call's
// ended context, so the Semaphore releases again).
func TestSlowRedisBoundedByTimeout(t *testing.T) {
	addr := privateRedis(t)
	for _, cached := range []bool{true, false} {
		t.Run(fmt.Sprintf("release script cached=%v", cached), func(t *testing.T) {
			slowRedisRelease(t, addr, cached)
		})
	}
}

func slowRedisRelease(t *testing.T, addr string, cached bool) {
	c := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: -1, WriteTimeout: -1, PoolSize: 4})
	defer c.Close()
	admin := redis.NewClient(&redis.Options{Addr: addr})
	defer admin.Close()
	s, err := lease.New(c, limitOf(4), lease.WithPrefix(fmt.Sprintf("slow:%v:", cached)), lease.WithTimeout(250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := admin.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if cached { // an acquire and a release on a quick Redis load both scripts
		if ok, _ := s.Acquire(ctx, "bigco"); !ok {
			t.Fatal("acquire on a quick Redis refused")
		}
		s.Release("bigco")
	}
	if ok, _ := s.Acquire(ctx, "bigco"); !ok {
		t.Fatal("acquire on a quick Redis refused")
	}
	const pause = 5 * time.Second
	if err := admin.Do(ctx, "CLIENT", "PAUSE", pause.Milliseconds(), "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	ok, _ := s.Acquire(ctx, "bigco")
	acq := time.Since(t0)
	t1 := time.Now()
	s.Release("bigco") // the fallback grant: no Redis call
	s.Release("bigco") // the Redis lease: bounded by the timeout
	rel := time.Since(t1)
	st := s.Stats()
	if !ok || st.Fallback != 1 || st.ReleaseErrors != 1 {
		t.Fatalf("on a paused Redis: acquire %v, stats %+v; want a fallback grant and a release left to Redis", ok, st)
	}
	t.Logf("paused Redis (%v): Acquire returned in %v, Release in %v (timeout 250ms)", pause, acq, rel)
	if err := s.Shutdown(ctx); err != nil { // waits for the late calls
		t.Fatal(err)
	}
	n, err := admin.ZCard(ctx, s.Key("bigco")).Result()
	if err != nil || n != 0 {
		t.Fatalf("%d leases left in Redis (%v), want 0", n, err)
	}
}
