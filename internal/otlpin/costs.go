package otlpin

import (
	"bytes"
	"cmp"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/ru"
)

// WithCostModel sets the RU cost model that prices requests and jobs
// without an explicit qtop.ru attribute (default ru.DefaultModel): the
// model qtop's agent charges with, so the RU of OTLP services and of
// agents add up on one scale. Pass the calibrated model rucalib prints
// with -json.
func WithCostModel(m ru.Model) Option {
	return func(c *config) { c.model = m }
}

// Attributes read for the cost model and for connection-pool spans.
const (
	attrHTTPMethod    = "http.request.method"
	attrHTTPMethodOld = "http.method"
)

// opOf is the cost-model operation of a request, by HTTP method as the
// agent's default (GET, HEAD, OPTIONS read; DELETE delete; others write),
// of a job a write.
func opOf(kind report.Kind, method []byte) ru.Op {
	if kind == report.KindJob {
		return ru.OpWrite
	}
	switch string(method) {
	case "GET", "HEAD", "OPTIONS", "":
		return ru.OpRead
	case "DELETE":
		return ru.OpDelete
	}
	return ru.OpWrite
}

// isPoolSpan reports whether a PostgreSQL span with no statement (no query
// text, summary or operation) is a connection-pool span: one named
// "….connect" (pg-pool.connect, pg.connect) or holding "acquire"
// (pgxpool's acquire, a pool's "acquire connection").
func isPoolSpan(name []byte) bool {
	return bytes.HasSuffix(name, []byte(".connect")) || bytes.Equal(name, []byte("connect")) ||
		bytes.Contains(bytes.ToLower(name), []byte("acquire"))
}

// poolWaits sums one source's connection-pool waits per tenant over a
// window; send attaches them to the window's report as the enforcement
// detail's PoolWait.
type poolWaits struct {
	mu sync.Mutex
	m  map[string]*report.PoolWait
}

func (p *poolWaits) add(t string, d time.Duration) {
	if t == "" {
		t = report.UnknownTenant
	}
	d = max(d, 0)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = make(map[string]*report.PoolWait)
	}
	w := p.m[t]
	if w == nil {
		if len(p.m) >= report.MaxPoolWaits-1 {
			t = report.OtherTenant
			w = p.m[t]
		}
		if w == nil {
			w = &report.PoolWait{Tenant: t}
			p.m[t] = w
		}
	}
	w.Count++
	w.Wait += d
	w.Max = max(w.Max, d)
}

// attach moves the window's waits, most waited first, into rep's
// enforcement detail.
func (p *poolWaits) attach(rep *report.Report) {
	p.mu.Lock()
	m := p.m
	p.m = nil
	p.mu.Unlock()
	if len(m) == 0 {
		return
	}
	out := make([]report.PoolWait, 0, len(m))
	for _, w := range m {
		out = append(out, *w)
	}
	slices.SortFunc(out, func(a, b report.PoolWait) int {
		if c := cmp.Compare(b.Wait, a.Wait); c != 0 {
			return c
		}
		return cmp.Compare(a.Tenant, b.Tenant)
	})
	d, _ := report.SectionOf[report.EnforcementDetail](rep)
	d.PoolWait = append(d.PoolWait, out...)
	rep.SetSection(d)
}

// dbIntervals remembers, per trace, the time its statement spans already
// covered, so that nested or overlapping statements of one request count
// their wall time once: a span's DB time is the part of it no earlier
// span of its trace covered. It holds at most cap traces, oldest out
// first; a trace's intervals are merged as they come, at most
// maxIntervals of them (beyond, the oldest is forgotten).
//
// A span that starts on a whole millisecond comes from an SDK that takes
// start times from a millisecond clock (OpenTelemetry JS 2.x: Date.now()
// for the start, the end that start plus a precise duration), so its
// place is known to within a millisecond only: two statements run one
// after the other seem to overlap by up to 1 ms, and a short one can seem
// to lie inside the one before it. Such spans are compared pairwise: an
// overlap counts when one span is the other's parent (a driver span
// around a query span), or when it is a millisecond or more (queries run
// in parallel); a shorter overlap of unrelated spans is the clock's. The
// Node.js example lost 2–3% of its DB time to it, about 120 µs a request
// of two short statements.
//
// Memory is bounded twice: by the number of traces (the trace cache's
// capacity, 100,000 by default) and by maxIntervalBytes over all of them,
// so that traces of many statements each (256 are kept a trace) cannot
// take 100,000 × 256 × 32 bytes (0.8 GB); past the budget the oldest
// traces are forgotten first, and a statement of a forgotten trace counts
// whole.
type dbIntervals struct {
	mu     sync.Mutex
	m      map[traceID]traceDB
	order  []traceID // FIFO ring
	head   int
	n      int
	cap    int
	bytes  int        // what the traces' intervals take, by their lengths
	budget int        // maxIntervalBytes, or less in tests
	segs   []interval // addMs's scratch
}

// traceDB is what one trace's statement spans covered: the union of the
// spans with precise start times, and the spans with millisecond ones.
type traceDB struct {
	iv []interval
	ms []msSpan
}

type interval struct{ s, e uint64 }

// msSpan is a statement span whose start time was cut to the
// millisecond: its own and its parent's span ids (0 if absent), its
// start and end.
type msSpan struct{ id, parent, s, e uint64 }

const maxIntervals = 256

// maxIntervalBytes bounds the intervals of all traces: 32 MiB, a million
// statements with precise start times or half as many with millisecond
// ones.
const maxIntervalBytes = 32 << 20

// size is what t's intervals take.
func (t traceDB) size() int {
	return len(t.iv)*int(unsafe.Sizeof(interval{})) + len(t.ms)*int(unsafe.Sizeof(msSpan{}))
}

// msStart is the resolution of a start time cut to the millisecond, in ns.
const msStart = uint64(time.Millisecond)

func newDBIntervals(capacity int) *dbIntervals {
	return &dbIntervals{m: make(map[traceID]traceDB), cap: capacity, budget: maxIntervalBytes}
}

// add counts the statement span [s, e) (span id, parent span id; 0 when
// absent) in trace id and returns the length of the part of it the
// trace's statements did not already cover.
func (d *dbIntervals) add(id traceID, s, e, span, parent uint64) uint64 {
	if e <= s {
		return 0
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	t, ok := d.m[id]
	if !ok {
		d.track(id)
	}
	before := t.size()
	var n uint64
	if s%msStart == 0 {
		n = t.addMs(msSpan{span, parent, s, e}, &d.segs)
	} else {
		n = t.addPrecise(s, e)
	}
	d.m[id] = t
	d.bytes += t.size() - before
	for d.bytes > d.budget && d.n > 1 && d.order[d.head] != id {
		d.forgetOldest()
	}
	return n
}

// forgetOldest forgets the trace that came first.
func (d *dbIntervals) forgetOldest() {
	old := d.order[d.head]
	d.bytes -= d.m[old].size()
	delete(d.m, old)
	d.head = (d.head + 1) % len(d.order)
	d.n--
}

// addPrecise merges [s, e) into the union and returns the part of it the
// union did not cover.
func (t *traceDB) addPrecise(s, e uint64) uint64 {
	covered := uint64(0)
	ns, ne := s, e
	w := 0 // the intervals it does not touch stay, in place and in order
	for _, x := range t.iv {
		if x.e < s || x.s > e { // disjoint (touching ones merge)
			t.iv[w] = x
			w++
			continue
		}
		covered += min(x.e, e) - max(x.s, s)
		ns, ne = min(ns, x.s), max(ne, x.e)
	}
	out := t.iv[:w]
	i, _ := slices.BinarySearchFunc(out, ns, func(x interval, s uint64) int { return cmp.Compare(x.s, s) })
	out = slices.Insert(out, i, interval{ns, ne})
	if len(out) > maxIntervals { // the earliest goes
		out = append(out[:0], out[1:]...)
	}
	t.iv = out
	return (e - s) - covered
}

// addMs adds a span with a millisecond start and returns the part of it
// that no earlier such span of the trace covered: the union of its
// overlaps with its parent and children, and with the others where they
// overlap by a millisecond or more. A span sent again adds nothing.
func (t *traceDB) addMs(sp msSpan, scratch *[]interval) uint64 {
	segs := (*scratch)[:0]
	defer func() { *scratch = segs[:0] }()
	for _, x := range t.ms {
		if sp.id != 0 && x == sp { // the same span sent again
			return 0
		}
		lo, hi := max(x.s, sp.s), min(x.e, sp.e)
		if hi <= lo {
			continue
		}
		related := sp.id != 0 && x.parent == sp.id || sp.parent != 0 && x.id == sp.parent
		if related || hi-lo >= msStart {
			segs = append(segs, interval{lo, hi})
		}
	}
	slices.SortFunc(segs, func(a, b interval) int { return cmp.Compare(a.s, b.s) })
	covered, end := uint64(0), uint64(0)
	for _, g := range segs {
		g.s = max(g.s, end)
		if g.e > g.s {
			covered += g.e - g.s
			end = g.e
		}
	}
	if len(t.ms) == maxIntervals {
		t.ms = append(t.ms[:0], t.ms[1:]...)
	}
	t.ms = append(t.ms, sp)
	return (sp.e - sp.s) - covered
}

// track puts a new trace in the ring, forgetting the oldest when full.
func (d *dbIntervals) track(id traceID) {
	if d.n == d.cap {
		d.forgetOldest()
	} else if d.n == len(d.order) {
		d.order = regrow(d.order, d.head, d.n, d.cap)
		d.head = 0
	}
	d.order[(d.head+d.n)%len(d.order)] = id
	d.n++
}
