package enforce

import (
	"testing"
	"testing/synctest"
	"time"
)

// A queue is overloaded once a request has stood in it longer than the
// CoDel interval (100 ms), not before.
func TestQueueOverloadedAt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Unix(0, 0)
		q, err := newQueue(1, WithQueueClock(func() time.Time { return now }))
		if err != nil {
			t.Fatal(err)
		}
		if q.OverloadedAt(now) {
			t.Fatal("idle queue overloaded")
		}
		release, _ := q.Acquire(t.Context(), 2)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if rel, err := q.Acquire(t.Context(), 2); err == nil {
				rel()
			}
		}()
		synctest.Wait() // the second request stands in the queue
		if q.Waiting() != 1 {
			t.Fatalf("%d waiting, want 1", q.Waiting())
		}
		if q.OverloadedAt(now.Add(50 * time.Millisecond)) {
			t.Error("a queue standing for 50 ms (interval 100 ms) is overloaded")
		}
		if !q.OverloadedAt(now.Add(150 * time.Millisecond)) {
			t.Error("a queue standing for 150 ms is not overloaded")
		}
		release()
		<-done
	})
}
