package sqlcomment

import (
	"sync/atomic"
	"unsafe"
)

const (
	shapeSlots    = 256
	shapeMaxQuery = 4096
)

// shapeCache remembers Shape for recent statement texts, as posCache
// remembers insert positions: direct-mapped by the text's address and
// length, admitted on a second miss in a row in its slot, a hit decided by
// comparing the texts (equal at the same address costs nothing more), so
// texts that never come back cost a hash and allocate nothing.
type shapeCache struct {
	slots  [shapeSlots]atomic.Pointer[shapeEntry]
	missed [shapeSlots]atomic.Uintptr
}

type shapeEntry struct {
	query string
	h     uint64
}

func (sc *shapeCache) shape(query string) uint64 {
	k := uintptr(unsafe.Pointer(unsafe.StringData(query))) + uintptr(len(query))
	i := (k ^ k>>8 ^ k>>16) & (shapeSlots - 1)
	if e := sc.slots[i].Load(); e != nil && e.query == query {
		return e.h
	}
	h := Shape(query)
	if len(query) <= shapeMaxQuery && sc.missed[i].Swap(k) == k {
		sc.slots[i].Store(&shapeEntry{query: query, h: h})
	}
	return h
}
