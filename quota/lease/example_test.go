package lease_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/qtop-dev/qtop/fairqueue"
	"github.com/qtop-dev/qtop/quota/lease"
)

// A worker pool limited to 2 of a tenant's jobs at once across every
// worker. This Redis is unreachable (nothing listens on port 1), so the
// semaphore falls back to its per-process cap, says so in its counters,
// and still runs every job.
func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	defer rdb.Close()
	sem, _ := lease.New(rdb, func(string) int { return 2 })
	sem.Start()
	defer sem.Shutdown(context.Background())

	q, _ := fairqueue.New[string](fairqueue.WithLimiter(sem))
	for _, job := range []string{"import-1", "import-2", "import-3"} {
		q.Push(context.Background(), "bigco", job)
	}
	q.Close()
	ctx := context.Background()
	var running []string
	for range 2 {
		it, _ := q.PopWait(ctx)
		running = append(running, it.Value)
	}
	fmt.Println("running:", running, "waiting:", q.Len())
	q.Done("bigco") // import-1 finished: its slot goes to import-3
	it, _ := q.PopWait(ctx)
	fmt.Println("then:", it.Value)
	q.Done("bigco")
	q.Done("bigco")
	st := sem.Stats()
	fmt.Println("granted by the per-process cap:", st.Fallback, "refused:", st.Refused)
	// Output:
	// running: [import-1 import-2] waiting: 1
	// then: import-3
	// granted by the per-process cap: 3 refused: 0
}
