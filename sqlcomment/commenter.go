package sqlcomment

import (
	"context"
	"encoding/hex"
	"errors"
	"sync/atomic"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/qtop-dev/qtop/tenant"
)

// A Commenter appends the tags of a statement's context to its text. The
// database/sql wrapper and pgxcomment use one each; use it directly for
// other drivers. It is safe for concurrent use.
type Commenter struct {
	cfg     config
	prefix  string        // application and db_driver, encoded, when there are no WithTag tags
	cache   *commentCache // nil with WithTag tags
	pos     posCache
	dropped atomic.Uint64
	drops   *prometheus.CounterVec // nil without WithRegisterer
}

// NewCommenter returns a Commenter configured by opts. Invalid option values
// are corrected as each option documents; see WithMaxLen. A Commenter keeps
// caches of about 20 KiB (see Speed in the package doc): make one per
// database handle, not one per request.
func NewCommenter(opts ...Option) *Commenter {
	c := &Commenter{cfg: newConfig(opts)}
	if len(c.cfg.static) == 0 {
		c.cache = newCommentCache()
		// application and db_driver sort before every other key this
		// package writes: encode them once.
		var ps []pair
		if c.cfg.application != "" {
			ps = append(ps, pair{KeyApplication, c.cfg.application})
		}
		if c.cfg.dbDriver != "" {
			ps = append(ps, pair{KeyDBDriver, c.cfg.dbDriver})
		}
		if len(ps) > 0 {
			b := make([]byte, commentLen(ps))
			n := render(b, ps)
			c.prefix = string(b[2 : n-2])
		}
	}
	if c.cfg.reg != nil {
		vec := prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "qtop_sqlcomment_dropped_tags_total",
			Help: "Tags left out of SQL comments because the comment would exceed its length cap, by key.",
		}, []string{"key"})
		if err := c.cfg.reg.Register(vec); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				if v, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
					vec = v
				}
			}
		}
		c.drops = vec
	}
	return c
}

// Statement is a statement as a Commenter rewrote it.
type Statement struct {
	// Query is the text to send, comment included.
	Query string
	// Tags are the context's tags; Tagged reports whether it had any.
	Tags   tenant.Tags
	Tagged bool
	// Unique reports whether the comment carries per-request values (the
	// context's tags, a traceparent): such a text must not be prepared and
	// cached by text, or each tenant adds a prepared statement.
	Unique bool
}

// Comment returns query with the comment for ctx appended (see Append): the
// static tags, the context's tenant.Tags (tenant.Lookup: those of
// tenant.With, else those of the OTel baggage, as ingest's SQLObserver
// records them) and, with
// WithTraceContext and unless prepare is true, the span's traceparent and
// tracestate. Pass prepare = true for a text that will be prepared and
// reused. The comment is capped as WithMaxLen says.
func (c *Commenter) Comment(ctx context.Context, query string, prepare bool) Statement {
	t, tagged := tenant.Lookup(ctx)
	st := Statement{Query: query, Tags: t, Tagged: tagged, Unique: tagged}
	if !tagged && !c.cfg.trace && c.prefix == "" && len(c.cfg.static) == 0 {
		return st // nothing to add: do not even scan the statement
	}
	at, ok := c.pos.insertAt(query)
	if !ok {
		st.Unique = false // the text is left as it is
		return st
	}
	if tagged && c.cache != nil && !(c.cfg.key && t.Key != "") {
		if q, unique, ok := c.cached(ctx, t, query, at, prepare); ok {
			st.Query, st.Unique = q, unique
			return st
		}
	}
	return c.general(ctx, st, query, at, prepare)
}

// general is Comment for what the cache does not cover (WithTag tags, a
// key, untagged statements, comments over the cap): it encodes every
// pair. It is a function of its own so that its local arrays (which hold
// pointers, so are zeroed when the function is entered) cost nothing on
// the cached path.
//
//go:noinline
func (c *Commenter) general(ctx context.Context, st Statement, query string, at int, prepare bool) Statement {
	t, tagged := st.Tags, st.Tagged
	// The per-request pairs, in key order (all sort after db_driver).
	// (Direct stores into local arrays, not append: no write barriers,
	// and nothing escapes.)
	var buf [16]pair
	n := 0
	if tagged {
		if c.cfg.key && t.Key != "" {
			buf[n] = pair{KeyKey, t.Key}
			n++
		}
		n = contextPairs(&buf, n, t)
	}
	var sc trace.SpanContext
	var ts string
	if c.cfg.trace && !prepare {
		if sc = trace.SpanContextFromContext(ctx); sc.IsValid() {
			ts = sc.TraceState().String()
			st.Unique = true
		}
	}
	if len(c.cfg.static) == 0 {
		// Fast path: the static pairs are encoded already, the others are in
		// order, and the comment surely fits the cap and the stack buffer.
		// Its pairs and the traceparent stay on the stack: fbuf is its own
		// array, filled by indexed stores, so that the traceparent never
		// meets an append (which would move it to the heap).
		var fbuf [8]pair
		var tp [55]byte
		m := 0
		for ; m < n; m++ {
			fbuf[m] = buf[m]
		}
		if sc.IsValid() {
			writeTraceparent(&tp, sc)
			fbuf[m] = pair{KeyTraceparent, unsafe.String(&tp[0], len(tp))}
			m++
			if ts != "" {
				fbuf[m] = pair{KeyTracestate, ts}
				m++
			}
		}
		fp := fbuf[:m]
		st.Unique = m > 0 // per-request pairs only in fbuf
		if len(fp) == 0 && c.prefix == "" {
			return st
		}
		if bound := len(c.prefix) + maxCommentLen(fp); bound <= c.cfg.maxLen && bound <= stackBuf {
			var tmp [stackBuf]byte
			w := renderAfter(tmp[:], c.prefix, fp)
			st.Query = spliceRendered(query, at, tmp[:w])
			return st
		}
	}
	return c.all(st, query, at, buf[:n], sc, ts)
}

// all is general's path for every pair: the context pairs ps, the trace
// context, the static pairs, the cap, a sort.
func (c *Commenter) all(st Statement, query string, at int, ps []pair, sc trace.SpanContext, ts string) Statement {
	if sc.IsValid() {
		ps = append(ps, pair{KeyTraceparent, traceparent(sc)})
		if ts != "" {
			ps = append(ps, pair{KeyTracestate, ts})
		}
	}
	var buf2 [16]pair
	all := buf2[:0]
	if c.cfg.application != "" {
		all = append(all, pair{KeyApplication, c.cfg.application})
	}
	if c.cfg.dbDriver != "" {
		all = append(all, pair{KeyDBDriver, c.cfg.dbDriver})
	}
	all = append(all, ps...)
	ps = append(all, c.cfg.static...)
	if len(ps) == 0 {
		return st
	}
	ps = c.fit(ps)
	st.Unique = false
	for _, p := range ps {
		switch p.k {
		case KeyKey, KeyRoute, KeyTenant, KeyTier, KeyTraceparent, KeyTracestate:
			st.Unique = true // a context tag or the trace context survived the cap
		}
	}
	if len(ps) == 0 {
		return st
	}
	sortPairs(ps)
	st.Query = splice(query, at, ps)
	return st
}

// cached is Comment for a tagged statement of a Commenter without WithTag
// tags, whose key is not written (the usual case): the comment comes from
// the cache when the tags are there, and is otherwise encoded straight
// from the tags; the trace pairs, if any, go after it. ok is false when
// the comment might not fit the cap; general takes it then.
func (c *Commenter) cached(ctx context.Context, t tenant.Tags, query string, at int, prepare bool) (q string, unique, ok bool) {
	var sc trace.SpanContext
	if c.cfg.trace && !prepare {
		sc = trace.SpanContextFromContext(ctx)
	}
	e := c.cache.get(c, t)
	if e == nil {
		return c.uncached(t, query, at, sc)
	}
	if !sc.IsValid() {
		if e.inner == "" {
			return query, false, true
		}
		return spliceRendered(query, at, unsafe.Slice(unsafe.StringData(e.comment), len(e.comment))), e.unique, true
	}
	return c.cachedTrace(query, at, e, sc)
}

// uncached is cached for tags that are not in the cache. (Functions of
// their own, uncached and cachedTrace keep their stack buffers, which are
// zeroed on entry, off the path of a cache hit.)
//
//go:noinline
func (c *Commenter) uncached(t tenant.Tags, query string, at int, sc trace.SpanContext) (q string, unique, ok bool) {
	var tmp [stackBuf]byte
	var ts string
	room := 2 // "*/"
	if sc.IsValid() {
		ts = sc.TraceState().String()
		room += traceRoom(ts)
	}
	w, unique := c.renderTags(tmp[:], t, room)
	if w < 0 {
		return "", false, false
	}
	if sc.IsValid() {
		w = writeTracePairs(tmp[:], w, w == 2, sc, ts)
		unique = true
	}
	if w == 2 {
		return query, false, true // no pair at all
	}
	tmp[w], tmp[w+1] = '*', '/'
	return spliceRendered(query, at, tmp[:w+2]), unique, true
}

// cachedTrace writes the trace pairs after a cached comment.
//
//go:noinline
func (c *Commenter) cachedTrace(query string, at int, e *cacheEntry, sc trace.SpanContext) (q string, unique, ok bool) {
	ts := sc.TraceState().String()
	cl := 2 + len(e.inner) + traceRoom(ts) + 2 // "/*", the pairs, "*/"
	if e.inner == "" {
		cl-- // no comma before the traceparent
	}
	if cl > c.cfg.maxLen {
		return "", false, false
	}
	if ts == "" {
		// The usual case: only a traceparent, which is hex digits and
		// dashes (so exactly cl bytes), written straight into the
		// statement's single allocation.
		b := make([]byte, len(query)+1+cl)
		i := copy(b, query[:at])
		b[i], b[i+1], b[i+2] = ' ', '/', '*'
		i += 3 + copy(b[i+3:], e.inner)
		i = writeTracePairs(b, i, e.inner == "", sc, "")
		b[i], b[i+1] = '*', '/'
		copy(b[i+2:], query[at:])
		return unsafe.String(&b[0], len(b)), true, true
	}
	if cl > stackBuf {
		return "", false, false
	}
	var tmp [stackBuf]byte
	tmp[0], tmp[1] = '/', '*'
	w := 2 + copy(tmp[2:], e.inner)
	w = writeTracePairs(tmp[:], w, e.inner == "", sc, ts)
	tmp[w], tmp[w+1] = '*', '/'
	return spliceRendered(query, at, tmp[:w+2]), true, true
}

// renderTags writes "/*", the static pairs and t's route, tenant and tier
// pairs (those set) at the start of b, without the closing "*/", and
// returns the length written and whether a pair of t is in it. The length
// is -1 when the comment, with room bytes more after these pairs, might
// not fit the cap or b.
func (c *Commenter) renderTags(b []byte, t tenant.Tags, room int) (int, bool) {
	tier := ""
	if t.Tier != tenant.TierUnset {
		tier = t.Tier.String()
	}
	// Each pair: ",key='" and "'" around a value of at most 3 bytes a byte.
	bound := 2 + len(c.prefix) + len(",route=''") + 3*len(t.Route) +
		len(",tenant=''") + 3*len(t.Tenant) + len(",tier=''") + 3*len(tier) + room
	if bound > c.cfg.maxLen || bound > len(b) {
		return -1, false
	}
	b[0], b[1] = '/', '*'
	i := 2 + copy(b[2:], c.prefix)
	n := i
	i = putPair(b, i, ",route='", t.Route)
	i = putPair(b, i, ",tenant='", t.Tenant)
	i = putPair(b, i, ",tier='", tier)
	return i, i > n
}

// putPair writes key (",k='", without the comma at a comment's start), v
// encoded and the closing quote at b[i:], and returns the index past them;
// nothing for an empty v. b[i:] must hold the pair at its longest and two
// more bytes (encodeInto's precondition).
func putPair(b []byte, i int, key, v string) int {
	if v == "" {
		return i
	}
	if i == 2 {
		key = key[1:]
	}
	i += copy(b[i:], key)
	i = encodeInto(b, i, v)
	b[i] = '\''
	return i + 1
}

// traceRoom is the longest the trace pairs can be, with their comma.
func traceRoom(ts string) int {
	n := len(",traceparent=''") + 55
	if ts != "" {
		n += len(",tracestate=''") + 3*len(ts)
	}
	return n
}

// writeTracePairs writes sc's traceparent and, when ts is not empty, the
// tracestate ts at b[i:] (first: no comma before), and returns the index
// past them. A traceparent is hex digits and dashes: nothing to encode.
func writeTracePairs(b []byte, i int, first bool, sc trace.SpanContext, ts string) int {
	k := ",traceparent='"
	if first {
		k = k[1:]
	}
	i += copy(b[i:], k)
	writeTraceparent((*[55]byte)(b[i:i+55]), sc)
	b[i+55] = '\''
	i += 56
	if ts != "" {
		i += copy(b[i:], ",tracestate='")
		i = encodeInto(b, i, ts)
		b[i] = '\''
		i++
	}
	return i
}

// contextPairs stores the route, tenant and tier pairs of t that are set at
// ps[n:], in key order, and returns the new count.
func contextPairs(ps *[16]pair, n int, t tenant.Tags) int {
	if t.Route != "" {
		ps[n] = pair{KeyRoute, t.Route}
		n++
	}
	if t.Tenant != "" {
		ps[n] = pair{KeyTenant, t.Tenant}
		n++
	}
	if t.Tier != tenant.TierUnset {
		ps[n] = pair{KeyTier, t.Tier.String()}
		n++
	}
	return n
}

// Dropped returns how many tags were left out so far to respect the cap.
func (c *Commenter) Dropped() uint64 { return c.dropped.Load() }

// Observing reports whether an Observer is set.
func (c *Commenter) Observing() bool { return c.cfg.observer != nil }

// Observe passes e to the Observer, if any.
func (c *Commenter) Observe(ctx context.Context, e Event) {
	if c.cfg.observer != nil {
		c.cfg.observer(ctx, e)
	}
}

// fit keeps the pairs that fit in cfg.maxLen, in priority order: a pair
// that would break the cap is left out (and counted) and the next ones are
// still tried, so one huge value costs only itself.
func (c *Commenter) fit(ps []pair) []pair {
	if maxCommentLen(ps) <= c.cfg.maxLen || commentLen(ps) <= c.cfg.maxLen {
		return ps
	}
	// Stable insertion sort by priority, highest priority first.
	for i := 1; i < len(ps); i++ {
		for j := i; j > 0 && priority(ps[j].k) < priority(ps[j-1].k); j-- {
			ps[j], ps[j-1] = ps[j-1], ps[j]
		}
	}
	kept := ps[:0]
	n := 3 // "/*" and "*/", less the comma the first pair does not need
	for _, p := range ps {
		if add := pairLen(p) + 1; n+add <= c.cfg.maxLen {
			n += add
			kept = append(kept, p)
			continue
		}
		c.dropped.Add(1)
		if c.drops != nil {
			c.drops.WithLabelValues(dropLabel(p.k)).Inc()
		}
	}
	return kept
}

// priority orders keys for the cap: lower is kept first.
func priority(k string) int {
	switch k {
	case KeyTenant:
		return 0
	case KeyRoute:
		return 1
	case KeyTier:
		return 2
	case KeyApplication:
		return 3
	case KeyDBDriver:
		return 4
	case KeyTraceparent:
		return 6
	case KeyTracestate:
		return 7
	case KeyKey:
		return 8
	}
	return 5 // WithTag tags
}

// dropLabel bounds the key label of the drop counter.
func dropLabel(k string) string {
	if builtinKey(k) {
		return k
	}
	return "other"
}

// traceparent formats sc as a W3C traceparent, version 00.
func traceparent(sc trace.SpanContext) string {
	var b [55]byte
	writeTraceparent(&b, sc)
	return string(b[:])
}

func writeTraceparent(b *[55]byte, sc trace.SpanContext) {
	b[0], b[1], b[2] = '0', '0', '-'
	tid, sid := sc.TraceID(), sc.SpanID()
	hex.Encode(b[3:35], tid[:])
	b[35] = '-'
	hex.Encode(b[36:52], sid[:])
	b[52] = '-'
	f := byte(sc.TraceFlags())
	b[53], b[54] = hexLower[f>>4], hexLower[f&15]
}

const hexLower = "0123456789abcdef"
