package meter

import (
	"hash/maphash"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/qtop-dev/qtop/histogram"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/spacesaving"
	"github.com/qtop-dev/qtop/tenant"
)

// Recorder aggregates records per window: per tenant × route × kind a
// count, errors, duration sum, RU, bytes, rows and a latency histogram,
// and a Space-Saving sketch of hot keys. Cut closes the window and
// returns it as a report.Report.
//
// Memory is bounded whatever the number of tenants. Tenants are tracked
// by a filtered Space-Saving sketch weighted by duration: a tenant not yet
// tracked takes the place of the lightest one only when its estimated
// weight exceeds it (the evicted tenant's rows are folded into
// report.OtherTenant), and otherwise its record goes straight to report.OtherTenant. So
// the heavy tenants of a window have rows of their own, and the totals
// over all rows, report.OtherTenant included, are exact. A tenant really
// named like that row counts under its stand-in (tenant.Escape), apart.
// Likewise a route really named like the overflow route
// (report.OtherRoute, which holds the routes beyond a tenant's limit)
// counts under its stand-in (tenant.EscapeValue), whoever passes it: a
// stand-in an entry point already gave it is kept as it is. A route above
// tenant.MaxRouteLen counts under a stand-in of its own
// (tenant.SubstituteRoute), never in the overflow route.
//
// Each row holds a 9 KiB latency histogram, so memory is about 9.3 KiB
// per row seen in a window: at most WithMaxRows (plus three per shard)
// rows, and twice that while a window is being cut; about 40 MB at worst
// with the defaults, far less when few tenant × route × kind combinations
// are active. Row aggregates are recycled between windows.
//
// Record is safe for concurrent use and never blocks on anything but a
// short, sharded lock; it does not allocate once the recorder has warmed
// up. Create a Recorder with NewRecorder.
type Recorder struct {
	cfg       config
	seed      maphash.Seed
	mask      uint64
	shards    []shard
	perShard  int // tenants tracked per shard
	alphaBits uint
	rows      atomic.Int64 // rows of the current windows, all shards
	pool      rowPool

	cutMu   sync.Mutex // guards the fields below
	start   time.Time
	seq     uint64
	retired []*window
	other   map[otherKey]int // index in the report's rows of the report.OtherTenant rows

	metrics *recorderMetrics
}

type shard struct {
	mu    sync.Mutex
	cur   *window
	spare *window // owned by Cut
	stats shardStats
	_     [64]byte
}

// shardStats are lifetime counters, read by the metrics collector.
type shardStats struct {
	records [report.NumKinds]uint64
	errors  uint64
	folded  uint64 // records counted under report.OtherTenant
	evicted uint64 // tenants evicted into report.OtherTenant
	invalid uint64 // records whose tenant, route or key was too long
}

// window is one shard's aggregates of the current window.
type window struct {
	tenants map[string]*tenantAgg
	heap    []*tenantAgg // min-heap by weight
	alpha   []uint64     // filter buckets of the tenant sketch
	other   tenantAgg    // report.OtherTenant
	free    []*tenantAgg
	rows    int64
	keys    *spacesaving.Sketch
	keyTen  map[string]string
}

type tenantAgg struct {
	name   string
	weight uint64
	idx    int
	rows   []*rowAgg
}

type rowAgg struct {
	route  string
	kind   report.Kind
	tier   tenant.Tier
	count  uint64
	errors uint64
	dur    time.Duration
	ru     float64
	bytes  uint64
	nrows  uint64
	hist   histogram.Histogram
}

// rowPool recycles row aggregates (each holds a 9 KiB histogram) between
// windows.
type rowPool struct {
	mu   sync.Mutex
	free []*rowAgg
}

func (p *rowPool) get() *rowAgg {
	p.mu.Lock()
	if n := len(p.free); n > 0 {
		a := p.free[n-1]
		p.free = p.free[:n-1]
		p.mu.Unlock()
		return a
	}
	p.mu.Unlock()
	return new(rowAgg)
}

func (p *rowPool) put(rs []*rowAgg) {
	for _, a := range rs {
		a.hist.Reset()
		a.route, a.kind, a.tier = "", 0, 0
		a.count, a.errors, a.dur, a.ru, a.bytes, a.nrows = 0, 0, 0, 0, 0, 0
	}
	p.mu.Lock()
	p.free = append(p.free, rs...)
	p.mu.Unlock()
}

// NewRecorder returns a recorder whose first window starts now (by the
// clock of WithClock). It returns ErrInvalid for an invalid option, and
// the registerer's error when its metrics cannot be registered.
func NewRecorder(opts ...RecorderOption) (*Recorder, error) {
	cfg, err := newRecorderConfig(opts)
	if err != nil {
		return nil, err
	}
	n := cfg.shards
	if n == 0 {
		n = 4 * runtime.GOMAXPROCS(0)
	}
	n = 1 << bits.Len(uint(n-1))
	n = min(n, 1<<bits.Len(uint(cfg.maxTenants-1))) // at least one tenant per shard
	r := &Recorder{
		cfg:    cfg,
		seed:   maphash.MakeSeed(),
		mask:   uint64(n - 1),
		shards: make([]shard, n),
		start:  cfg.clock().Round(0),
		other:  make(map[otherKey]int),
	}
	r.perShard = (cfg.maxTenants + n - 1) / n
	r.alphaBits = uint(bits.Len(uint(4*r.perShard - 1)))
	for i := range r.shards {
		r.shards[i].cur = r.newWindow()
		r.shards[i].spare = r.newWindow()
	}
	if cfg.reg != nil {
		r.metrics = newRecorderMetrics(r)
		if err := r.metrics.register(cfg.reg, cfg.topTenants); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (r *Recorder) newWindow() *window {
	return &window{
		tenants: make(map[string]*tenantAgg, r.perShard),
		heap:    make([]*tenantAgg, 0, r.perShard),
		alpha:   make([]uint64, 1<<r.alphaBits),
		other:   tenantAgg{name: report.OtherTenant},
	}
}

// Source returns the identity the recorder puts in its reports.
func (r *Recorder) Source() report.Source { return r.cfg.source }

// Record adds one finished unit of work to the current window. It is
// safe for concurrent use, takes one short lock, and reads no clock:
// rec.Time is informational (the record counts in the window open when
// Record is called).
func (r *Recorder) Record(rec Record) {
	name, invalid := rowTenant(rec.Tags.Tenant)
	route := rec.Tags.Route
	switch {
	case route == report.OtherRoute: // the overflow route's name: a route of its own
		route = tenant.EscapeValue(route)
	case len(route) > tenant.MaxRouteLen:
		route, _ = tenant.SubstituteRoute(route)
		invalid = true
	}
	key := rec.Tags.Key
	if len(key) > tenant.MaxKeyLen {
		key, invalid = "", true
	}
	kind := rec.Kind
	if !kind.Valid() {
		kind, invalid = report.KindRequest, true
	}
	h := maphash.String(r.seed, name)
	weight := recordWeight(rec.Duration)

	s := &r.shards[h&r.mask]
	s.mu.Lock()
	w := s.cur
	st := &s.stats
	st.records[kind]++
	if rec.Err {
		st.errors++
	}
	if invalid {
		st.invalid++
	}
	t := w.tenants[name]
	if t == nil {
		t = r.admit(w, st, name, h, weight)
	}
	if t != &w.other {
		t.weight += weight
		w.down(t.idx)
	} else {
		st.folded++
	}
	a := r.row(w, t, route, kind)
	a.tier = rec.Tags.Tier
	a.count++
	if rec.Err {
		a.errors++
	}
	if rec.RU > 0 {
		a.ru += rec.RU
	}
	if rec.Bytes > 0 {
		a.bytes += uint64(rec.Bytes)
	}
	if rec.Rows > 0 {
		a.nrows += uint64(rec.Rows)
	}
	if !rec.Refused {
		a.dur += max(rec.Duration, 0)
		a.hist.ObserveDuration(rec.Duration)
	}
	if key != "" {
		if w.keys == nil {
			w.keys = spacesaving.New(r.cfg.keyCapacity)
			w.keyTen = make(map[string]string, r.cfg.keyCapacity)
		}
		w.keys.Add(key, 1)
		if len(w.keyTen) < r.cfg.keyCapacity {
			w.keyTen[key] = name
		} else if _, ok := w.keyTen[key]; ok {
			w.keyTen[key] = name
		}
	}
	s.mu.Unlock()
}

// rowTenant returns the name a record of tenant name counts under, and
// whether it is a bad one: report.UnknownTenant for none; an over-long
// name's stand-in, as every door names it (never merged with another
// tenant's load or the untagged load); a tenant named like the overflow
// row escaped apart from it (tenant.Escape).
func rowTenant(name string) (string, bool) {
	switch {
	case name == "":
		return report.UnknownTenant, false
	case len(name) > tenant.MaxTenantLen:
		return tenant.Substitute(name)
	}
	return tenant.Escape(name), false
}

// recordWeight is a record's weight in the tenant sketch: its duration
// plus a microsecond, so that many instant records still weigh something.
func recordWeight(d time.Duration) uint64 {
	if d < 0 {
		d = 0
	}
	return uint64(d) + uint64(time.Microsecond)
}

// admit returns the aggregate for a tenant not yet tracked in w: a new
// one while the shard has room, the lightest one's slot when the
// tenant's estimate (its filter bucket plus weight) reaches it, and
// otherwise w.other. The caller adds weight to what it gets.
func (r *Recorder) admit(w *window, st *shardStats, name string, h, weight uint64) *tenantAgg {
	a := &w.alpha[h>>(64-r.alphaBits)]
	if len(w.heap) < r.perShard {
		t := w.newTenant(name)
		t.weight = *a
		t.idx = len(w.heap)
		w.heap = append(w.heap, t)
		w.tenants[name] = t
		w.up(t.idx)
		return t
	}
	m := w.heap[0]
	if *a+weight < m.weight {
		*a += weight
		return &w.other
	}
	// Evict the lightest tenant: its rows go to report.OtherTenant, its weight
	// bounds its filter bucket, and the newcomer inherits its slot with
	// the estimate of its own bucket (Space-Saving's overestimate).
	st.evicted++
	for _, ra := range m.rows {
		o := r.row(w, &w.other, ra.route, ra.kind)
		o.merge(ra)
	}
	w.rows -= int64(len(m.rows))
	r.rows.Add(-int64(len(m.rows)))
	r.pool.put(m.rows)
	m.rows = m.rows[:0]
	mh := maphash.String(r.seed, m.name)
	if ma := &w.alpha[mh>>(64-r.alphaBits)]; *ma < m.weight {
		*ma = m.weight
	}
	delete(w.tenants, m.name)
	m.name = name
	m.weight = *a
	w.tenants[name] = m
	w.down(0)
	return m
}

// row returns t's aggregate for route and kind, creating it while the
// tenant and the recorder have room for one more. Beyond the tenant's
// route limit it uses the tenant's report.OtherRoute row; beyond the recorder's
// row limit, the tenant's report.OtherRoute row if it has one, else
// report.OtherTenant's. Only report.OtherTenant's rows (one per kind and shard) are
// created beyond the limit, so rows never exceed WithMaxRows plus three
// per shard.
func (r *Recorder) row(w *window, t *tenantAgg, route string, kind report.Kind) *rowAgg {
	for _, a := range t.rows {
		if a.kind == kind && a.route == route {
			return a
		}
	}
	full := r.rows.Load() >= int64(r.cfg.maxRows)
	if route != report.OtherRoute && (len(t.rows) >= r.cfg.maxRoutes || full) {
		return r.row(w, t, report.OtherRoute, kind)
	}
	if full && t != &w.other {
		return r.row(w, &w.other, report.OtherRoute, kind)
	}
	a := r.pool.get()
	a.route, a.kind = route, kind
	t.rows = append(t.rows, a)
	w.rows++
	r.rows.Add(1)
	return a
}

func (a *rowAgg) merge(o *rowAgg) {
	a.tier = o.tier
	a.count += o.count
	a.errors += o.errors
	a.dur += o.dur
	a.ru += o.ru
	a.bytes += o.bytes
	a.nrows += o.nrows
	a.hist.Merge(&o.hist)
}

func (w *window) newTenant(name string) *tenantAgg {
	var t *tenantAgg
	if n := len(w.free); n > 0 {
		t = w.free[n-1]
		w.free = w.free[:n-1]
	} else {
		t = new(tenantAgg)
	}
	t.name = name
	return t
}

// Min-heap of tenants by weight.

func (w *window) up(i int) {
	h := w.heap
	for i > 0 {
		p := (i - 1) / 2
		if h[p].weight <= h[i].weight {
			break
		}
		h[p], h[i] = h[i], h[p]
		h[p].idx, h[i].idx = p, i
		i = p
	}
}

func (w *window) down(i int) {
	h := w.heap
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		c := l
		if r := l + 1; r < n && h[r].weight < h[l].weight {
			c = r
		}
		if h[i].weight <= h[c].weight {
			return
		}
		h[i], h[c] = h[c], h[i]
		h[i].idx, h[c].idx = i, c
		i = c
	}
}

// Cut closes the current window at now and returns it; the next window
// starts at now. If now is before the window's start (the clock went
// back), the window ends where it started. Cut is safe to call
// concurrently with Record and with itself; Record calls made while Cut
// runs land in one window or the other, never in neither.
func (r *Recorder) Cut(now time.Time) *report.Report {
	rep := new(report.Report)
	r.cutInto(now, rep)
	return rep
}

// cutInto is Cut into rep, reusing its rows (and their histograms), its
// key sketch and its key-tenant map.
func (r *Recorder) cutInto(now time.Time, rep *report.Report) {
	r.cutMu.Lock()
	defer r.cutMu.Unlock()
	now = now.Round(0) // wall clock only, like the encoding
	start := r.start
	if now.Before(start) {
		now = start
	}
	r.start = now
	r.seq++
	retired, nrows := r.retire()

	rows, keys, keyTen := rep.Rows[:0], rep.Keys, rep.KeyTenants
	*rep = report.Report{Version: report.CurrentVersion, Source: r.cfg.source, Seq: r.seq, Start: start, End: now}
	rep.Rows = r.fillRows(retired, rows, nrows)
	r.mergeKeys(retired, rep, keys, keyTen)
	for i, w := range retired {
		r.reset(w)
		r.shards[i].spare = w
		retired[i] = nil
	}
	r.retired = retired
	if r.metrics != nil {
		r.metrics.cut(rep)
	}
}

// retire swaps every shard's window for its spare and returns the retired
// windows, in shard order, and the rows they hold. The caller holds cutMu.
func (r *Recorder) retire() ([]*window, int64) {
	retired := r.retired[:0]
	var nrows int64
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.Lock()
		w := s.cur
		s.cur = s.spare
		s.mu.Unlock()
		s.spare = nil
		retired = append(retired, w)
		nrows += w.rows
	}
	r.rows.Add(-nrows)
	return retired, nrows
}

// fillRows appends the retired windows' rows to rows (emptied, grown to
// nrows if smaller): each tenant's rows, then the "other" tenant's, one
// row per route and kind across the windows.
func (r *Recorder) fillRows(retired []*window, rows []report.Row, nrows int64) []report.Row {
	if int64(cap(rows)) < nrows {
		rows = make([]report.Row, 0, nrows)
	}
	// next returns the next row of rows, emptied.
	next := func() *report.Row {
		rows = rows[:len(rows)+1]
		row := &rows[len(rows)-1]
		row.Latency.Reset()
		return row
	}
	clear(r.other)
	for _, w := range retired {
		for _, t := range w.heap {
			for _, a := range t.rows {
				a.fill(next(), t.name)
			}
		}
		for _, a := range w.other.rows {
			k := otherKey{a.route, a.kind}
			if i, ok := r.other[k]; ok {
				mergeRow(&rows[i], a)
				continue
			}
			r.other[k] = len(rows)
			a.fill(next(), report.OtherTenant)
		}
	}
	return rows
}

// mergeKeys merges the retired windows' key sketches into keys (reset,
// or new if nil) and sets rep.Keys, and rep.KeyTenants to keyTen (cleared)
// filled with the tenant of each key kept. Without keys in any window it
// leaves rep's keys nil.
func (r *Recorder) mergeKeys(retired []*window, rep *report.Report, keys *spacesaving.Sketch, keyTen map[string]string) {
	merged := false
	for _, w := range retired {
		if w.keys == nil || w.keys.Len() == 0 {
			continue
		}
		if !merged {
			if keys == nil {
				keys = spacesaving.New(r.cfg.keyCapacity)
			} else {
				keys.Reset()
			}
			merged = true
		}
		keys.Merge(w.keys)
	}
	if !merged {
		return
	}
	rep.Keys = keys
	clear(keyTen)
	for _, c := range keys.Top(keys.Len()) {
		for _, w := range retired {
			if t, ok := w.keyTen[c.Key]; ok {
				if keyTen == nil {
					keyTen = make(map[string]string)
				}
				keyTen[c.Key] = t
				break
			}
		}
	}
	if len(keyTen) > 0 {
		rep.KeyTenants = keyTen
	}
}

type otherKey struct {
	route string
	kind  report.Kind
}

// fill sets row, whose histogram is empty, to a's aggregates.
func (a *rowAgg) fill(row *report.Row, name string) {
	row.Tenant, row.Route, row.Tier, row.Kind = name, a.route, a.tier, a.kind
	row.Count, row.Errors, row.Duration, row.RU = a.count, a.errors, a.dur, a.ru
	row.Bytes, row.Rows = a.bytes, a.nrows
	row.Latency.Load(&a.hist) // the recorder counts dense, the row is sparse
}

// mergeRow adds a to row.
func mergeRow(row *report.Row, a *rowAgg) {
	row.Tier = a.tier
	row.Count += a.count
	row.Errors += a.errors
	row.Duration += a.dur
	row.RU += a.ru
	row.Bytes += a.bytes
	row.Rows += a.nrows
	row.Latency.AddHistogram(&a.hist)
}

// reset empties a retired window for reuse, returning its rows to the
// pool.
func (r *Recorder) reset(w *window) {
	for _, t := range w.heap {
		r.pool.put(t.rows)
		t.rows = t.rows[:0]
		t.name = ""
		t.weight = 0
		w.free = append(w.free, t)
	}
	w.heap = w.heap[:0]
	clear(w.tenants)
	clear(w.alpha)
	r.pool.put(w.other.rows)
	w.other.rows = w.other.rows[:0]
	w.rows = 0
	if w.keys != nil {
		w.keys.Reset()
		clear(w.keyTen)
	}
}
