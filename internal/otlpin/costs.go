package otlpin

import (
	"bytes"
	"cmp"
	"slices"
	"sync"
	"time"

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
type dbIntervals struct {
	mu    sync.Mutex
	m     map[traceID][]interval
	order []traceID // FIFO ring
	head  int
	n     int
	cap   int
}

type interval struct{ s, e uint64 }

const maxIntervals = 256

func newDBIntervals(capacity int) *dbIntervals {
	return &dbIntervals{m: make(map[traceID][]interval), cap: capacity}
}

// add merges [s, e) into id's intervals and returns the length of the
// part of it they did not already cover.
func (d *dbIntervals) add(id traceID, s, e uint64) uint64 {
	if e <= s {
		return 0
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	iv, ok := d.m[id]
	if !ok {
		d.track(id)
	}
	covered := uint64(0)
	ns, ne := s, e
	out := iv[:0:0]
	for _, x := range iv {
		if x.e < s || x.s > e { // disjoint (touching ones merge)
			out = append(out, x)
			continue
		}
		covered += min(x.e, e) - max(x.s, s)
		ns, ne = min(ns, x.s), max(ne, x.e)
	}
	out = append(out, interval{ns, ne})
	slices.SortFunc(out, func(a, b interval) int { return cmp.Compare(a.s, b.s) })
	if len(out) > maxIntervals {
		out = out[len(out)-maxIntervals:]
	}
	d.m[id] = out
	return (e - s) - covered
}

// track puts a new trace in the ring, forgetting the oldest when full.
func (d *dbIntervals) track(id traceID) {
	if d.n == d.cap {
		delete(d.m, d.order[d.head])
		d.head = (d.head + 1) % len(d.order)
		d.n--
	} else if d.n == len(d.order) {
		d.order = regrow(d.order, d.head, d.n, d.cap)
		d.head = 0
	}
	d.order[(d.head+d.n)%len(d.order)] = id
	d.n++
}
