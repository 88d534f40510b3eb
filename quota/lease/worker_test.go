package lease_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/qtop-dev/qtop/fairqueue"
	"github.com/qtop-dev/qtop/quota/lease"
)

// The worker process of TestSeedRunKill: the test binary run again with
// these variables set.
const (
	workerEnv    = "QTOP_LEASE_WORKER"
	workerRedis  = "QTOP_LEASE_WORKER_REDIS"
	workerPrefix = "QTOP_LEASE_WORKER_PREFIX"
	workerJobs   = "QTOP_LEASE_WORKER_JOBS"
	workerTTL    = "QTOP_LEASE_WORKER_TTL"
)

// workerMain runs the jobs and prints "owner ID", then "start TENANT" and
// "end TENANT" for every job, then "done N".
func workerMain() int {
	jobs, _ := strconv.Atoi(os.Getenv(workerJobs))
	ttl, _ := time.ParseDuration(os.Getenv(workerTTL))
	c := redis.NewClient(&redis.Options{Addr: os.Getenv(workerRedis)})
	defer c.Close()
	sem, err := lease.New(c, func(string) int { return 4 }, lease.WithPrefix(os.Getenv(workerPrefix)), lease.WithTTL(ttl),
		lease.WithTimeout(2*time.Second)) // a slow call on a busy machine is not an outage
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	sem.Start()
	defer sem.Shutdown(context.Background())
	var out sync.Mutex
	say := func(f string, a ...any) { out.Lock(); fmt.Printf(f+"\n", a...); out.Unlock() }
	say("owner %s", sem.Owner())
	q, _ := fairqueue.New[int](fairqueue.WithLimiter(sem))
	for i := range jobs {
		q.Push(context.Background(), "bigco", i)
	}
	q.Push(context.Background(), "shop-a", 0)
	q.Close()
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				it, err := q.PopWait(context.Background())
				if err != nil {
					return
				}
				say("start %s", it.Tenant)
				time.Sleep(40 * time.Millisecond)
				say("end %s", it.Tenant)
				q.Done(it.Tenant)
				mu.Lock()
				done++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	say("done %d", done)
	say("fallback %d", sem.Stats().Fallback)
	return 0
}
