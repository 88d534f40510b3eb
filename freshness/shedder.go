package freshness

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/enforce"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/tenant"
)

// The request headers a client sends so that freshness rules can judge a
// GET, and the response header naming the rule that answered 304. Their
// names can be changed with WithCauseHeader and WithAppAgeHeader.
const (
	// HeaderCause carries why the request was made: push-notification,
	// app-open, generic-reload or interactive (case-insensitive; missing
	// or unknown is interactive, which is never shed).
	HeaderCause = "Qtop-Request-Cause"
	// HeaderAppAge carries the seconds since the app was opened (a
	// decimal number ≥ 0, at most 16 bytes).
	HeaderAppAge = "Qtop-App-Age"
	// HeaderShedRule is set on a 304 a freshness rule answered, to the
	// rule's ID.
	HeaderShedRule = "Qtop-Shed-Rule"
)

// Bounds of the freshness middleware.
const (
	// MaxFreshRoutes bounds the route label values (WithRoutes);
	// later routes count as "other".
	MaxFreshRoutes = 256
	// maxRuleIDs bounds the rule label values over a process's life;
	// later IDs count as "other".
	maxRuleIDs = 32
	// DefaultMaxBody is the largest response buffered to be hashed; a
	// larger one streams through without an ETag.
	DefaultMaxBody = 1 << 20
	// DefaultMaxSamples bounds the waste samples kept per report window.
	DefaultMaxSamples = 4096
)

// Shedder answers a GET whose client already holds a recent copy with
// 304 Not Modified, without running the handler, when a rule of the
// freshness policy says so and the process is overloaded. It also signs
// every 200 GET response it buffers with a freshness ETag (response hash
// and computed-at, see ETagSigner), answers 304 when the new response's
// hash equals the client's, measures each shadow rule's precision, and
// samples callers to measure how many GETs repeat an identical response.
//
// Put it outermost, in front of the enforce Middleware, so that a 304 it
// serves costs no RU and no queue slot:
//
//	fresh.Wrap(mw.Wrap(handler))
//
// Make one with New; safe for concurrent use.
type Shedder struct {
	cfg    freshConfig
	signer *ETagSigner
	pol    atomic.Pointer[freshPolicy]
	polMu  sync.Mutex

	routeMu  sync.Mutex
	routes   atomic.Pointer[map[string]int]
	routeTab []string // index → route, append-only under routeMu
	ruleMu   sync.Mutex
	ruleIdx  map[string]int
	ruleTab  []string

	gets    []atomic.Uint64 // per route
	revalid []atomic.Uint64 // per route: 304s because the hash matched
	cells   []freshCell     // [rule][route]

	sampleMu   sync.Mutex
	samples    []Sample
	sampleDrop atomic.Uint64
	lastOver   atomic.Int64 // wall clock (unix ns) of the last overload seen
	drainMu    sync.Mutex
	prev       freshTotals
	overNow    atomic.Bool
	bufs       sync.Pool
}

type freshCell struct {
	matched, served, right, wrong atomic.Uint64
}

type freshConfig struct {
	local       policy.Freshness
	overload    func() bool
	hold        time.Duration
	wall        func() time.Time
	causeHdr    string
	appAgeHdr   string
	route       func(*http.Request) string
	caller      func(*http.Request) string
	sampleEvery uint64
	maxSamples  int
	maxBody     int
	maxRoutes   int
	now         func() time.Time
	reg         prometheus.Registerer
}

// Option configures New.
type Option func(*freshConfig)

// WithRules sets the freshness policy used until the collector's
// policy carries one (ApplyPolicy); default none.
func WithRules(f policy.Freshness) Option {
	return func(c *freshConfig) { c.local = f }
}

// WithOverload sets what says the process is overloaded now; armed
// non-shadow rules apply then, and for the hold time after (or while a
// batch is forced). Default: never, so only a forced batch applies.
func WithOverload(f func() bool) Option {
	return func(c *freshConfig) { c.overload = f }
}

// WithOverloadOf says the process is overloaded when e's latency-ratio
// price controller has escalated at all, or q (which may be nil) reports
// CoDel dropping or a standing queue.
func WithOverloadOf(e *enforce.Enforcer, q *enforce.Queue) Option {
	return WithOverload(func() bool {
		return (e != nil && e.Price().Level() > 0) || (q != nil && q.Overloaded())
	})
}

// WithOverloadHold keeps the armed rules applied for d after the last
// request that found the process overloaded (default 10 s), so that
// shedding does not stop the moment it has drained the queue it relieved.
func WithOverloadHold(d time.Duration) Option { return func(c *freshConfig) { c.hold = d } }

// WithOverloadClock sets the clock of the overload hold and of a forced
// batch's end (default time.Now). It is apart from WithClock,
// which dates ETags: a replay moves that one through a trace.
func WithOverloadClock(now func() time.Time) Option {
	return func(c *freshConfig) { c.wall = now }
}

// WithCauseHeader and WithAppAgeHeader rename the request headers
// (defaults HeaderCause and HeaderAppAge).
func WithCauseHeader(name string) Option { return func(c *freshConfig) { c.causeHdr = name } }
func WithAppAgeHeader(name string) Option {
	return func(c *freshConfig) { c.appAgeHdr = name }
}

// WithRouteFunc sets a request's route name, the route of rules,
// metrics and samples (default: r.Pattern, else the route of the tenant
// tags in the context, else "other"; a route really named "other", or
// one that is not a valid tag value, as tenant.SubstituteRoute names it). At most WithRoutes distinct names are
// kept; later ones count as "other", as does a route f names "other".
func WithRouteFunc(f func(*http.Request) string) Option {
	return func(c *freshConfig) { c.route = f }
}

// WithRoutes bounds the distinct route names (default 32, at most
// MaxFreshRoutes).
func WithRoutes(n int) Option { return func(c *freshConfig) { c.maxRoutes = n } }

// WithCallerFunc sets who a request is from, for sampling (default: the
// tenant and key of the tags in the context, else the Authorization
// header; a request with no caller is never sampled). Only a keyed hash
// of it ever leaves the process.
func WithCallerFunc(f func(*http.Request) string) Option {
	return func(c *freshConfig) { c.caller = f }
}

// WithSampling follows 1 caller in n (by a keyed hash of the caller, so a
// sampled caller is followed over time): each of its 200 GETs records
// route, caller hash, response hash and time — never the response or the
// caller itself — for the collector's repeat-share report. 0 (default)
// samples nothing; 1 samples everyone.
func WithSampling(n int) Option {
	return func(c *freshConfig) { c.sampleEvery = uint64(max(n, 0)) }
}

// WithMaxSamples bounds the samples kept between two Drain calls (default
// DefaultMaxSamples); beyond it samples are dropped and counted.
func WithMaxSamples(n int) Option { return func(c *freshConfig) { c.maxSamples = n } }

// WithMaxBody sets the largest response buffered to be hashed (default
// DefaultMaxBody).
func WithMaxBody(n int) Option { return func(c *freshConfig) { c.maxBody = n } }

// WithClock sets the clock (default time.Now).
func WithClock(now func() time.Time) Option {
	return func(c *freshConfig) { c.now = now }
}

// WithRegisterer exports qtop_freshness_* metrics on reg.
func WithRegisterer(reg prometheus.Registerer) Option {
	return func(c *freshConfig) { c.reg = reg }
}

// New returns the freshness middleware, signing ETags with
// signer. Every process that serves the same resources must share the
// signer's key, or ETags from the others are never trusted (and never
// shed).
func New(signer *ETagSigner, opts ...Option) (*Shedder, error) {
	c := freshConfig{causeHdr: HeaderCause, appAgeHdr: HeaderAppAge, maxSamples: DefaultMaxSamples,
		maxBody: DefaultMaxBody, maxRoutes: 32, now: time.Now, wall: time.Now, hold: 10 * time.Second}
	for _, o := range opts {
		o(&c)
	}
	switch {
	case signer == nil:
		return nil, fmt.Errorf("%w: nil etag signer", ErrConfig)
	case c.now == nil || c.wall == nil:
		return nil, fmt.Errorf("%w: nil clock", ErrConfig)
	case c.hold < 0:
		return nil, fmt.Errorf("%w: overload hold %v", ErrConfig, c.hold)
	case c.maxRoutes < 1 || c.maxRoutes > MaxFreshRoutes:
		return nil, fmt.Errorf("%w: fresh routes %d (want 1 to %d)", ErrConfig, c.maxRoutes, MaxFreshRoutes)
	case c.maxSamples < 0 || c.maxSamples > 1<<20:
		return nil, fmt.Errorf("%w: max samples %d (want 0 to %d)", ErrConfig, c.maxSamples, 1<<20)
	case c.maxBody < 0:
		return nil, fmt.Errorf("%w: max body %d", ErrConfig, c.maxBody)
	case c.causeHdr == "" || c.appAgeHdr == "":
		return nil, fmt.Errorf("%w: empty header name", ErrConfig)
	}
	if err := c.local.Validate(); err != nil {
		return nil, fmt.Errorf("freshness: rules: %w", err)
	}
	if c.route == nil {
		c.route = defaultRoute
	}
	if c.caller == nil {
		c.caller = defaultCaller
	}
	f := &Shedder{cfg: c, signer: signer, ruleIdx: map[string]int{}}
	nr := c.maxRoutes + 1
	f.gets = make([]atomic.Uint64, nr)
	f.revalid = make([]atomic.Uint64, nr)
	f.cells = make([]freshCell, (maxRuleIDs+1)*nr)
	empty := map[string]int{}
	f.routes.Store(&empty)
	f.routeTab = []string{OtherRouteName}
	f.prev = f.totals()
	f.bufs.New = func() any { b := make([]byte, 0, 4096); return &b }
	f.install(&c.local, false)
	if c.reg != nil {
		if err := c.reg.Register(&freshMetrics{f: f}); err != nil {
			return nil, fmt.Errorf("freshness: register metrics: %w", err)
		}
	}
	return f, nil
}

// OtherRouteName is the route of requests beyond the route bound.
const OtherRouteName = "other"

// defaultRoute names a request's route as the meter's rows name it
// (tenant.SubstituteRoute): a route really named like the overflow route,
// or one that is not a valid tag value (too long, unprintable), is its
// stand-in, so that it is never counted in OtherRouteName.
func defaultRoute(r *http.Request) string {
	route := r.Pattern
	if route == "" {
		if t, ok := tenant.From(r.Context()); ok {
			route = t.Route
		}
	}
	if route == "" {
		return OtherRouteName
	}
	name, _ := tenant.SubstituteRoute(route)
	return name
}

func defaultCaller(r *http.Request) string {
	if t, ok := tenant.From(r.Context()); ok && t.Tenant != "" {
		return t.Tenant + "\x00" + t.Key
	}
	return r.Header.Get("Authorization")
}

// freshPolicy is a freshness policy compiled for the request path.
type freshPolicy struct {
	src    policy.Freshness
	remote bool // from the collector
	rules  []freshRule
}

type freshRule struct {
	idx       int // rule label index
	id        string
	cause     policy.Cause
	maxAge    time.Duration // 0: any
	maxAppAge time.Duration // 0: any
	route     string
	shadow    bool
}

func (f *Shedder) ruleIndex(id string) int {
	f.ruleMu.Lock()
	defer f.ruleMu.Unlock()
	if i, ok := f.ruleIdx[id]; ok {
		return i
	}
	if len(f.ruleTab) >= maxRuleIDs {
		return maxRuleIDs // "other"
	}
	f.ruleIdx[id] = len(f.ruleTab)
	f.ruleTab = append(f.ruleTab, id)
	return len(f.ruleTab) - 1
}

func (f *Shedder) ruleName(i int) string {
	f.ruleMu.Lock()
	defer f.ruleMu.Unlock()
	if i < len(f.ruleTab) {
		return f.ruleTab[i]
	}
	return "other"
}

func (f *Shedder) install(src *policy.Freshness, remote bool) {
	p := &freshPolicy{src: *src, remote: remote}
	p.src.Rules = append([]policy.FreshnessRule(nil), src.Rules...)
	for _, r := range src.Armed() {
		p.rules = append(p.rules, freshRule{idx: f.ruleIndex(r.ID), id: r.ID, cause: r.Cause,
			maxAge:    time.Duration(r.MaxAgeSeconds * float64(time.Second)),
			maxAppAge: time.Duration(r.MaxAppAgeSeconds * float64(time.Second)),
			route:     tenant.EscapeValue(r.Route), shadow: r.Shadow}) // a rule for route "other" is that route's
	}
	f.pol.Store(p)
}

// ApplyPolicy installs the freshness part of the collector's policy; a
// policy without one puts back the rules of WithRules. An invalid
// freshness part is ignored (the rules in force stay). Wire it with the
// Enforcer's to the reporter's policy callback.
func (f *Shedder) ApplyPolicy(p policy.Policy) {
	f.polMu.Lock()
	defer f.polMu.Unlock()
	if p.Freshness == nil {
		if f.pol.Load().remote {
			f.install(&f.cfg.local, false)
		}
		return
	}
	if p.Freshness.Validate() != nil {
		return
	}
	f.install(p.Freshness, true)
}

// Policy returns the freshness policy in force.
func (f *Shedder) Policy() policy.Freshness { return f.pol.Load().src }

// Active reports whether armed non-shadow rules apply now: the batch is
// forced, or the process is overloaded or was within the hold time.
func (f *Shedder) Active() bool {
	p := f.pol.Load()
	if len(p.rules) == 0 {
		return false
	}
	now := f.cfg.wall()
	on := p.src.Forced(now)
	if !on && f.cfg.overload != nil {
		n := now.UnixNano()
		if f.cfg.overload() {
			f.lastOver.Store(n)
			on = true
		} else if last := f.lastOver.Load(); last != 0 && n-last < int64(f.cfg.hold) && n >= last {
			on = true
		}
	}
	f.overNow.Store(on)
	return on
}

func (f *Shedder) routeIndex(route string) int {
	if i, ok := (*f.routes.Load())[route]; ok {
		return i
	}
	if route == OtherRouteName || len(route) > 256 {
		return 0
	}
	f.routeMu.Lock()
	defer f.routeMu.Unlock()
	cur := *f.routes.Load()
	if i, ok := cur[route]; ok {
		return i
	}
	if len(f.routeTab) > f.cfg.maxRoutes {
		return 0
	}
	m := make(map[string]int, len(cur)+1)
	for k, v := range cur {
		m[k] = v
	}
	i := len(f.routeTab)
	m[strings.Clone(route)] = i
	f.routeTab = append(f.routeTab, strings.Clone(route))
	f.routes.Store(&m)
	return i
}

func (f *Shedder) cell(rule, route int) *freshCell {
	return &f.cells[rule*(f.cfg.maxRoutes+1)+route]
}

// Wrap returns next behind the freshness stage.
func (f *Shedder) Wrap(next http.Handler) http.Handler { return &Stage{F: f, Next: next} }

// Stage is the freshness decorator: GETs go through F, anything
// else straight to Next.
type Stage struct {
	F    *Shedder
	Next http.Handler
}

// parseAppAge reads the app-age header: seconds ≥ 0, at most 16 bytes.
func parseAppAge(s string) (time.Duration, bool) {
	if s == "" || len(s) > 16 {
		return 0, false
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || !(v >= 0) || v > 1e9 {
		return 0, false
	}
	return time.Duration(v * float64(time.Second)), true
}

// request is what the stage knows of one GET before running the handler.
type freshRequest struct {
	cause      policy.Cause
	appAge     time.Duration
	hasAppAge  bool
	etag       string
	clientHash uint64
	age        time.Duration
	hasETag    bool
}

func (r *freshRule) matches(q *freshRequest, route string) bool {
	if !q.hasETag || q.cause != r.cause || (r.route != "" && r.route != route) {
		return false
	}
	if r.maxAge > 0 && q.age > r.maxAge {
		return false
	}
	if r.maxAppAge > 0 && (!q.hasAppAge || q.appAge > r.maxAppAge) {
		return false
	}
	return true
}

func (s *Stage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		s.Next.ServeHTTP(w, r)
		return
	}
	f := s.F
	now := f.cfg.now()
	resource := r.URL.RequestURI()
	route := f.cfg.route(r)
	ri := f.routeIndex(route)
	f.gets[ri].Add(1)

	var q freshRequest
	q.etag, q.clientHash, q.age, q.hasETag = f.verify(resource, r.Header.Get("If-None-Match"), now)
	p := f.pol.Load()
	shadow, served := f.shed(w, r, &q, p, route, ri)
	if served {
		return
	}

	bp := f.bufs.Get().(*[]byte)
	fw := freshWriter{w: w, buf: (*bp)[:0], max: f.cfg.maxBody}
	defer func() {
		*bp = fw.buf[:0]
		if cap(*bp) <= 4*DefaultMaxBody {
			f.bufs.Put(bp)
		}
	}()
	s.Next.ServeHTTP(&fw, r)
	if fw.passthrough {
		return
	}
	if !fw.wroteHeader {
		fw.code = http.StatusOK
	}
	if fw.code != http.StatusOK {
		fw.flushAll()
		return
	}
	h := ResponseHash(fw.buf)
	for i := range p.rules {
		if shadow&(1<<i) == 0 {
			continue
		}
		c := f.cell(p.rules[i].idx, ri)
		if h == q.clientHash {
			c.right.Add(1)
		} else {
			c.wrong.Add(1)
		}
	}
	f.sample(r, now, route, h)
	hdr := w.Header()
	if hdr.Get("ETag") != "" {
		// The handler has its own validators: leave them alone.
		fw.flushAll()
		return
	}
	hdr.Set("ETag", f.signer.Sign(resource, h, now))
	if q.hasETag && h == q.clientHash {
		f.revalid[ri].Add(1)
		hdr.Del("Content-Length")
		hdr.Del("Content-Type")
		w.WriteHeader(http.StatusNotModified)
		return
	}
	fw.flushAll()
}

// shed answers 304 from the first armed rule that matches the request,
// while the process is overloaded (served true); shadow has bit i set
// for each rule i of p that matched in shadow mode.
func (f *Shedder) shed(w http.ResponseWriter, r *http.Request, q *freshRequest, p *freshPolicy, route string, ri int) (shadow uint32, served bool) {
	if q.hasETag && len(p.rules) > 0 {
		q.cause = policy.ParseCause(r.Header.Get(f.cfg.causeHdr))
		if q.cause.Sheddable() {
			q.appAge, q.hasAppAge = parseAppAge(r.Header.Get(f.cfg.appAgeHdr))
			active := -1 // 0: not yet asked, 1: active
			for i := range p.rules {
				rule := &p.rules[i]
				if !rule.matches(q, route) {
					continue
				}
				c := f.cell(rule.idx, ri)
				c.matched.Add(1)
				if rule.shadow {
					shadow |= 1 << i
					continue
				}
				if active < 0 {
					active = 0
					if f.Active() {
						active = 1
					}
				}
				if active == 1 {
					c.served.Add(1)
					h := w.Header()
					h.Set("ETag", q.etag)
					h.Set(HeaderShedRule, rule.id)
					w.WriteHeader(http.StatusNotModified)
					return shadow, true
				}
			}
		}
	}
	return shadow, false
}

// verify reads If-None-Match and returns the client's ETag, its hash and
// the age of its copy (negative ages, from clock skew, count as 0).
func (f *Shedder) verify(resource, inm string, now time.Time) (string, uint64, time.Duration, bool) {
	if inm == "" {
		return "", 0, 0, false
	}
	etag, h, at, ok := f.signer.VerifyIfNoneMatch(resource, inm)
	if !ok {
		return "", 0, 0, false
	}
	return etag, h, max(now.Sub(at), 0), true
}

// freshWriter buffers a response up to max bytes so that it can be
// hashed before its header goes out; a response that grows beyond max, is
// flushed, or is not a 200 goes through unbuffered.
type freshWriter struct {
	w           http.ResponseWriter
	code        int
	wroteHeader bool
	passthrough bool
	buf         []byte
	max         int
}

var _ http.Flusher = (*freshWriter)(nil)

func (fw *freshWriter) Header() http.Header { return fw.w.Header() }

func (fw *freshWriter) WriteHeader(code int) {
	if fw.wroteHeader || fw.passthrough {
		if fw.passthrough && !fw.wroteHeader {
			fw.wroteHeader = true
			fw.w.WriteHeader(code)
		}
		return
	}
	if code >= 100 && code < 200 {
		fw.w.WriteHeader(code)
		return
	}
	fw.code, fw.wroteHeader = code, true
	if code != http.StatusOK {
		fw.passthrough = true
		fw.w.WriteHeader(code)
	}
}

func (fw *freshWriter) Write(b []byte) (int, error) {
	if !fw.wroteHeader {
		fw.WriteHeader(http.StatusOK)
	}
	if fw.passthrough {
		return fw.w.Write(b)
	}
	if len(fw.buf)+len(b) > fw.max {
		if err := fw.commit(); err != nil {
			return 0, err
		}
		return fw.w.Write(b)
	}
	fw.buf = append(fw.buf, b...)
	return len(b), nil
}

// commit sends the header and what is buffered, and goes unbuffered.
func (fw *freshWriter) commit() error {
	fw.passthrough = true
	if !fw.wroteHeader {
		fw.wroteHeader, fw.code = true, http.StatusOK
	}
	fw.w.WriteHeader(fw.code)
	if len(fw.buf) > 0 {
		if _, err := fw.w.Write(fw.buf); err != nil {
			return err
		}
	}
	return nil
}

// flushAll writes out a buffered response.
func (fw *freshWriter) flushAll() {
	if !fw.passthrough {
		_ = fw.commit()
	}
}

func (fw *freshWriter) Flush() {
	if !fw.passthrough {
		_ = fw.commit()
	}
	if fl, ok := fw.w.(http.Flusher); ok {
		fl.Flush()
	}
}

// Unwrap returns the wrapped writer, for http.ResponseController.
func (fw *freshWriter) Unwrap() http.ResponseWriter { return fw.w }
