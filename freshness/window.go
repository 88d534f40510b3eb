package freshness

import (
	"crypto/sha256"
	"encoding/binary"
	"net/http"
	"time"
)

// Sample is one sampled GET: which route, a keyed hash of the
// caller, the hash of the response and when. It never holds the response
// or the caller.
type Sample struct {
	At       time.Time
	Route    string
	Caller   uint64
	Response uint64
}

// RouteCount is one route's GETs in a window, and the 304s answered
// because the new response equalled the client's copy.
type RouteCount struct {
	Route                 string
	Requests, Revalidated uint64
}

// RuleCount is one freshness rule on one route in a window: the GETs
// it matched (armed, whatever the load), the 304s it served, and, for a
// shadow rule, how many would-be 304s were right (the new response's hash
// equalled the client's ETag) or wrong.
type RuleCount struct {
	Rule, Route                   string
	Matched, Served, Right, Wrong uint64
}

// Window is what the freshness middleware saw since the previous
// Drain, for the reporter.
type Window struct {
	Samples        []Sample
	SamplesDropped uint64
	Routes         []RouteCount
	Rules          []RuleCount
}

// Empty reports whether w has nothing to report.
func (w Window) Empty() bool {
	return len(w.Samples) == 0 && w.SamplesDropped == 0 && len(w.Routes) == 0 && len(w.Rules) == 0
}

// callerHash is the keyed hash of a caller: SHA-256 over the signer's
// key and the caller, so it cannot be reversed without the key, and every
// process with the same key gives a caller the same hash.
func (f *Shedder) callerHash(caller string) uint64 {
	h := sha256.New()
	h.Write(f.signer.keys[0])
	h.Write([]byte{0})
	h.Write([]byte(caller))
	var sum [sha256.Size]byte
	return binary.BigEndian.Uint64(h.Sum(sum[:0]))
}

// sample records a 200 GET of a sampled caller.
func (f *Shedder) sample(r *http.Request, now time.Time, route string, resp uint64) {
	if f.cfg.sampleEvery == 0 {
		return
	}
	caller := f.cfg.caller(r)
	if caller == "" || len(caller) > 4096 {
		return
	}
	ch := f.callerHash(caller)
	if ch%f.cfg.sampleEvery != 0 {
		return
	}
	if f.routeIndex(route) == 0 {
		route = OtherRouteName
	}
	f.sampleMu.Lock()
	if len(f.samples) >= f.cfg.maxSamples {
		f.sampleMu.Unlock()
		f.sampleDrop.Add(1)
		return
	}
	f.samples = append(f.samples, Sample{At: now, Route: route, Caller: ch, Response: resp})
	f.sampleMu.Unlock()
}

// freshTotals is a snapshot of every counter.
type freshTotals struct {
	gets, revalid []uint64
	cells         [][4]uint64
	dropped       uint64
}

func (f *Shedder) totals() freshTotals {
	t := freshTotals{gets: make([]uint64, len(f.gets)), revalid: make([]uint64, len(f.revalid)), cells: make([][4]uint64, len(f.cells))}
	for i := range f.gets {
		t.gets[i], t.revalid[i] = f.gets[i].Load(), f.revalid[i].Load()
	}
	for i := range f.cells {
		c := &f.cells[i]
		t.cells[i] = [4]uint64{c.matched.Load(), c.served.Load(), c.right.Load(), c.wrong.Load()}
	}
	t.dropped = f.sampleDrop.Load()
	return t
}

func (f *Shedder) routeName(i int) string {
	f.routeMu.Lock()
	defer f.routeMu.Unlock()
	if i < len(f.routeTab) {
		return f.routeTab[i]
	}
	return OtherRouteName
}

// Drain returns what happened since the previous call (since New
// for the first) and empties the samples. Safe for concurrent use.
func (f *Shedder) Drain() Window {
	f.drainMu.Lock()
	defer f.drainMu.Unlock()
	var w Window
	f.sampleMu.Lock()
	w.Samples, f.samples = f.samples, nil
	f.sampleMu.Unlock()
	cur := f.totals()
	prev := f.prev
	f.prev = cur
	w.SamplesDropped = cur.dropped - prev.dropped
	nr := f.cfg.maxRoutes + 1
	for i := range cur.gets {
		if g, v := cur.gets[i]-prev.gets[i], cur.revalid[i]-prev.revalid[i]; g > 0 || v > 0 {
			w.Routes = append(w.Routes, RouteCount{Route: f.routeName(i), Requests: g, Revalidated: v})
		}
	}
	for i := range cur.cells {
		var d [4]uint64
		any := false
		for k := range d {
			d[k] = cur.cells[i][k] - prev.cells[i][k]
			any = any || d[k] > 0
		}
		if any {
			w.Rules = append(w.Rules, RuleCount{Rule: f.ruleName(i / nr), Route: f.routeName(i % nr),
				Matched: d[0], Served: d[1], Right: d[2], Wrong: d[3]})
		}
	}
	return w
}
