package otlpin

import (
	"encoding/binary"
	"time"

	"github.com/qtop-dev/qtop/meter"
	"github.com/qtop-dev/qtop/tenant"
)

// traceID is a trace id as a map key (shorter ids are zero-padded).
type traceID [16]byte

func toTraceID(b []byte) (traceID, bool) {
	var id traceID
	if len(b) == 0 || len(b) > len(id) {
		return id, false
	}
	copy(id[:], b)
	return id, id != traceID{}
}

// spanID is an 8-byte span id as a number; 0 (no id) for any other
// length.
func spanID(b []byte) uint64 {
	if len(b) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

// root is what a trace's local root span says about whom the trace is for.
type root struct {
	tenant string
	tier   tenant.Tier
}

// traceCache remembers the tenant of recent traces' root spans, so that a
// database span that arrives in another request than its root can be
// attributed. It holds at most cap traces for at most ttl each, oldest
// out first.
type traceCache struct {
	m     map[traceID]traceEntry
	order []traceID // FIFO ring of insertions, grown up to capacity
	head  int
	n     int
	cap   int
	ttl   time.Duration
}

type traceEntry struct {
	root
	at time.Time
}

func newTraceCache(capacity int, ttl time.Duration) *traceCache {
	return &traceCache{m: make(map[traceID]traceEntry), cap: capacity, ttl: ttl}
}

func (c *traceCache) put(id traceID, r root, now time.Time) {
	if e, ok := c.m[id]; ok {
		e.at = now
		c.m[id] = e // the first root seen keeps its place
		return
	}
	if c.n == c.cap {
		delete(c.m, c.order[c.head])
		c.head = (c.head + 1) % len(c.order)
		c.n--
	} else if c.n == len(c.order) {
		c.order = regrow(c.order, c.head, c.n, c.cap)
		c.head = 0
	}
	c.order[(c.head+c.n)%len(c.order)] = id
	c.n++
	c.m[id] = traceEntry{root: r, at: now}
}

func (c *traceCache) get(id traceID, now time.Time) (root, bool) {
	e, ok := c.m[id]
	if !ok || now.Sub(e.at) > c.ttl {
		return root{}, false
	}
	return e.root, true
}

// expire drops entries older than ttl from the front of the ring.
func (c *traceCache) expire(now time.Time) {
	for c.n > 0 {
		id := c.order[c.head]
		e, ok := c.m[id]
		if ok && now.Sub(e.at) <= c.ttl {
			return
		}
		delete(c.m, id)
		c.head = (c.head + 1) % len(c.order)
		c.n--
	}
}

// waiting is a database span waiting for its trace's root span.
type waiting struct {
	rec      meter.Record
	src      *source
	deadline time.Time
}

// waitList holds database spans whose trace's tenant is not known yet, at
// most cap of them, each until its deadline; then it is recorded for
// ingest.UnknownTenant.
type waitList struct {
	byTrace map[traceID][]int // indexes into items
	items   []waitItem        // FIFO ring, grown up to cap
	head, n int
	cap     int
}

type waitItem struct {
	id   traceID
	w    waiting
	done bool
}

func newWaitList(capacity int) *waitList {
	return &waitList{byTrace: make(map[traceID][]int), cap: capacity}
}

func (l *waitList) full() bool { return l.n == l.cap }

// add queues w; the caller has checked the list is not full.
func (l *waitList) add(id traceID, w waiting) {
	if l.n == len(l.items) {
		l.items = regrow(l.items, l.head, l.n, l.cap)
		l.head = 0
		clear(l.byTrace)
		for i := range l.n {
			if it := &l.items[i]; !it.done {
				l.byTrace[it.id] = append(l.byTrace[it.id], i)
			}
		}
	}
	i := (l.head + l.n) % len(l.items)
	l.items[i] = waitItem{id: id, w: w}
	l.n++
	l.byTrace[id] = append(l.byTrace[id], i)
}

// resolve hands every span waiting for trace id to fn and forgets them.
func (l *waitList) resolve(id traceID, fn func(*waiting)) {
	idx, ok := l.byTrace[id]
	if !ok {
		return
	}
	delete(l.byTrace, id)
	for _, i := range idx {
		it := &l.items[i]
		if !it.done && it.id == id {
			fn(&it.w)
			it.done = true
			it.w = waiting{}
		}
	}
	l.trim()
}

// expire hands every span whose deadline is before now (all with all set)
// to fn, oldest first. A deadline more than wait after now means the clock
// went back: that span's wait is over too, so no span waits longer than
// wait whichever way the clock moves.
func (l *waitList) expire(now time.Time, wait time.Duration, all bool, fn func(*waiting)) {
	for l.n > 0 {
		it := &l.items[l.head]
		if !it.done {
			if !all && now.Before(it.w.deadline) && it.w.deadline.Sub(now) <= wait {
				return
			}
			fn(&it.w)
			l.forget(it.id, l.head)
		}
		*it = waitItem{}
		l.head = (l.head + 1) % len(l.items)
		l.n--
	}
}

func (l *waitList) forget(id traceID, i int) {
	idx := l.byTrace[id]
	for j, k := range idx {
		if k == i {
			idx = append(idx[:j], idx[j+1:]...)
			break
		}
	}
	if len(idx) == 0 {
		delete(l.byTrace, id)
	} else {
		l.byTrace[id] = idx
	}
}

// trim drops resolved items from the front of the ring.
func (l *waitList) trim() {
	for l.n > 0 && l.items[l.head].done {
		l.items[l.head] = waitItem{}
		l.head = (l.head + 1) % len(l.items)
		l.n--
	}
}

// len returns the spans waiting (resolved ones still in the ring included
// until they reach its front).
func (l *waitList) len() int { return l.n }

// regrow returns ring (n items from head) laid out from 0 in a ring twice
// as large, at most limit.
func regrow[T any](ring []T, head, n, limit int) []T {
	out := make([]T, min(max(2*len(ring), 256), limit))
	for i := range n {
		out[i] = ring[(head+i)%len(ring)]
	}
	return out
}
