package lease

import (
	"context"
	"fmt"
	"sync"
)

// call runs fn within the Semaphore's timeout (WithTimeout), whatever the
// client's own timeouts: go-redis honours a context's deadline only when
// the client sets ContextTimeoutEnabled, so with the client most programs
// pass, a Redis stalled by DEBUG SLEEP or a long script would hold the
// caller for the client's read timeout, or for ever without one. fn runs
// in a goroutine of its own with a context that ends at the timeout; the
// caller returns at the timeout with an error, and late, when not nil,
// gets fn's result whenever it comes (so a lease granted too late is
// given back, and a release answered late with an error is done again,
// rather than left to its TTL). Shutdown waits for such calls.
func (s *Semaphore) call(ctx context.Context, fn func(context.Context) ([]int64, error), late func([]int64, error)) ([]int64, error) {
	cctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	type result struct {
		v   []int64
		err error
	}
	ch := make(chan result, 1)
	var mu sync.Mutex
	settled := false // the result was taken, or the caller went on
	s.calls.Add(1)
	go func() {
		defer s.calls.Done()
		defer cancel()
		v, err := fn(cctx)
		mu.Lock()
		if settled {
			mu.Unlock()
			if late != nil {
				late(v, err)
			}
			return
		}
		settled = true
		ch <- result{v, err}
		mu.Unlock()
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-cctx.Done():
	}
	mu.Lock()
	if settled { // the result came as the deadline passed
		mu.Unlock()
		r := <-ch
		return r.v, r.err
	}
	settled = true
	mu.Unlock()
	return nil, fmt.Errorf("lease: Redis did not answer within %v: %w", s.cfg.timeout, cctx.Err())
}

// releaseLate removes a lease after its caller went on: one granted too
// late, or one whose release Redis answered too late with an error. It
// runs in the late call's goroutine (Shutdown waits for it), so it is not
// held to the callers' timeout but to the lease's TTL: past it the lease
// has expired anyway. A shorter bound would lose the release on a busy
// machine, as a context that ends between EVALSHA's NOSCRIPT and the EVAL
// fallback keeps the client from sending the EVAL.
func (s *Semaphore) releaseLate(key, id string) error {
	s.trips.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ttl)
	defer cancel()
	return releaseScript.Run(ctx, s.client, []string{key}, id).Err()
}

// waitCalls waits, within ctx, for the Redis calls still running.
func (s *Semaphore) waitCalls(ctx context.Context) error {
	done := make(chan struct{})
	go func() { s.calls.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
