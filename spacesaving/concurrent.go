package spacesaving

import (
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
)

// Concurrent is a Sketch safe for concurrent use, for the request path.
// It keeps several shards, each a Sketch of the full capacity behind its
// own lock. Each processor (P) of the Go scheduler tends to keep using
// the same shard, handed out through a sync.Pool, so that two cores
// rarely touch the same memory; when that shard is busy an Add takes the
// next free one. A key may thus be counted in several shards: they are
// merged on Snapshot and Flush, which keeps the guarantees of a single
// sketch of the same capacity (see Merge).
//
// Memory is that of one Sketch per shard; see WithShards.
type Concurrent struct {
	capacity int
	shards   []shard
	mask     uint64
	local    sync.Pool // of *shard: the P's current shard
	next     atomic.Uint64
}

type shard struct {
	mu sync.Mutex
	s  Sketch
	i  uint64   // position in Concurrent.shards
	_  [64]byte // keep neighbouring locks off one cache line
}

// ConcurrentOption configures NewConcurrent.
type ConcurrentOption func(*concurrentConfig)

type concurrentConfig struct{ shards int }

// WithShards sets the number of shards, rounded up to a power of two
// (default: 2 × GOMAXPROCS, at most 64: each P keeps to one shard, and
// the spares absorb the collisions after a garbage collection empties the
// pool). n < 1 means the default.
func WithShards(n int) ConcurrentOption {
	return func(c *concurrentConfig) {
		if n >= 1 {
			c.shards = n
		}
	}
}

// NewConcurrent returns an empty concurrent sketch whose snapshots monitor
// at most capacity keys. It panics on a capacity New rejects.
func NewConcurrent(capacity int, opts ...ConcurrentOption) *Concurrent {
	cfg := concurrentConfig{shards: min(2*runtime.GOMAXPROCS(0), 64)}
	for _, o := range opts {
		o(&cfg)
	}
	n := 1 << bits.Len(uint(cfg.shards-1))
	c := &Concurrent{capacity: capacity, shards: make([]shard, n), mask: uint64(n - 1)}
	for i := range c.shards {
		c.shards[i].s = *New(capacity)
		c.shards[i].i = uint64(i)
	}
	// The pool only holds pointers into c.shards: when the garbage
	// collector empties it, no counts are lost, Ps just pick again.
	c.local.New = func() any { return &c.shards[c.next.Add(1)&c.mask] }
	return c
}

// Add counts weight more for key. It does not allocate and never blocks
// for long: when its shard is busy it tries the others before waiting.
func (c *Concurrent) Add(key string, weight uint64) {
	if weight == 0 {
		return
	}
	h := hashKey(key)
	sh := c.local.Get().(*shard)
	for range len(c.shards) {
		if sh.mu.TryLock() {
			sh.s.addHash(key, h, weight)
			sh.mu.Unlock()
			c.local.Put(sh)
			return
		}
		sh = &c.shards[(sh.i+1)&c.mask]
	}
	sh.mu.Lock()
	sh.s.addHash(key, h, weight)
	sh.mu.Unlock()
	c.local.Put(sh)
}

// Total returns the sum of all weights added so far.
func (c *Concurrent) Total() uint64 {
	var t uint64
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		t += sh.s.total
		sh.mu.Unlock()
	}
	return t
}

// Capacity returns the capacity of the sketches Snapshot returns.
func (c *Concurrent) Capacity() int { return c.capacity }

// Snapshot returns a merged copy of all shards.
func (c *Concurrent) Snapshot() *Sketch { return c.collect(false) }

// Flush returns a merged copy of all shards and empties them, to cut a
// reporting window. Each weight lands in exactly one window.
func (c *Concurrent) Flush() *Sketch { return c.collect(true) }

func (c *Concurrent) collect(reset bool) *Sketch {
	out := New(c.Capacity())
	tmp := New(c.Capacity())
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		if reset {
			// Swap the shard's memory with tmp: the lock is held for
			// a copy of pointers, not for the merge.
			sh.s, *tmp = *tmp, sh.s
		} else {
			tmp.copyFrom(&sh.s)
		}
		sh.mu.Unlock()
		out.Merge(tmp)
		tmp.Reset()
	}
	return out
}

// copyFrom makes s a copy of o, reusing the memory of s (same capacity).
func (s *Sketch) copyFrom(o *Sketch) {
	s.heap = append(s.heap[:0], o.heap...)
	copy(s.index, o.index)
	copy(s.alpha, o.alpha)
	s.total = o.total
}
