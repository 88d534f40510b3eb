package enforce

import (
	"fmt"
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

const numShards = 64

// Buckets is a set of RU token buckets, one per key (usually a tenant),
// created on first use with the limit a caller-given function resolves
// (plan, override, policy cap) and evicted once idle, so memory stays
// bounded by withMaxKeys. The decision path takes the time as an argument,
// does not allocate once the key exists, and scales across cores for
// distinct keys. Safe for concurrent use. An Enforcer keeps one for its
// tenants (Enforcer.Buckets).
type Buckets struct {
	seed     maphash.Seed
	shards   [numShards]shard
	def      Limit
	limitOf  func(key string) (Limit, bool)
	gen      atomic.Uint64
	perShard int
	idle     time.Duration
	evicted  atomic.Uint64
}

// shard is a read-mostly map in the manner of sync.Map: lookups of known
// keys read an immutable map through an atomic pointer, without a lock or
// a shared write; new keys go to a dirty map under the mutex, which
// replaces the read map once enough lookups have missed it.
type shard struct {
	read   atomic.Pointer[map[string]*bucket]
	mu     sync.Mutex
	dirty  map[string]*bucket // nil: read holds every key
	misses int
	_      [32]byte // keep shards on separate cache lines
}

func (s *shard) load(key string) *bucket { return (*s.read.Load())[key] }

// all returns the map that holds every key; the caller holds s.mu.
func (s *shard) allLocked() map[string]*bucket {
	if s.dirty != nil {
		return s.dirty
	}
	return *s.read.Load()
}

// dirtyLocked makes the dirty map (a copy of read) if there is none.
func (s *shard) dirtyLocked() map[string]*bucket {
	if s.dirty == nil {
		r := *s.read.Load()
		s.dirty = make(map[string]*bucket, len(r)+1)
		for k, v := range r {
			s.dirty[k] = v
		}
	}
	return s.dirty
}

// missLocked counts a lookup that the read map could not answer and
// promotes the dirty map once misses reach its size.
func (s *shard) missLocked() {
	s.misses++
	if s.dirty != nil && s.misses >= len(s.dirty) {
		d := s.dirty
		s.read.Store(&d)
		s.dirty, s.misses = nil, 0
	}
}

// publishLocked makes the read map complete again after deletions.
func (s *shard) publishLocked() {
	if s.dirty != nil {
		d := s.dirty
		s.read.Store(&d)
		s.dirty, s.misses = nil, 0
	}
}

type bucketsConfig struct {
	limitOf func(string) (Limit, bool)
	maxKeys int
	idle    time.Duration
}

// bucketsOption configures newBuckets.
type bucketsOption func(*bucketsConfig)

// withLimitOf sets the function that resolves a key's limit when its
// bucket is made or after Invalidate. Returning false (or an invalid
// limit) means the default limit.
func withLimitOf(f func(key string) (Limit, bool)) bucketsOption {
	return func(c *bucketsConfig) { c.limitOf = f }
}

// withMaxKeys bounds the number of buckets kept (default 100,000). Past it,
// idle full buckets are evicted first, then the fullest one of the shard;
// that one forgets what it held (at worst a little debt), and a charge
// racing with the eviction of its bucket is lost.
func withMaxKeys(n int) bucketsOption { return func(c *bucketsConfig) { c.maxKeys = n } }

// withIdle sets how long a bucket must have been full before a sweep
// evicts it (default one minute). A full bucket is the same as a new one,
// so evicting it loses nothing.
func withIdle(d time.Duration) bucketsOption { return func(c *bucketsConfig) { c.idle = d } }

// newBuckets returns an empty set of buckets whose default limit is def.
func newBuckets(def Limit, opts ...bucketsOption) (*Buckets, error) {
	if err := def.Validate(); err != nil {
		return nil, err
	}
	c := bucketsConfig{maxKeys: 100_000, idle: time.Minute}
	for _, o := range opts {
		o(&c)
	}
	if c.maxKeys < 1 {
		return nil, fmt.Errorf("%w: max keys %d (want ≥ 1)", ErrConfig, c.maxKeys)
	}
	if c.idle < 0 {
		return nil, fmt.Errorf("%w: idle %v (want ≥ 0)", ErrConfig, c.idle)
	}
	k := &Buckets{seed: maphash.MakeSeed(), def: def, limitOf: c.limitOf, idle: c.idle,
		perShard: max(1, (c.maxKeys+numShards-1)/numShards)}
	for i := range k.shards {
		m := make(map[string]*bucket)
		k.shards[i].read.Store(&m)
	}
	return k, nil
}

func (k *Buckets) resolve(key string) Limit {
	if k.limitOf != nil {
		if l, ok := k.limitOf(key); ok && l.Validate() == nil {
			return l
		}
	}
	return k.def
}

// get returns key's bucket, creating it, and brings its limit up to date.
// The path of a known key with a current limit is kept small enough to
// inline.
func (k *Buckets) get(now time.Time, key string) *bucket {
	s := &k.shards[maphash.String(k.seed, key)%numShards]
	if b := s.load(key); b != nil && b.p.Load().gen == k.gen.Load() {
		return b
	}
	return k.getSlow(s, now.UnixNano(), key)
}

func (k *Buckets) getSlow(s *shard, n int64, key string) *bucket {
	b := s.load(key)
	gen := k.gen.Load()
	if b == nil {
		return k.insert(s, n, key, gen)
	}
	if b.p.Load().gen != gen {
		b.setParams(n, newParams(k.resolve(key), gen))
	}
	return b
}

func (k *Buckets) insert(s *shard, n int64, key string, gen uint64) *bucket {
	s.mu.Lock()
	if b := s.allLocked()[key]; b != nil {
		s.missLocked()
		s.mu.Unlock()
		if b.p.Load().gen != gen {
			b.setParams(n, newParams(k.resolve(key), gen))
		}
		return b
	}
	s.mu.Unlock()
	l := k.resolve(key) // outside the lock: it may read the enforcer's tables
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.allLocked()[key]; b != nil {
		return b
	}
	if len(s.allLocked()) >= k.perShard {
		k.evictLocked(s, n)
	}
	b := newBucket(newParams(l, gen))
	s.dirtyLocked()[key] = b
	s.missLocked()
	return b
}

// evictLocked removes idle full buckets, or else the fullest one.
func (k *Buckets) evictLocked(s *shard, n int64) {
	var (
		victim string
		minTat int64 = math.MaxInt64
		freed  int
	)
	m := s.dirtyLocked()
	for key, b := range m {
		t := b.g.FullAt().UnixNano()
		if t+int64(k.idle) <= n {
			delete(m, key)
			freed++
			continue
		}
		if t < minTat {
			minTat, victim = t, key
		}
	}
	if freed == 0 && victim != "" {
		delete(m, victim)
		freed++
	}
	s.publishLocked()
	k.evicted.Add(uint64(freed))
}

// AllowAt reports whether key may start work at now (its bucket is out
// of debt) and, when not, how long until it may.
func (k *Buckets) AllowAt(now time.Time, key string) (ok bool, wait time.Duration) {
	b := k.get(now, key)
	r := &b.p.Load().rate
	if b.g.AllowAt(now, *r, 0) {
		return true, 0
	}
	return false, b.g.WaitAt(now, *r, 0)
}

// ChargeAt charges key ru tokens at now, into debt if needed. A cost that
// is not a number > 0 is ignored.
func (k *Buckets) ChargeAt(now time.Time, key string, ru float64) {
	if !(ru > 0) {
		return
	}
	b := k.get(now, key)
	b.g.ChargeAt(now, b.p.Load().rate, ru)
}

// TakeAt admits work of known cost ru for key: when its bucket is out of
// debt it is charged and TakeAt returns true; otherwise it returns false
// and how long until the bucket is out of debt.
func (k *Buckets) TakeAt(now time.Time, key string, ru float64) (bool, time.Duration) {
	b := k.get(now, key)
	r := &b.p.Load().rate
	if b.g.TakeAt(now, *r, ru) {
		return true, 0
	}
	return false, b.g.WaitAt(now, *r, 0)
}

// TokensAt returns key's tokens at now (negative: debt).
func (k *Buckets) TokensAt(now time.Time, key string) float64 {
	b := k.get(now, key)
	return b.g.TokensAt(now, b.p.Load().rate)
}

// LimitOf returns the limit key's bucket currently uses (resolving it
// when the key has no bucket yet).
func (k *Buckets) LimitOf(key string) Limit {
	s := &k.shards[maphash.String(k.seed, key)%numShards]
	b := s.load(key)
	if b == nil {
		s.mu.Lock()
		b = s.allLocked()[key]
		s.mu.Unlock()
	}
	if b == nil || b.p.Load().gen != k.gen.Load() {
		return k.resolve(key)
	}
	return b.p.Load().limit
}

// Invalidate makes every bucket resolve its limit again on next use,
// keeping the tokens (and debt) it holds. Call it after plans, overrides
// or policy caps change.
func (k *Buckets) Invalidate() { k.gen.Add(1) }

// SweepAt evicts every bucket that has been full for the idle duration at
// now and returns how many it evicted.
func (k *Buckets) SweepAt(now time.Time) int {
	n := now.UnixNano()
	var freed int
	for i := range k.shards {
		s := &k.shards[i]
		s.mu.Lock()
		var m map[string]*bucket
		for key, b := range s.allLocked() {
			if b.g.FullAt().UnixNano()+int64(k.idle) <= n {
				if m == nil {
					m = s.dirtyLocked()
				}
				delete(m, key)
				freed++
			}
		}
		if m != nil {
			s.publishLocked()
		}
		s.mu.Unlock()
	}
	k.evicted.Add(uint64(freed))
	return freed
}

// Len returns the number of buckets held.
func (k *Buckets) Len() int {
	var n int
	for i := range k.shards {
		s := &k.shards[i]
		s.mu.Lock()
		n += len(s.allLocked())
		s.mu.Unlock()
	}
	return n
}

// Evicted returns the cumulative number of evicted buckets.
func (k *Buckets) Evicted() uint64 { return k.evicted.Load() }
