package sqlcomment

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/qtop-dev/qtop/gcra"
)

// budgetState is what a budget remembers across policy updates: its
// buckets, their history and its counters.
type budgetState struct {
	mu       sync.Mutex
	each     string
	maxKeys  int
	shared   bucket             // the bucket of a shared budget
	overflow bucket             // values of an each budget that found no room
	keys     map[string]*bucket // each budget: one per value
	shapes   [budgetShapes]shapeAvg
	// rate is the share's rate the buckets were last charged at (valid
	// when rated), so that a new share converts what they hold (rerate).
	rate  gcra.Rate
	rated bool

	stats budgetStats
}

// budgetStats are a budget's counters, read by metrics and reports.
type budgetStats struct {
	admitted  atomic.Uint64
	inFlight  atomic.Int64
	evictions atomic.Uint64
	overflows atomic.Uint64
	// violations by limit (LimitShare…LimitConcurrency) and by what was
	// done: refused (enforce), warned (warn), in a transaction.
	viol [4][3]atomic.Uint64
}

// The ways a violation was handled, the second index of budgetStats.viol.
const (
	handledRefused = iota
	handledWarned
	handledInTx
)

var handledNames = [...]string{"refused", "warned", "in_tx"}

func newBudgetState(each string, maxKeys int) *budgetState {
	st := &budgetState{each: each, maxKeys: maxKeys}
	if each != "" {
		st.keys = map[string]*bucket{}
	}
	return st
}

// rerate makes the share buckets hold at bu's rate what they held at the
// rate they were charged at, debt included: a debt of database time is
// repaid at the new share (it would otherwise last as long as under the
// old one, up to a day after a long statement under a small share, even
// after the share was raised to let the tenant back in). Buckets of a
// share set anew start full. Nothing is done while the rate stays.
func (st *budgetState) rerate(now time.Time, bu *budget) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if bu.share <= 0 || (st.rated && st.rate == bu.rate) {
		return
	}
	from, had := st.rate, st.rated
	st.rate, st.rated = bu.rate, true
	each := func(k *bucket) {
		if had {
			k.share.SetRateAt(now, from, bu.rate)
		} else {
			k.share = gcra.Bucket{}
		}
	}
	each(&st.shared)
	each(&st.overflow)
	for _, k := range st.keys {
		each(k)
	}
}

// bucket is the state of one budget key.
type bucket struct {
	key      string
	share    gcra.Bucket // of a budget with a share, at the budget's rate
	used     int64       // unix ns of the last admission
	inFlight int32
	mean     shapeAvg // over every shape
	shapes   [keyShapes]shapeAvg
}

// shapeAvg is the moving average of the durations of one shape.
type shapeAvg struct {
	h   uint64
	n   uint32
	avg float64 // seconds
}

func (a *shapeAvg) add(d float64) {
	if a.n < 1<<31 {
		a.n++
	}
	w := a.n
	if w > 4 {
		w = 4
	}
	a.avg += (d - a.avg) / float64(w)
}

// find returns the entry of shape h in as, or nil.
func find(as []shapeAvg, h uint64) *shapeAvg {
	for i := range as {
		if as[i].n > 0 && as[i].h == h {
			return &as[i]
		}
	}
	return nil
}

// record adds d to shape h in as, replacing the entry measured least often
// when h is new.
func record(as []shapeAvg, h uint64, d float64) {
	if a := find(as, h); a != nil {
		a.add(d)
		return
	}
	j := 0
	for i := range as {
		if as[i].n < as[j].n {
			j = i
		}
	}
	as[j] = shapeAvg{h: h}
	as[j].add(d)
}

// estimate returns the estimated duration, in seconds, of a statement of
// shape h charged to k (the cold start of the Budgets doc). st.mu is held.
func (st *budgetState) estimate(k *bucket, h uint64, cold float64) float64 {
	if a := find(k.shapes[:], h); a != nil {
		return a.avg
	}
	if a := find(st.shapes[:], h); a != nil {
		return a.avg
	}
	if k.mean.n > 0 {
		return k.mean.avg
	}
	return cold
}

// bucketFor returns the bucket of key at now (unix ns), making room as the
// Budgets doc says. st.mu is held.
func (st *budgetState) bucketFor(key string, now int64) *bucket {
	if st.keys == nil {
		return &st.shared
	}
	if k := st.keys[key]; k != nil {
		return k
	}
	if len(st.keys) < st.maxKeys {
		k := &bucket{key: key}
		st.keys[key] = k
		return k
	}
	// Full: forget the idle bucket used longest ago among a sample (map
	// iteration order is random), and reuse its memory.
	var victim *bucket
	n := 0
	for _, k := range st.keys {
		if k.inFlight == 0 && (victim == nil || k.used < victim.used) {
			victim = k
		}
		if n++; n == evictSample {
			break
		}
	}
	if victim == nil {
		st.stats.overflows.Add(1)
		return &st.overflow
	}
	delete(st.keys, victim.key)
	*victim = bucket{key: key}
	st.keys[key] = victim
	st.stats.evictions.Add(1)
	return victim
}
