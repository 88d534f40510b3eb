package sqlcomment

import (
	"hash/maphash"
	"sync/atomic"
	"unsafe"

	"github.com/qtop-dev/qtop/tenant"
)

// cacheSlots is the number of entries of a Commenter's comment cache, a
// power of two.
const cacheSlots = 1024

// commentCache remembers, per Commenter, the encoded comment for a
// context's tags (route, tenant, tier, after the static application and
// db_driver). These values are bounded by design (see Statement caches in
// the package doc), so the same few comments come back statement after
// statement; a hit costs two hashes and a comparison instead of encoding
// every byte again. Key is never cached (unbounded), nor are WithTag tags
// (a Commenter with them has no cache).
//
// It is direct-mapped: each tag set has one slot, decided by its hash. A
// tag set is admitted on its second miss in a row in its slot, so that a
// stream of tags that never repeat (10,000 tenants in turn) costs a hash
// and an atomic swap per statement and allocates nothing, while the tags
// of a busy tenant are cached from its second statement on. Entries are
// immutable and swapped whole, so readers need no lock.
type commentCache struct {
	seed   maphash.Seed
	slots  [cacheSlots]atomic.Pointer[cacheEntry]
	missed [cacheSlots]atomic.Uint64 // hash of the last miss in each slot
}

type cacheEntry struct {
	hash          uint64
	tenant, route string
	tier          tenant.Tier
	// comment is the whole comment, "/*…*/"; inner is it without "/*" and
	// "*/", to render the trace pairs after.
	comment, inner string
	// unique: the comment has a per-request pair (route, tenant or tier).
	unique bool
}

func newCommentCache() *commentCache { return &commentCache{seed: maphash.MakeSeed()} }

// get returns the entry for t, encoding and storing it when t is admitted,
// or nil: not cached (yet), or over the cap (Commenter.general drops
// tags then).
func (cc *commentCache) get(c *Commenter, t tenant.Tags) *cacheEntry {
	h, i, e := cc.lookup(t)
	if e != nil {
		return e
	}
	if cc.missed[i].Swap(h) != h {
		return nil
	}
	e = c.newEntry(h, t)
	if e != nil {
		cc.slots[i].Store(e)
	}
	return e
}

// lookup returns t's hash, its slot and its entry, or a nil entry.
func (cc *commentCache) lookup(t tenant.Tags) (h, i uint64, _ *cacheEntry) {
	h = maphash.String(cc.seed, t.Tenant) ^ maphash.String(cc.seed, t.Route)*0x9e3779b97f4a7c15 ^ uint64(t.Tier)
	i = h & (cacheSlots - 1)
	if e := cc.slots[i].Load(); e != nil && e.hash == h && e.tenant == t.Tenant && e.route == t.Route && e.tier == t.Tier {
		return h, i, e
	}
	return h, i, nil
}

// newEntry encodes the comment for t after the static prefix, or returns
// nil when it might not fit the cap or the stack buffer.
func (c *Commenter) newEntry(h uint64, t tenant.Tags) *cacheEntry {
	var tmp [stackBuf]byte
	w, unique := c.renderTags(tmp[:], t, 2)
	if w < 0 {
		return nil
	}
	tmp[w], tmp[w+1] = '*', '/'
	comment := string(tmp[:w+2])
	return &cacheEntry{hash: h, tenant: t.Tenant, route: t.Route, tier: t.Tier,
		comment: comment, inner: comment[2:w], unique: unique}
}

// Statement texts whose insert position (insertAt) is remembered: the
// texts of a program are mostly constants, the same few thousand bytes
// lexed again for every statement otherwise.
const (
	posSlots    = 256
	posMaxQuery = 4096 // longer texts are lexed every time, not kept alive
)

// posCache remembers insertAt for recent statement texts, direct-mapped
// by the text's address and length (cheap, and the same for a constant
// every time), admitted on a second miss in a row as commentCache is. A
// hit is decided by comparing the texts, so a text at a reused address
// is never mistaken for another; an entry keeps its text alive.
type posCache struct {
	slots  [posSlots]atomic.Pointer[posEntry]
	missed [posSlots]atomic.Uintptr
}

type posEntry struct {
	query string
	at    int
	ok    bool
}

func (pc *posCache) insertAt(query string) (at int, ok bool) {
	k := uintptr(unsafe.Pointer(unsafe.StringData(query))) + uintptr(len(query))
	i := (k ^ k>>8 ^ k>>16) & (posSlots - 1)
	if e := pc.slots[i].Load(); e != nil && e.query == query {
		return e.at, e.ok
	}
	at, ok = insertAt(query)
	if len(query) <= posMaxQuery && pc.missed[i].Swap(k) == k {
		pc.slots[i].Store(&posEntry{query: query, at: at, ok: ok})
	}
	return at, ok
}
