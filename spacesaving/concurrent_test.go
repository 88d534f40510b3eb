package spacesaving

import (
	"sync"
	"testing"
)

func TestConcurrentGuarantees(t *testing.T) {
	ev := zipfStream(21, 40000, 10000, 1.1, true)
	c := NewConcurrent(100, WithShards(4))
	const workers = 4
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(ev); i += workers {
				c.Add(ev[i].key, ev[i].weight)
			}
		}()
	}
	wg.Wait()
	e := exact{}
	for _, x := range ev {
		e[x.key] += x.weight
	}
	if c.Total() != e.total() {
		t.Fatalf("Total = %d, want %d", c.Total(), e.total())
	}
	snap := c.Snapshot()
	if snap.Capacity() != 100 {
		t.Fatalf("snapshot capacity %d", snap.Capacity())
	}
	check(t, snap, e)
	check(t, c.Snapshot(), e) // Snapshot leaves the shards alone

	flushed := c.Flush()
	check(t, flushed, e)
	if c.Total() != 0 || c.Snapshot().Len() != 0 {
		t.Fatal("Flush did not empty the shards")
	}
	c.Add("after", 3)
	check(t, c.Flush(), exact{"after": 3})
}

// Weights added while windows are cut land in exactly one window.
func TestConcurrentFlushLosesNothing(t *testing.T) {
	c := NewConcurrent(50)
	ev := zipfStream(22, 20000, 500, 1.2, false)
	done := make(chan struct{})
	var total uint64
	var mu sync.Mutex
	go func() {
		defer close(done)
		for _, x := range ev {
			c.Add(x.key, x.weight)
		}
	}()
	for range 20 {
		_ = c.Capacity() // safe beside Flush
		s := c.Flush()
		mu.Lock()
		total += s.Total()
		mu.Unlock()
	}
	<-done
	total += c.Flush().Total()
	if total != uint64(len(ev)) {
		t.Fatalf("windows hold %d, added %d", total, len(ev))
	}
}

func TestConcurrentShardsOption(t *testing.T) {
	for _, tc := range []struct{ in, want int }{{1, 1}, {3, 4}, {8, 8}, {0, -1}, {-2, -1}} {
		c := NewConcurrent(10, WithShards(tc.in))
		if tc.want > 0 && len(c.shards) != tc.want {
			t.Errorf("WithShards(%d): %d shards, want %d", tc.in, len(c.shards), tc.want)
		}
		if tc.want < 0 && len(c.shards) < 1 {
			t.Errorf("WithShards(%d): no shards", tc.in)
		}
	}
	c := NewConcurrent(10)
	c.Add("x", 0)
	if c.Total() != 0 || c.Capacity() != 10 {
		t.Fatal("zero weight counted or capacity wrong")
	}
}
