package envoyrls

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/qtop-dev/qtop/gcra"
)

// DefaultMaxKeys bounds the throttle buckets tracked (WithMaxKeys).
const DefaultMaxKeys = 100_000

// shards spreads the buckets over locks, so that cores answering for
// different tenants do not contend.
const shards = 16

// evictScan is how many buckets an insertion into a full shard looks at
// for a full one (a full bucket is the same as a new one: evicting it
// forgets nothing).
const evictScan = 8

// buckets are the throttle buckets, one per throttled tenant, bounded in
// number. Safe for concurrent use.
type buckets struct {
	seed     maphash.Seed
	perShard int
	shards   [shards]bucketShard
	evicted  atomic.Uint64
	n        atomic.Int64
}

type bucketShard struct {
	mu sync.Mutex
	m  map[string]*bucket
	_  [48]byte // a cache line each
}

// bucket is one tenant's GCRA at the cap (RU/s) its rate was made for.
type bucket struct {
	b    gcra.Bucket
	rate gcra.Rate
	cap  float64
}

func newBuckets(maxKeys int) *buckets {
	bs := &buckets{seed: maphash.MakeSeed(), perShard: max(1, (maxKeys+shards-1)/shards)}
	for i := range bs.shards {
		bs.shards[i].m = make(map[string]*bucket)
	}
	return bs
}

// verdict is a throttle's answer for one descriptor.
type verdict struct {
	ok        bool
	remaining float64       // RU the bucket holds after the answer
	reset     time.Duration // OK: until full; refused: until it admits
}

// check answers whether tenant's bucket at capRU (> 0) RU/s holds cost RU
// at now, without charging it.
func (bs *buckets) check(now time.Time, key string, capRU, cost float64) verdict {
	sh := &bs.shards[maphash.String(bs.seed, key)%shards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	b := bs.getLocked(sh, now, key, capRU)
	if b == nil {
		return verdict{ok: true, remaining: capRU}
	}
	if b.b.AllowAt(now, b.rate, cost) {
		return verdict{ok: true, remaining: b.b.TokensAt(now, b.rate) - cost,
			reset: fullAfter(now, b, cost)}
	}
	tokens := b.b.TokensAt(now, b.rate)
	if burst := b.rate.Burst(); cost > burst {
		// More than the bucket holds: admitted when it is full (charged
		// into debt that the requests after it wait out); until then,
		// told when it will be full (not "now", which would have the
		// client retry at once, forever).
		if tokens >= burst {
			return verdict{ok: true, reset: fullAfter(now, b, cost)}
		}
		return verdict{remaining: max(0, tokens), reset: fullAfter(now, b, 0)}
	}
	return verdict{remaining: max(0, tokens), reset: b.b.WaitAt(now, b.rate, cost)}
}

// fullAfter is how long after now b is full again once charged cost.
func fullAfter(now time.Time, b *bucket, cost float64) time.Duration {
	missing := b.rate.Burst() - b.b.TokensAt(now, b.rate) + cost
	return time.Duration(max(0, missing/b.rate.PerSecond()*float64(time.Second)))
}

// charge takes cost RU (negative: gives back) from key's bucket at capRU.
func (bs *buckets) charge(now time.Time, key string, capRU, cost float64) {
	sh := &bs.shards[maphash.String(bs.seed, key)%shards]
	sh.mu.Lock()
	if b := bs.getLocked(sh, now, key, capRU); b != nil {
		b.b.ChargeAt(now, b.rate, cost)
	}
	sh.mu.Unlock()
}

// getLocked returns key's bucket at capRU RU/s, made (evicting another
// when the shard is full) or moved to that rate keeping its tokens; nil
// when capRU makes no rate.
func (bs *buckets) getLocked(sh *bucketShard, now time.Time, key string, capRU float64) *bucket {
	b := sh.m[key]
	if b != nil && b.cap == capRU {
		return b
	}
	r, err := gcra.NewRate(capRU, capRU) // a burst of one second
	if err != nil {
		return nil
	}
	if b != nil {
		b.b.SetRateAt(now, b.rate, r)
		b.rate, b.cap = r, capRU
		return b
	}
	if len(sh.m) >= bs.perShard {
		bs.evictLocked(sh, now)
	}
	b = &bucket{rate: r, cap: capRU}
	sh.m[key] = b
	bs.n.Add(1)
	return b
}

// evictLocked removes one bucket of sh: the first full one of a few, else
// the first seen (whose debt is forgiven).
func (bs *buckets) evictLocked(sh *bucketShard, now time.Time) {
	victim, i := "", 0
	for k, b := range sh.m {
		if victim == "" {
			victim = k
		}
		if b.b.TokensAt(now, b.rate) >= b.rate.Burst() {
			victim = k
			break
		}
		if i++; i == evictScan {
			break
		}
	}
	delete(sh.m, victim)
	bs.n.Add(-1)
	bs.evicted.Add(1)
}
