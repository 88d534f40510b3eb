package lease_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/qtop-dev/qtop/fairqueue"
	"github.com/qtop-dev/qtop/internal/testsvc"
	"github.com/qtop-dev/qtop/quota/lease"
)

var _ fairqueue.Limiter = (*lease.Semaphore)(nil)

func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) != "" {
		os.Exit(workerMain())
	}
	goleak.VerifyTestMain(m)
}

func newClient(t *testing.T) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: testsvc.Redis(t)})
	t.Cleanup(func() { c.Close() })
	return c
}

// prefix gives a test keys of its own on the shared server and deletes
// them when it ends.
func prefix(t *testing.T) string {
	t.Helper()
	p := fmt.Sprintf("qtop-lease-test-%d:", rand.Uint64())
	c := newClient(t)
	t.Cleanup(func() {
		keys, _ := c.Keys(context.Background(), p+"*").Result()
		if len(keys) > 0 {
			c.Del(context.Background(), keys...)
		}
	})
	return p
}

func limitOf(n int) func(string) int { return func(string) int { return n } }

// TestAcquireRelease: two processes' semaphores share a tenant's limit.
func TestAcquireRelease(t *testing.T) {
	p := prefix(t)
	ctx := context.Background()
	a, err := lease.New(newClient(t), limitOf(2), lease.WithPrefix(p))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := lease.New(newClient(t), limitOf(2), lease.WithPrefix(p))
	if ok, _ := a.Acquire(ctx, "bigco"); !ok {
		t.Fatal("first acquire refused")
	}
	if ok, _ := b.Acquire(ctx, "bigco"); !ok {
		t.Fatal("second acquire refused")
	}
	ok, retry := a.Acquire(ctx, "bigco")
	if ok || retry <= 0 {
		t.Fatalf("third acquire: %v, retry %v; want refused with a delay", ok, retry)
	}
	if ok, _ := a.Acquire(ctx, "shop-a"); !ok {
		t.Fatal("another tenant was refused")
	}
	b.Release("bigco")
	if ok, _ := a.Acquire(ctx, "bigco"); !ok {
		t.Fatal("refused after a release")
	}
	if a.Held("bigco") != 2 || b.Held("bigco") != 0 {
		t.Fatalf("held %d and %d", a.Held("bigco"), b.Held("bigco"))
	}
	a.Release("bigco")
	a.Release("bigco")
	a.Release("bigco") // one too many: ignored
	a.Release("shop-a")
	if n, _ := newClient(t).ZCard(ctx, a.Key("bigco")).Result(); n != 0 {
		t.Fatalf("%d leases left after every release", n)
	}
	// Calls per job: one acquire and one release.
	if st := a.Stats(); st.Acquired != 3 || st.Refused != 1 || st.RedisCalls != 4+3 {
		t.Fatalf("stats %+v", st)
	}
	if ok, _ := a.Acquire(ctx, "free"); !ok {
		t.Fatal("a tenant without a limit was refused")
	}
	for _, o := range [][]lease.Option{{lease.WithTTL(time.Millisecond)}, {lease.WithTTL(time.Second), lease.WithHeartbeat(time.Second)},
		{lease.WithRetry(0, 1)}, {lease.WithTimeout(0)}} {
		if _, err := lease.New(newClient(t), limitOf(1), o...); err == nil {
			t.Fatal("bad option accepted")
		}
	}
}

// TestHeartbeatAndExpiry: a held lease outlives its TTL while the
// heartbeat runs; a process that stops renewing loses its leases exactly
// after the TTL, and others may take the slots. On fake time (a synctest
// bubble, the leases dated by its clock), so a busy machine changes
// nothing.
func TestHeartbeatAndExpiry(t *testing.T) {
	p := prefix(t)
	addr := testsvc.Redis(t)
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		const ttl = 900 * time.Millisecond
		sem := func() *lease.Semaphore {
			c := redis.NewClient(&redis.Options{Addr: addr})
			t.Cleanup(func() { c.Close() })
			s, err := lease.New(c, limitOf(1), lease.WithPrefix(p), lease.WithTTL(ttl), lease.WithClock(time.Now))
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		live := sem()
		live.Start()
		defer live.Shutdown(ctx)
		if ok, _ := live.Acquire(ctx, "a"); !ok {
			t.Fatal("refused")
		}
		other := sem()
		time.Sleep(2 * ttl) // six heartbeats
		if ok, _ := other.Acquire(ctx, "a"); ok {
			t.Fatal("a renewed lease was taken over")
		}
		if live.Stats().Lost != 0 {
			t.Fatalf("lost %d", live.Stats().Lost)
		}
		// A semaphore without heartbeat (a worker that crashed) loses its
		// lease at its TTL, not before.
		dead := sem()
		if ok, _ := dead.Acquire(ctx, "b"); !ok {
			t.Fatal("refused")
		}
		time.Sleep(ttl - time.Millisecond)
		if ok, _ := other.Acquire(ctx, "b"); ok {
			t.Fatal("an unrenewed lease expired before its TTL")
		}
		time.Sleep(time.Millisecond)
		if ok, _ := other.Acquire(ctx, "b"); !ok {
			t.Fatal("an unrenewed lease did not expire at its TTL")
		}
		other.Release("b")
		if err := live.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		if live.Held("a") != 0 {
			t.Fatal("Shutdown left a lease held")
		}
	})
}

// TestRedisDown: with Redis unreachable, each process falls back to its
// own cap, counts it, and loses no job.
func TestRedisDown(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	defer c.Close()
	s, _ := lease.New(c, limitOf(4), lease.WithFallback(limitOf(2)))
	ctx := context.Background()
	for i := range 2 {
		if ok, _ := s.Acquire(ctx, "bigco"); !ok {
			t.Fatalf("fallback acquire %d refused", i)
		}
	}
	if ok, retry := s.Acquire(ctx, "bigco"); ok || retry <= 0 {
		t.Fatal("fallback cap of 2 not applied")
	}
	s.Release("bigco")
	if ok, _ := s.Acquire(ctx, "bigco"); !ok {
		t.Fatal("refused after a fallback release")
	}
	if st := s.Stats(); st.Fallback != 3 || st.RedisCalls != 1 {
		t.Fatalf("stats %+v: want 3 fallback grants and Redis tried once (then paused)", st)
	}
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

// timed wraps a Limiter to measure acquire latency and count refusals
// per tenant.
type timed struct {
	l       fairqueue.Limiter
	mu      sync.Mutex
	lat     []time.Duration
	refused map[string]int
}

func (t *timed) Acquire(ctx context.Context, tenant string) (bool, time.Duration) {
	t0 := time.Now()
	ok, d := t.l.Acquire(ctx, tenant)
	t.mu.Lock()
	t.lat = append(t.lat, time.Since(t0))
	if !ok {
		t.refused[tenant]++
	}
	t.mu.Unlock()
	return ok, d
}
func (t *timed) Release(tenant string) { t.l.Release(tenant) }

// TestSeedRun is seed 003's run on the real Redis: three workers with
// their own Redis clients, each given 10 bigco jobs and 1 shop-a job,
// limit 4 per tenant. bigco's concurrency, counted at each job's start,
// reaches 4 and never exceeds it, and shop-a is never refused. The first
// bigco jobs run until bigco is at its limit, so the limit is reached
// whatever the machine's speed, not by jobs long enough to overlap.
func TestSeedRun(t *testing.T) {
	p := prefix(t)
	var running, peak atomic.Int64
	startBigco := func() {
		n := running.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
	}
	var wg sync.WaitGroup
	var sems []*lease.Semaphore
	var timers []*timed
	for w := range 3 {
		sem, err := lease.New(newClient(t), limitOf(4), lease.WithPrefix(p), lease.WithTTL(2*time.Second), lease.WithTimeout(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		sem.Start()
		tl := &timed{l: sem, refused: map[string]int{}}
		sems, timers = append(sems, sem), append(timers, tl)
		q, _ := fairqueue.New[int](fairqueue.WithLimiter(tl))
		for i := range 10 {
			q.Push(context.Background(), "bigco", i)
		}
		q.Push(context.Background(), "shop-a", 0)
		q.Close()
		for range 5 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					it, err := q.PopWait(context.Background())
					if err != nil {
						return
					}
					if it.Tenant == "bigco" {
						startBigco()
						if !testsvc.Poll(10*time.Second, func() bool { return peak.Load() >= 4 }) {
							t.Error("bigco never ran 4 jobs at once")
						}
						running.Add(-1)
					}
					q.Done(it.Tenant)
				}
			}()
		}
		_ = w
	}
	wg.Wait()
	var lat []time.Duration
	var calls uint64
	for i, s := range sems {
		s.Shutdown(context.Background())
		calls += s.Stats().RedisCalls
		lat = append(lat, timers[i].lat...)
		if n := s.Stats().Fallback; n > 0 {
			t.Errorf("worker %d: %d leases granted by the per-process fallback (Redis too slow)", i, n)
		}
		if n := timers[i].refused["shop-a"]; n > 0 {
			t.Errorf("worker %d: shop-a refused %d times (held back by bigco)", i, n)
		}
	}
	if peak.Load() > 4 {
		t.Fatalf("bigco ran %d jobs at once, limit 4", peak.Load())
	}
	if peak.Load() < 4 {
		t.Errorf("bigco never reached its limit of 4 (peak %d)", peak.Load())
	}
	slices.Sort(lat)
	t.Logf("33 jobs, bigco peak %d; acquire p50 %v p99 %v over %d acquires; %.2f Redis round trips per job",
		peak.Load(), lat[len(lat)/2], lat[len(lat)*99/100], len(lat), float64(calls)/33)
}

// liveLeases counts a key's unexpired leases by the server's clock, and
// returns that clock in ms.
var liveLeases = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return {now, redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')}
`)

// TestSeedRunKill: the same run with three worker processes, one of them
// SIGKILLed mid-job: its leases expire within the TTL, the fleet returns
// to 4 bigco jobs at once, and the two others finish every job.
func TestSeedRunKill(t *testing.T) {
	addr := testsvc.Redis(t)
	p := prefix(t)
	c := newClient(t)
	ctx := context.Background()
	const ttl = 600 * time.Millisecond
	const jobs = 100 // enough left after the TTL for the fleet to get back to 4, on a busy machine and on a quick one (40 ran out one run in 16 on a quiet machine)
	type worker struct {
		cmd      *exec.Cmd
		owner    chan string
		done     chan int
		fallback chan int
		start    chan struct{} // a bigco start, given only to a receiver waiting at the time
	}
	var ws []*worker
	for i := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), workerEnv+"=1", workerRedis+"="+addr, workerPrefix+"="+p,
			workerJobs+"="+strconv.Itoa(jobs), workerTTL+"="+ttl.String())
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		w := &worker{cmd: cmd, owner: make(chan string, 1), done: make(chan int, 1), fallback: make(chan int, 1), start: make(chan struct{})}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				f := strings.Fields(sc.Text())
				switch {
				case len(f) == 2 && f[0] == "owner":
					w.owner <- f[1]
				case len(f) == 2 && f[0] == "start" && f[1] == "bigco":
					select { // only a start that happens while the test waits for one
					case w.start <- struct{}{}:
					default:
					}
				case len(f) == 2 && f[0] == "done":
					n, _ := strconv.Atoi(f[1])
					w.done <- n
				case len(f) == 2 && f[0] == "fallback":
					n, _ := strconv.Atoi(f[1])
					w.fallback <- n
				}
			}
			close(w.done)
		}()
		_ = i
	}
	t.Cleanup(func() {
		for _, w := range ws {
			w.cmd.Process.Kill()
			w.cmd.Wait()
		}
	})
	owners := make([]string, 3)
	for i, w := range ws {
		select {
		case owners[i] = <-w.owner:
		case <-time.After(30 * time.Second):
			t.Fatalf("worker %d did not start", i)
		}
	}
	type sample struct{ ms, n int64 }
	var samples []sample
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tk := time.NewTicker(time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				if v, err := liveLeases.Run(ctx, c, []string{p + "bigco"}).Int64Slice(); err == nil && len(v) == 2 {
					samples = append(samples, sample{v[0], v[1]})
				}
			}
		}
	}()
	// Kill worker 0 at its second bigco start seen while waiting: it holds
	// a lease mid-job. (Starts made before the wait are not kept: with them
	// queued the kill could come long after the start it answered, on a
	// machine quick enough for the worker to be between jobs.)
	for range 2 {
		select {
		case <-ws[0].start:
		case <-time.After(30 * time.Second):
			t.Fatal("worker 0 never started a bigco job")
		}
	}
	if err := ws[0].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	ws[0].cmd.Wait()
	killAt, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	killMs := killAt.UnixMilli()
	members, err := c.ZRangeWithScores(ctx, p+"bigco", 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	var deadEnd int64
	dead := 0
	for _, m := range members {
		if id, _ := m.Member.(string); strings.HasPrefix(id, owners[0]+":") {
			dead++
			deadEnd = max(deadEnd, int64(m.Score))
			if int64(m.Score) > killMs+ttl.Milliseconds() {
				t.Errorf("a lease of the killed worker lives until %d ms, %d ms after the kill (TTL %v)", int64(m.Score), int64(m.Score)-killMs, ttl)
			}
		}
	}
	if dead == 0 {
		t.Fatal("the killed worker held no lease mid-job")
	}
	for i, w := range ws[1:] {
		select {
		case n := <-w.done:
			if n != jobs+1 {
				t.Errorf("worker %d finished %d jobs of %d", i+1, n, jobs+1)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("worker %d did not finish", i+1)
		}
		select {
		case n := <-w.fallback:
			if n > 0 {
				t.Errorf("worker %d: %d leases granted by the per-process fallback (Redis too slow); the run does not show the fleet-wide limit", i+1, n)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("worker %d did not say how many fallback grants it made", i+1)
		}
	}
	close(stop)
	<-sampled
	peak, back := int64(0), false
	for _, s := range samples {
		peak = max(peak, s.n)
		if s.ms > deadEnd && s.n == 4 {
			back = true
		}
	}
	if peak > 4 {
		t.Errorf("the fleet held %d bigco leases at once, limit 4", peak)
	}
	if !back {
		t.Errorf("the fleet never returned to 4 bigco jobs after the killed worker's leases expired (at %d ms, kill at %d ms)", deadEnd, killMs)
	}
	t.Logf("killed worker held %d leases; the last expired %d ms after the kill (TTL %v); %d samples, peak %d, back to 4: %v",
		dead, deadEnd-killMs, ttl, len(samples), peak, back)
}

// BenchmarkAcquireRelease is one job's lease on the real Redis: an
// acquire and a release, two round trips.
func BenchmarkAcquireRelease(b *testing.B) {
	c := redis.NewClient(&redis.Options{Addr: testsvc.Redis(b)})
	defer c.Close()
	p := fmt.Sprintf("qtop-lease-bench-%d:", rand.Uint64())
	defer c.Del(context.Background(), p+"bigco")
	s, err := lease.New(c, limitOf(4), lease.WithPrefix(p))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if ok, _ := s.Acquire(ctx, "bigco"); !ok {
			b.Fatal("refused")
		}
		s.Release("bigco")
	}
}
