package lease_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/quota/lease"
)

// TestRenewPutsBackLostLeases: leases whose key Redis lost while their
// jobs run (evicted, a FLUSHDB, a restart without persistence) are put
// back by the next heartbeat, so the tenant's limit holds across the
// fleet again, and each is counted lost once, not at every heartbeat
// after. On fake time, the leases dated by the bubble's clock.
func TestRenewPutsBackLostLeases(t *testing.T) {
	p := prefix(t)
	addr := testsvc.Redis(t)
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		const ttl = 900 * time.Millisecond // heartbeat every 300 ms
		sem := func() *lease.Semaphore {
			c := redis.NewClient(&redis.Options{Addr: addr})
			t.Cleanup(func() { c.Close() })
			s, err := lease.New(c, limitOf(2), lease.WithPrefix(p), lease.WithTTL(ttl), lease.WithClock(time.Now))
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		live, other := sem(), sem()
		live.Start()
		defer live.Shutdown(ctx)
		for range 2 {
			if ok, _ := live.Acquire(ctx, "bigco"); !ok {
				t.Fatal("refused below the limit")
			}
		}
		admin := redis.NewClient(&redis.Options{Addr: addr})
		defer admin.Close()
		if err := admin.Del(ctx, live.Key("bigco")).Err(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(ttl/3 + time.Millisecond) // one heartbeat
		if n, err := admin.ZCard(ctx, live.Key("bigco")).Result(); err != nil || n != 2 {
			t.Fatalf("%d leases in Redis after a heartbeat (%v), want the 2 running jobs' put back", n, err)
		}
		if ok, _ := other.Acquire(ctx, "bigco"); ok {
			t.Fatal("a third job of a tenant limited to 2 was let run")
		}
		time.Sleep(ttl) // three more heartbeats
		if st := live.Stats(); st.Lost != 2 {
			t.Fatalf("lost %d, want each of the 2 leases counted once", st.Lost)
		}
		if err := live.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		if n, _ := admin.ZCard(ctx, live.Key("bigco")).Result(); n != 0 {
			t.Fatalf("%d leases left after Shutdown", n)
		}
	})
}

// hooked runs a function once, before the first renewal script it sends.
type hooked struct {
	*redis.Client
	mu      sync.Mutex
	onRenew func()
}

func (h *hooked) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	if _, ttl := args[0].(int64); ttl && len(args) >= 4 { // the renewal's ARGV: ttl, clock, grace, ids
		h.mu.Lock()
		f := h.onRenew
		h.onRenew = nil
		h.mu.Unlock()
		if f != nil {
			f()
		}
	}
	return h.Client.EvalSha(ctx, sha, keys, args...)
}

// TestRenewRacingRelease: a lease released while a heartbeat is renewing
// it (the job ended between the heartbeat's list of leases and its round
// trip) is neither counted lost nor left in Redis.
func TestRenewRacingRelease(t *testing.T) {
	p := prefix(t)
	addr := testsvc.Redis(t)
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		const ttl = 900 * time.Millisecond
		h := &hooked{Client: redis.NewClient(&redis.Options{Addr: addr})}
		defer h.Close()
		s, err := lease.New(h, limitOf(2), lease.WithPrefix(p), lease.WithTTL(ttl), lease.WithClock(time.Now))
		if err != nil {
			t.Fatal(err)
		}
		h.onRenew = func() { s.Release("bigco") }
		s.Start()
		defer s.Shutdown(ctx)
		if ok, _ := s.Acquire(ctx, "bigco"); !ok {
			t.Fatal("refused")
		}
		time.Sleep(ttl/3 + time.Millisecond) // one heartbeat, racing the release
		admin := redis.NewClient(&redis.Options{Addr: addr})
		defer admin.Close()
		if n, _ := admin.ZCard(ctx, s.Key("bigco")).Result(); n != 0 {
			t.Fatalf("%d leases in Redis after their release, want 0", n)
		}
		if st := s.Stats(); st.Lost != 0 {
			t.Fatalf("lost %d: a released lease counted as lost", st.Lost)
		}
	})
}

// fakeRedis answers like Redis would not: the first scripts with a grant
// ([1, 1, 0]), every later one with an array of eight zeros, longer than
// any renewal of this test. It is stopped when the test ends.
func fakeRedis(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	var scripts atomic.Int64
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	serve := func(c net.Conn) {
		defer wg.Done()
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "*")))
			var cmd string
			for i := range n {
				r.ReadString('\n') // $len
				arg, _ := r.ReadString('\n')
				if i == 0 {
					cmd = strings.ToUpper(strings.TrimSpace(arg))
				}
			}
			switch {
			case cmd == "HELLO":
				fmt.Fprint(c, "-ERR unknown command 'HELLO'\r\n")
			case strings.HasPrefix(cmd, "EVAL") && scripts.Add(1) == 1:
				fmt.Fprint(c, "*3\r\n:1\r\n:1\r\n:0\r\n")
			case strings.HasPrefix(cmd, "EVAL"):
				fmt.Fprint(c, "*8\r\n"+strings.Repeat(":0\r\n", 8))
			default:
				fmt.Fprint(c, "+OK\r\n")
			}
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go serve(c)
		}
	}()
	return l.Addr().String()
}

// TestRenewAnswerNotRedis: a renewal answered with more results than
// leases (a proxy or a server that is not Redis) is a failed Redis call:
// the process goes on with its per-process caps, and its heartbeat does
// not index past its leases (which took the worker process down).
func TestRenewAnswerNotRedis(t *testing.T) {
	addr := fakeRedis(t) // outside the bubble: its goroutines wait on the network
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		const ttl = 900 * time.Millisecond
		c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2})
		defer c.Close()
		s, err := lease.New(c, limitOf(4), lease.WithTTL(ttl), lease.WithClock(time.Now))
		if err != nil {
			t.Fatal(err)
		}
		s.Start()
		defer s.Shutdown(ctx)
		if ok, _ := s.Acquire(ctx, "bigco"); !ok {
			t.Fatal("refused")
		}
		time.Sleep(ttl/3 + time.Millisecond) // one heartbeat
		if ok, _ := s.Acquire(ctx, "bigco"); !ok {
			t.Fatal("refused by the fallback cap")
		}
		if st := s.Stats(); st.Fallback != 1 || st.Lost != 0 {
			t.Fatalf("stats %+v: want the renewal taken as Redis failing (the next acquire by the fallback cap), no lease lost", st)
		}
	})
}

// TestReleaseErrorsExported: releases whose Redis call failed are
// exported, not only in Stats.
func TestReleaseErrorsExported(t *testing.T) {
	p := prefix(t)
	c := newClient(t)
	reg := prometheus.NewPedanticRegistry()
	s, err := lease.New(c, limitOf(2), lease.WithPrefix(p), lease.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if ok, _ := s.Acquire(ctx, "bigco"); !ok {
		t.Fatal("refused")
	}
	c.Close() // the release's call fails
	s.Release("bigco")
	if st := s.Stats(); st.ReleaseErrors != 1 {
		t.Fatalf("stats %+v, want one release error", st)
	}
	want := `# HELP qtop_lease_release_errors_total Releases whose Redis call failed or timed out, and late grants not given back: leases that may be left to their TTL.
# TYPE qtop_lease_release_errors_total counter
qtop_lease_release_errors_total 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "qtop_lease_release_errors_total"); err != nil {
		t.Fatal(err)
	}
	if probs, err := testutil.GatherAndLint(reg); err != nil || len(probs) > 0 {
		t.Fatalf("lint: %v %v", probs, err)
	}
}
