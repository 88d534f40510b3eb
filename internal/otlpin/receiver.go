package otlpin

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/qtop-dev/qtop/meter"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/tenant"
)

// Result is what became of an accepted request.
type Result struct {
	// Spans is the number of spans in the request.
	Spans int
	// Rejected counts spans refused alone (a zero start or an end before
	// the start, a value beyond a record's bounds: see check); the client
	// must not send them again. The request's other spans are recorded.
	Rejected int
	// Message says why spans were rejected (empty when none were).
	Message string
}

// Limits of one request and of the retry queues.
const (
	// MaxSpans bounds the spans of one request (the records of a request
	// are buffered until it has been read whole, so that a malformed
	// request records nothing).
	MaxSpans = 200_000
	// maxQueue bounds the reports one source keeps for a retry while the
	// collector refuses them; maxBacklog is the total at which requests
	// are answered "busy, retry later".
	maxQueue   = 30
	maxBacklog = 16
	// idleSource is how long a source without spans keeps its window.
	idleSource = 5 * time.Minute
	// otherService names the source that takes the spans of services
	// beyond WithMaxSources.
	otherService = "other"
)

// Receiver turns OTLP trace export requests into qtop load records and
// hands them, as one report per source and interval, to a Sink. Create it
// with New; serve it with ServeHTTP (POST /v1/traces) and RegisterGRPC;
// Start its flush loop; stop it with Shutdown. Calls after Shutdown are
// refused with ErrShutdown.
type Receiver struct {
	cfg     config
	sink    report.Consumer
	met     *metrics
	sem     chan struct{} // decode slots (admit.go)
	large   chan struct{} // the one slot of large messages
	mem     *memBudget
	mappers sync.Pool
	chunks  sync.Pool // of a request's records (reqState)
	// largeBufs holds the buffer of large gRPC messages (grpc.go).
	largeBufs sync.Pool
	// meters holds the byte count of each gRPC connection served on
	// GRPCListener (grpcrate.go).
	meters sync.Map

	mu      sync.Mutex
	sources map[string]*source
	traces  *traceCache
	wait    *waitList
	backlog int
	closed  bool

	flushMu sync.Mutex
	refusal refusals // what the sink refused for now (flushMu)
	stop    chan struct{}
	wg      sync.WaitGroup
	once    sync.Once
}

// refusals is what the receiver tells of the windows the sink refuses
// for now: the last reason, and when it last logged dropping one.
type refusals struct {
	last     error
	loggedAt time.Time
}

// source is one sending process (service.name, service.instance.id,
// host.name) with its window.
type source struct {
	service string // its service.name, as reported
	rec     *meter.Recorder
	seq     uint64
	queue   []*report.Report
	last    time.Time // of its last span
	empty   bool      // its last cut held no row
	pool    poolWaits // connection-pool spans of the window (costs.go)
}

// New returns a receiver that merges through sink. It returns ErrInvalid
// for an option out of range.
func New(sink report.Consumer, opts ...Option) (*Receiver, error) {
	if sink == nil {
		return nil, fmt.Errorf("%w: nil sink", ErrInvalid)
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if cfg.instance == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		cfg.instance = hex.EncodeToString(b[:])
	}
	r := &Receiver{
		cfg:     cfg,
		sink:    sink,
		sem:     make(chan struct{}, cfg.inflight),
		large:   make(chan struct{}, 1),
		mem:     newMemBudget(cfg.memory),
		sources: make(map[string]*source),
		traces:  newTraceCache(cfg.maxTraces, max(cfg.traceWait, time.Second)),
		wait:    newWaitList(cfg.maxWaiting),
		stop:    make(chan struct{}),
	}
	r.largeBufs.New = func() any { return new(bytes.Buffer) }
	dbIv := newDBIntervals(cfg.maxTraces)
	r.chunks.New = func() any { return new([chunkLen]pend) }
	r.mappers.New = func() any {
		return &mapper{tenantAttr: cfg.tenantAttr, model: cfg.model, dbIv: dbIv, req: reqState{pool: &r.chunks}}
	}
	if r.met, err = newMetrics(cfg.reg); err != nil {
		return nil, err
	}
	return r, nil
}

// Retry delays asked of clients: briefly while every decode slot is
// taken, longer while the collector refuses reports or is shutting down.
const (
	retrySlots = time.Second
	retryLater = 5 * time.Second
)

// pend is a record of a request, kept until the request has been read
// whole.
type pend struct {
	src  *source
	rec  meter.Record
	id   traceID
	wait bool // a DB span whose tenant is its trace's
}

type rootAt struct {
	id traceID
	r  root
}

// reqState is the per-request scratch space, pooled with the mapper. The
// records are kept in chunks, so that a large request is never copied
// while it grows; the chunks beyond the few a mapper keeps come from, and
// go back to, the receiver's pool (a large request's 200 of them are
// reused by the next one instead of being allocated and collected).
type reqState struct {
	chunks [][]pend
	n      int
	roots  []rootAt
	key    []byte
	pool   *sync.Pool // of *[chunkLen]pend
}

const chunkLen = 1024

func (st *reqState) add(p pend) {
	c := st.n / chunkLen
	if c == len(st.chunks) {
		st.chunks = append(st.chunks, st.pool.Get().(*[chunkLen]pend)[:])
	}
	st.chunks[c][st.n%chunkLen] = p
	st.n++
}

// each calls fn with every record added, in order.
func (st *reqState) each(fn func(*pend)) {
	for i := range st.n {
		fn(&st.chunks[i/chunkLen][i%chunkLen])
	}
}

// reset drops the references to strings and sources, and keeps up to
// maxKeptChunks chunks for the next request.
func (st *reqState) reset() {
	for i := 0; i*chunkLen < st.n; i++ {
		clear(st.chunks[i])
	}
	st.n = 0
	if len(st.chunks) > maxKeptChunks {
		for i, c := range st.chunks[maxKeptChunks:] {
			st.pool.Put((*[chunkLen]pend)(c))
			st.chunks[maxKeptChunks+i] = nil
		}
		st.chunks = st.chunks[:maxKeptChunks]
	}
	st.roots = st.roots[:0]
}

const maxKeptChunks = 8

// Consume maps one ExportTraceServiceRequest in protobuf encoding
// (decompressed) and records its spans. A malformed body records nothing
// and returns ErrMalformed; a body of more than MaxSpans spans, ErrTooLarge.
func (r *Receiver) Consume(body []byte) (Result, error) {
	if int64(len(body)) > r.cfg.maxDecoded {
		return Result{}, fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, len(body), r.cfg.maxDecoded)
	}
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return Result{}, ErrShutdown
	}
	if int64(len(body)) >= r.cfg.largeMsg {
		// Counted before anything is mapped: a request refused for its
		// number of spans costs a walk of its framing, not its decode.
		if n, err := countSpans(body); err != nil || n > MaxSpans {
			return Result{}, cmp.Or(err, fmt.Errorf("%w: %d spans in one request, at most %d; send smaller batches", ErrTooLarge, n, MaxSpans))
		}
	}
	now := r.cfg.clock()
	m := r.mappers.Get().(*mapper)
	defer r.mappers.Put(m)
	st := &m.req
	st.reset()
	defer st.reset()
	var t tally
	err := r.mapRequest(m, body, now, &t)
	invalid := m.in.invalid
	m.in.invalid = 0
	if err != nil {
		return Result{}, err
	}
	t.res.Message = rejectMessage(&t.why)
	r.attributeWaiting(st, now, &t)
	st.each(func(p *pend) {
		if !p.wait {
			p.src.rec.Record(p.rec)
		}
	})
	r.met.add(&t.counts, invalid, t.unattributed)
	r.met.addRejects(&t.why)
	r.met.addSkewed(&t.skewed)
	return t.res, nil
}

// countSpans counts the spans of an export request from its framing
// alone (resource spans, scope spans, spans).
func countSpans(body []byte) (int, error) {
	n := 0
	err := eachLen(body, fReqResourceSpans, func(rs []byte) error {
		return eachLen(rs, fRSScopeSpans, func(ss []byte) error {
			return eachLen(ss, fSSSpans, func([]byte) error { n++; return nil })
		})
	})
	return n, err
}

// tally counts one request's spans: by result, by reason of refusal, the
// DB spans left without a tenant, and the spans whose clock is wrong.
type tally struct {
	counts       [numResults]uint64
	why          [numRejects]int
	res          Result
	unattributed uint64
	skewed       [numSkews]uint64
}

// mapRequest walks the request's spans and maps each into m.req: the
// records and the roots of traces it saw. It records nothing.
func (r *Receiver) mapRequest(m *mapper, body []byte, now time.Time, t *tally) error {
	var (
		sp  rawSpan
		out mapped
	)
	return eachLen(body, fReqResourceSpans, func(rs []byte) error {
		src, resTenant, err := r.resource(m, rs, now)
		if err != nil {
			return err
		}
		gated := r.cfg.hooks.gated != nil && r.cfg.hooks.gated(src.service)
		return eachLen(rs, fRSScopeSpans, func(ss []byte) error {
			return eachLen(ss, fSSSpans, func(b []byte) error {
				if t.res.Spans++; t.res.Spans > MaxSpans {
					return fmt.Errorf("%w: more than %d spans in one request; send smaller batches", ErrTooLarge, MaxSpans)
				}
				if err := readSpan(b, &sp, &m.attrs); err != nil {
					return err
				}
				what, err := m.span(&sp, resTenant, &out)
				if err != nil {
					return err
				}
				if what == resRequest && gated {
					what = resGated
				}
				if what != resDropped && what != resRejected {
					if dir := skewOf(sp.end, now, r.cfg.skew); dir != skewNone {
						t.skewed[dir]++
						out.rec.Time = now // where it counts, as every span
					}
				}
				t.add(&m.req, what, src, &sp, &out)
				return nil
			})
		})
	})
}

// add counts one mapped span and keeps its record (and its trace's root,
// for a tagged request or job span) in st.
func (t *tally) add(st *reqState, what int, src *source, sp *rawSpan, out *mapped) {
	t.counts[what]++
	switch what {
	case resRequest, resJob, resDB, resGated:
		if what != resGated { // a gated request: its gate counted it
			st.add(pend{src: src, rec: out.rec})
		}
		if what != resDB && out.tagged {
			if id, ok := toTraceID(sp.traceID); ok {
				st.roots = append(st.roots, rootAt{id, root{out.rec.Tags.Tenant, out.rec.Tags.Tier}})
			}
		}
	case resDBWaiting:
		p := pend{src: src, rec: out.rec}
		p.id, p.wait = toTraceID(sp.traceID)
		if !p.wait { // no trace id to find a root by
			p.rec.Tags.Tenant = report.UnknownTenant
			t.unattributed++
		}
		st.add(p)
	case resRejected:
		t.res.Rejected++
		t.why[out.why]++
	}
}

// attributeWaiting, under the receiver's lock, remembers the request's
// roots, records the waiting DB spans of earlier requests they resolve,
// and gives this request's DB spans their trace's tenant: from a root
// already seen, later (parked in the wait list), or none (unknown).
func (r *Receiver) attributeWaiting(st *reqState, now time.Time, t *tally) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rt := range st.roots {
		r.traces.put(rt.id, rt.r, now)
		r.wait.resolve(rt.id, func(w *waiting) {
			attribute(&w.rec, rt.r)
			w.src.rec.Record(w.rec)
		})
	}
	st.each(func(p *pend) {
		if !p.wait {
			return
		}
		if rt, ok := r.traces.get(p.id, now); ok {
			attribute(&p.rec, rt)
			p.wait = false
			return
		}
		if r.cfg.traceWait > 0 && !r.wait.full() {
			r.wait.add(p.id, waiting{rec: p.rec, src: p.src, deadline: now.Add(r.cfg.traceWait)})
			return
		}
		p.rec.Tags.Tenant = report.UnknownTenant
		p.wait = false
		t.unattributed++
	})
	r.met.waiting.Set(float64(r.wait.len()))
}

// attribute gives a DB record its trace's tenant (and tier, unless its own
// comment set one).
func attribute(rec *meter.Record, rt root) {
	rec.Tags.Tenant = rt.tenant
	if rec.Tags.Tier == tenant.TierUnset {
		rec.Tags.Tier = rt.tier
	}
}

// resource reads a ResourceSpans' resource attributes and returns its
// source and its tenant.id (for spans without their own).
func (r *Receiver) resource(m *mapper, rs []byte, now time.Time) (*source, string, error) {
	var svc, inst, host, tn []byte
	err := eachLen(rs, fRSResource, func(res []byte) error {
		return eachLen(res, fResAttributes, func(kv []byte) error {
			k, v, err := keyValue(kv)
			if err != nil {
				return err
			}
			if string(k) == r.cfg.tenantAttr {
				tn, _ = m.in.tenantValue(v)
			}
			if v.which != fAnyString {
				return nil
			}
			switch string(k) {
			case attrServiceName:
				svc = v.str
			case attrServiceInstance:
				inst = v.str
			case attrHostName:
				host = v.str
			}
			return nil
		})
	})
	if err != nil {
		return nil, "", err
	}
	resTenant := ""
	if len(tn) > 0 {
		resTenant = m.in.tenant(tn)
	}
	if len(svc) == 0 {
		svc = []byte("unknown_service")
	}
	key := append(append(append(append(append(m.req.key[:0], svc...), 0), inst...), 0), host...)
	m.req.key = key
	r.mu.Lock()
	defer r.mu.Unlock()
	src := r.sources[string(key)]
	if src == nil {
		if len(r.sources) >= r.cfg.maxSources {
			key = append(m.req.key[:0], otherService+"\x00\x00"...)
			if src = r.sources[string(key)]; src == nil {
				src = r.newSourceLocked(report.Source{Service: otherService})
				r.sources[string(key)] = src
			}
		} else {
			src = r.newSourceLocked(report.Source{
				Service:  m.field(svc, "unknown_service"),
				Instance: m.field(inst, ""),
				Host:     m.field(host, ""),
			})
			r.sources[string(key)] = src
		}
		r.met.sources.Set(float64(len(r.sources)))
	}
	src.last = now
	m.src = src
	return src, resTenant, nil
}

// field validates a source field as the collector does a route; an
// invalid one is replaced by def and counted.
func (m *mapper) field(b []byte, def string) string {
	if len(b) == 0 {
		return def
	}
	s := string(b)
	if tenant.ValidateRoute(s) != nil {
		m.in.invalid++
		return def
	}
	return s
}

func (r *Receiver) newSourceLocked(s report.Source) *source {
	// The instance carries this receiver's id: a collector restarted on the
	// same data directory replays the sequence numbers it merged before, and
	// must not take this receiver's new windows for them.
	s.Instance = s.Instance + "~otlp-" + r.cfg.instance
	rec, err := r.newRecorder(s)
	if err != nil {
		// Only a source the recorder refuses gets here (the fields are
		// checked before): its spans count for the overflow service.
		r.cfg.log.Warn("otlp: source refused, counted as "+otherService, "service", s.Service, "err", err)
		if rec, err = r.newRecorder(report.Source{Service: otherService, Instance: "~otlp-" + r.cfg.instance}); err != nil {
			panic("otlpin: recorder options: " + err.Error()) // the options are checked by New
		}
	}
	return &source{service: s.Service, rec: rec}
}

func (r *Receiver) newRecorder(s report.Source) (*meter.Recorder, error) {
	return meter.NewRecorder(
		meter.WithSource(s),
		meter.WithShards(1),
		meter.WithMaxRows(r.cfg.maxRows),
		meter.WithMaxTenants(r.cfg.maxRows),
		meter.WithClock(r.cfg.clock),
	)
}

// Flush records the waiting DB spans whose wait is over (for
// ingest.UnknownTenant), then cuts each source's window at now and hands
// it to the sink, after any report of the source still waiting for a
// retry. Start calls it every interval; tests call it with a fake clock.
func (r *Receiver) Flush(now time.Time) { r.flush(now, false) }

func (r *Receiver) flush(now time.Time, final bool) {
	r.flushMu.Lock()
	defer r.flushMu.Unlock()
	var unattributed uint64
	r.mu.Lock()
	r.traces.expire(now)
	r.wait.expire(now, r.cfg.traceWait, final, func(w *waiting) {
		w.rec.Tags.Tenant = report.UnknownTenant
		w.src.rec.Record(w.rec)
		unattributed++
	})
	r.met.waiting.Set(float64(r.wait.len()))
	srcs := make([]*source, 0, len(r.sources))
	for k, src := range r.sources {
		if now.Sub(src.last) > idleSource && src.empty && len(src.queue) == 0 {
			// No span since a cut that found its window empty (spans waiting
			// for their trace wait less than idleSource, so none is left).
			delete(r.sources, k)
			continue
		}
		srcs = append(srcs, src)
	}
	r.met.sources.Set(float64(len(r.sources)))
	r.mu.Unlock()
	r.met.unattributed.Add(float64(unattributed))

	backlog := 0
	for _, src := range srcs {
		r.send(src, now)
		backlog += len(src.queue)
	}
	r.mu.Lock()
	r.backlog = backlog
	r.mu.Unlock()
}

// send offers src's queued reports, then its new window, to the sink.
func (r *Receiver) send(src *source, now time.Time) {
	for len(src.queue) > 0 {
		if !r.offer(src.queue[0]) {
			break
		}
		src.queue[0] = nil
		src.queue = src.queue[1:]
	}
	rep := src.rec.Cut(now)
	src.pool.attach(rep)
	r.met.bounded.Add(float64(bound(rep)))
	r.met.folded.Add(float64(folded(rep)))
	if src.empty = len(rep.Rows) == 0 && rep.Keys == nil; src.empty {
		return
	}
	src.seq++
	rep.Seq = src.seq
	if len(src.queue) == 0 && r.offer(rep) {
		return
	}
	if len(src.queue) >= maxQueue {
		r.met.reports.WithLabelValues("dropped").Inc()
		if now.Sub(r.refusal.loggedAt) >= time.Minute {
			r.refusal.loggedAt = now
			r.cfg.log.Error("otlp: the collector has refused this source's windows for a while; dropping the oldest",
				"windows_kept", maxQueue, "rows_dropped", len(src.queue[0].Rows), "reason", r.refusal.last)
		}
		src.queue[0] = nil
		src.queue = src.queue[1:]
	}
	src.queue = append(src.queue, rep)
}

// admitted runs the WithAdmission check: an ErrBusy error and the delay
// to answer with when the export is to be refused before it is read.
func (c *config) admitted(declared int64) (time.Duration, error) {
	if c.hooks.admit == nil {
		return 0, nil
	}
	err := c.hooks.admit(declared)
	if err == nil {
		return 0, nil
	}
	retry, _ := report.IsRetryable(err)
	return max(retry, retrySlots), notAdmitted{err}
}

// errNotAdmitted marks an export the admission check (WithAdmission)
// refused, so that its metric says "refused", not "busy".
var errNotAdmitted = errors.New("otlpin: refused for now")

// notAdmitted is the admission check's error: errNotAdmitted, and
// ErrBusy for the answer (503, UNAVAILABLE: send it again later).
type notAdmitted struct{ err error }

func (e notAdmitted) Error() string        { return errNotAdmitted.Error() + ": " + e.err.Error() }
func (e notAdmitted) Unwrap() error        { return e.err }
func (e notAdmitted) Is(target error) bool { return target == errNotAdmitted || target == ErrBusy }

// offer hands rep to the sink, in process: true when it is done with
// (merged, or refused for good and dropped), false when it should be
// offered again (a report.RetryableError).
func (r *Receiver) offer(rep *report.Report) bool {
	_, err := r.sink.Consume(context.Background(), rep, nil)
	_, retry := report.IsRetryable(err)
	switch {
	case err == nil:
		r.met.reports.WithLabelValues("merged").Inc()
		return true
	case retry:
		r.met.reports.WithLabelValues("retried").Inc()
		r.refusal.last = err
		return false
	default:
		r.met.reports.WithLabelValues("dropped").Inc()
		r.cfg.log.Error("otlp: collector refused a window; dropped", "err", err)
		return true
	}
}

// Start runs the flush loop, every interval, until Shutdown.
func (r *Receiver) Start() {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		// The flushes fall on whole multiples of the interval (whole
		// seconds by default), so that a window ends at a minute's turn
		// rather than straddling it: the minute a window is placed in (by
		// its middle) then holds no spans from after the turn but the
		// flush's own delay's, and pg_stat_statements, read at the turn,
		// counted the same calls (the collector's dbtime.go).
		now := time.Now()
		first := time.NewTimer(now.Truncate(r.cfg.interval).Add(r.cfg.interval).Sub(now))
		select {
		case <-r.stop:
			first.Stop()
			return
		case <-first.C:
		}
		r.Flush(r.cfg.clock())
		t := time.NewTicker(r.cfg.interval)
		defer t.Stop()
		for {
			select {
			case <-r.stop:
				return
			case <-t.C:
				r.Flush(r.cfg.clock())
			}
		}
	}()
}

// Shutdown refuses new requests, waits (within ctx) for those being
// decoded, records the waiting DB spans for ingest.UnknownTenant, and
// flushes every window once. Calls after the first return ErrShutdown.
func (r *Receiver) Shutdown(ctx context.Context) error {
	err := ErrShutdown
	r.once.Do(func() {
		err = nil
		r.mu.Lock()
		r.closed = true
		r.mu.Unlock()
		close(r.stop)
		r.wg.Wait()
		for i := 0; i < cap(r.sem); i++ {
			select {
			case r.sem <- struct{}{}:
			case <-ctx.Done():
				err = ctx.Err()
				i = cap(r.sem)
			}
		}
		r.flush(r.cfg.clock(), true)
		r.dropQueued()
	})
	return err
}

// dropQueued tells of the windows still refused at shutdown: spans the
// exporters were answered for that never reached the collector's log
// (with WithAdmission checking what the sink needs, there are few).
func (r *Receiver) dropQueued() {
	r.flushMu.Lock()
	defer r.flushMu.Unlock()
	r.mu.Lock()
	windows, rows := 0, 0
	for _, src := range r.sources {
		for _, rep := range src.queue {
			windows++
			rows += len(rep.Rows)
		}
		src.queue = nil
	}
	r.mu.Unlock()
	if windows == 0 {
		return
	}
	r.met.reports.WithLabelValues("dropped").Add(float64(windows))
	r.cfg.log.Error("otlp: windows the collector refused until shutdown are dropped",
		"windows", windows, "rows", rows, "reason", r.refusal.last)
}
