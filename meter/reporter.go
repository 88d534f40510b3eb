package meter

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/quota"
	"github.com/qtop-dev/qtop/report"
)

// Reporter cuts the Recorder's window every interval and POSTs it to the
// collector, off the request path:
//
//   - each window is encoded once and queued; the queue is bounded and
//     drops its oldest report when full (counted: Dropped and
//     qtop_ingest_reports_dropped_total);
//   - a failed attempt (network error, timeout, 408, 425, 429 or 5xx) is
//     retried with exponential backoff and jitter, or after the reply's
//     RetryAfter; a 429 with a delay is the collector pacing a backlog,
//     waited out without counting as a failure;
//   - a 401 or 403 refuses the token, not the report: the report is kept
//     and retried with backoff, so a rotated token (WithTokenFunc,
//     WithTokenFile) sends it; any other 4xx means the report can never
//     be accepted and it is dropped;
//   - a report is sent again, with the same Seq, when the collector's
//     answer was lost, so the collector drops duplicates by
//     (report.Source.Instance, Seq);
//   - a new policy in a reply goes to the WithPolicyHandler callback;
//   - with WithCollectors, a process sends to one of several collectors,
//     chosen by its source identity, and fails over to the next when an
//     attempt fails.
//
// Start starts it; ForceFlush sends what is queued now; Shutdown cuts a
// last window and flushes it within its context's deadline. Calls after
// Shutdown are ignored.
type Reporter struct {
	rec    *Recorder
	cfg    config
	exp    Exporter // nil: the HTTP exporter (the reporter's own send)
	client *http.Client
	own    *http.Transport // set when the reporter made its client
	m      *reporterMetrics
	log    sendLog

	mu       sync.Mutex
	targets  targets // the collectors, ranked for this source (failover.go)
	queue    []pending
	inflight uint64 // Seq of the report being sent, 0 if none
	attempt  int    // consecutive failed attempts of the head
	retryAt  time.Time
	held     heldPolicy
	started  bool
	shut     bool
	last     bool // Shutdown's last cut is queued: later cuts have no flush to send them

	cutMu   sync.Mutex
	scratch report.Report // the report cut holds, reused; guarded by cutMu

	dropped atomic.Uint64
	sending chan struct{} // a one-slot semaphore: one sender at a time
	wake    chan struct{}
	stop    chan struct{}
	wg      sync.WaitGroup
	bg      struct {
		ctx    context.Context // of the background sender's attempts
		cancel context.CancelFunc
	}
}

// heldPolicy is the policy the reporter last applied: its version, and
// the tag of the policy view it holds (policyview.go).
type heldPolicy struct {
	version uint64
	have    bool
	viewTag string
}

// pending is a queued report: its body for the HTTP exporter (encoded
// once, at the cut), the report itself for another exporter.
type pending struct {
	seq  uint64
	body []byte
	rep  *report.Report
	cut  time.Time // when its window was cut (the reporter's clock): its age goes with each attempt
}

// NewReporter returns a reporter that sends rec's windows to the
// collector's report endpoint, url (e.g. "http://collector:7070/v1/reports").
// WithClock dates the end of each window and times the failback (backoff
// runs on the monotonic clock); WithCollectors adds collectors to fail
// over to, WithFailback says when to go back to the first choice. It returns ErrInvalid for a
// URL that is not absolute http(s) or an invalid option.
func NewReporter(rawURL string, rec *Recorder, opts ...ReporterOption) (*Reporter, error) {
	if rec == nil {
		return nil, fmt.Errorf("%w: nil Recorder", ErrInvalid)
	}
	cfg, err := newReporterConfig(opts)
	if err != nil {
		return nil, err
	}
	tg, err := newTargets(rawURL, cfg.failover.collectors, rec.Source(), cfg.failover.failback)
	if err != nil {
		return nil, err
	}
	if cfg.token.file != "" {
		ft, err := newFileToken(cfg.token.file, cfg.logger, cfg.clock)
		if err != nil {
			return nil, err
		}
		cfg.token.fn = ft.get
	}
	r := &Reporter{
		targets: tg,
		rec:     rec,
		cfg:     cfg,
		log:     sendLog{log: cfg.logger, queueLen: cfg.queueLen},
		client:  cfg.client,
		sending: make(chan struct{}, 1),
		wake:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
	}
	if r.client == nil {
		// A transport of its own, whose idle connections Shutdown closes.
		r.own = http.DefaultTransport.(*http.Transport).Clone()
		r.client = &http.Client{Transport: r.own}
		if r.own.TLSClientConfig, err = cfg.tls.config(); err != nil {
			return nil, fmt.Errorf("meter: reporter: %w", err)
		}
	}
	r.bg.ctx, r.bg.cancel = context.WithCancel(context.Background())
	if cfg.reg != nil {
		r.m = newReporterMetrics(r)
		if err := r.m.register(cfg.reg); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Start starts cutting a window every interval and sending the queue in
// the background. It returns at once; a second call does nothing.
func (r *Reporter) Start() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started || r.shut {
		return
	}
	r.started = true
	r.wg.Add(2)
	go r.cutLoop()
	go r.sendLoop()
}

func (r *Reporter) cutLoop() {
	defer r.wg.Done()
	var ticks <-chan time.Time
	if r.cfg.ticker != nil {
		var stop func()
		ticks, stop = r.cfg.ticker(r.cfg.interval)
		defer stop()
	} else {
		t := time.NewTicker(r.cfg.interval)
		defer t.Stop()
		ticks = t.C
	}
	for {
		select {
		case <-r.stop:
			return
		case <-ticks:
			r.cut(false)
		}
	}
}

func (r *Reporter) sendLoop() {
	defer r.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-r.stop:
			timer.Stop()
			return
		case <-r.wake:
		case <-timer.C:
		}
		if wait := r.drain(r.bg.ctx, 0); wait > 0 {
			timer.Reset(wait)
		}
	}
}

// encodes reports whether a section of WithSectionSource can be encoded.
// One that cannot is left out of the report, which goes without it (its
// rows are good), and is logged at most once a minute and counted
// (qtop_ingest_sections_dropped_total): before, it took the whole report
// with it. Called with cutMu held.
func (r *Reporter) encodes(s report.Section, now time.Time) bool {
	_, err := s.AppendSection(nil)
	if err == nil {
		return true
	}
	if r.m != nil {
		r.m.sectionsDropped.Inc()
	}
	r.log.sectionFailed(now, s.SectionTag(), err)
	return false
}

// cut closes the recorder's window, encodes it and queues it; it returns
// the report's Seq, or 0 if it could not be encoded. A cut that races
// with Shutdown (the interval's tick, a ForceFlush) before Shutdown's own
// last cut (final) is queued as usual: Shutdown's flush sends it with the
// last one. Only a cut after that last one has nothing left to send it,
// and is dropped and counted.
func (r *Reporter) cut(final bool) uint64 {
	r.cutMu.Lock()
	rep := &r.scratch // reused: rows and their histograms keep their memory
	if r.exp != nil {
		rep = new(report.Report) // handed to the exporter as it is
	}
	cutAt := r.cfg.clock()
	r.rec.cutInto(cutAt, rep)
	if r.cfg.enforcement != nil {
		rep.Enforcement = r.cfg.enforcement()
	}
	rep.Sections = nil // the previous report's, which the queue no longer needs
	if r.cfg.quota != nil {
		if u := r.cfg.quota.Cut(); len(u) > 0 {
			rep.SetSection(quota.Usages(u))
		}
	}
	if r.cfg.onPolicy != nil && r.cfg.policyView {
		rep.SetSection(r.heldView())
	}
	for _, fn := range r.cfg.sections {
		if s := fn(); s != nil && r.encodes(s, cutAt) {
			rep.SetSection(s)
		}
	}
	if r.cfg.onCut != nil {
		r.cfg.onCut(rep)
	}
	var body []byte
	var err error
	if r.exp == nil {
		body, err = rep.MarshalBinary()
	}
	seq := rep.Seq
	r.cutMu.Unlock()
	if err != nil {
		r.drop("encode", 1)
		return 0
	}
	r.mu.Lock()
	if r.last {
		r.mu.Unlock()
		r.drop("shutdown", 1)
		return 0
	}
	r.last = final
	if len(r.queue) >= r.cfg.queueLen {
		// Drop the oldest report that is not being sent.
		i := 0
		if r.queue[0].seq == r.inflight && len(r.queue) > 1 {
			i = 1
		}
		if i == 0 {
			r.attempt, r.retryAt = 0, time.Time{} // the backoff was the head's
		}
		r.queue = append(r.queue[:i], r.queue[i+1:]...)
		r.mu.Unlock()
		r.drop("queue_full", 1)
		r.log.queueFull(cutAt, 1)
		r.mu.Lock()
	}
	p := pending{seq: seq, body: body, cut: cutAt}
	if r.exp != nil {
		p.rep = rep
	}
	r.queue = append(r.queue, p)
	n := len(r.queue)
	r.mu.Unlock()
	if r.m != nil {
		r.m.queue.Set(float64(n))
	}
	select {
	case r.wake <- struct{}{}:
	default:
	}
	return seq
}

// Dropped returns how many reports were dropped so far: queue overflow,
// rejected by the collector, unsendable at shutdown, or not encodable.
func (r *Reporter) Dropped() uint64 { return r.dropped.Load() }

// QueueLen returns the number of reports waiting to be sent.
func (r *Reporter) QueueLen() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.queue)
}

func (r *Reporter) drop(reason string, n int) {
	r.dropped.Add(uint64(n))
	if r.m != nil {
		r.m.dropped.WithLabelValues(reason).Add(float64(n))
	}
}

// drain sends queued reports, oldest first, one attempt each, until the
// queue is empty (returns 0), an attempt fails and must wait (returns the
// wait), the head's Seq exceeds upTo (if upTo > 0), or ctx is done.
func (r *Reporter) drain(ctx context.Context, upTo uint64) time.Duration {
	select {
	case r.sending <- struct{}{}:
	case <-ctx.Done():
		return 0
	}
	defer func() { <-r.sending }()
	for ctx.Err() == nil {
		r.mu.Lock()
		if len(r.queue) == 0 || (upTo > 0 && r.queue[0].seq > upTo) {
			r.mu.Unlock()
			return 0
		}
		if wait := time.Until(r.retryAt); wait > 0 {
			r.mu.Unlock()
			return wait
		}
		p := r.queue[0]
		r.inflight = p.seq
		r.mu.Unlock()

		res := r.export(ctx, p)

		r.mu.Lock()
		r.inflight = 0
		head := len(r.queue) > 0 && r.queue[0].seq == p.seq
		if res.paced && ctx.Err() == nil {
			// Pacing, not failure: wait what the collector asks, and
			// leave the backoff of real failures where it was.
			r.retryAt = time.Now().Add(min(res.retryAfter, r.cfg.backoff.max))
		} else if res.retry && ctx.Err() == nil {
			r.attempt++
			r.retryAt = time.Now().Add(r.backoff(r.attempt, res.retryAfter))
		} else if !res.retry {
			r.attempt, r.retryAt = 0, time.Time{}
			if head {
				r.queue[0] = pending{} // let the body go
				r.queue = r.queue[1:]
			}
		}
		n := len(r.queue)
		r.mu.Unlock()
		if r.m != nil {
			r.m.queue.Set(float64(n))
		}
		if !res.retry && !res.ok && head {
			r.drop("rejected", 1)
		}
	}
	return 0
}

// backoff is the wait before retry number attempt: min·2^(attempt−1)
// capped at max, of which a random half is waived (so reporters that
// failed together do not retry together), and never less than the
// collector's RetryAfter (itself capped at max).
func (r *Reporter) backoff(attempt int, retryAfter time.Duration) time.Duration {
	d := r.cfg.backoff.min
	for i := 1; i < attempt && d < r.cfg.backoff.max; i++ {
		d *= 2
	}
	d = min(d, r.cfg.backoff.max)
	d = d/2 + rand.N(d/2+1)
	return max(d, min(retryAfter, r.cfg.backoff.max))
}

func (r *Reporter) failed(reason string) {
	if r.m != nil {
		r.m.failed.WithLabelValues(reason).Inc()
	}
}

// applyPolicy hands p to the policy handler if it is newer than the last
// one handed over.
func (r *Reporter) applyPolicy(p *policy.Policy) {
	if p == nil || r.cfg.onPolicy == nil {
		return
	}
	r.mu.Lock()
	if r.held.have && p.Version <= r.held.version {
		r.mu.Unlock()
		return
	}
	r.held.have, r.held.version = true, p.Version
	r.mu.Unlock()
	if r.m != nil {
		r.m.policies.Inc()
	}
	r.cfg.onPolicy(*p)
}

// ForceFlush cuts the current window and sends every queued report, at
// once and then retrying with backoff, until the queue holds nothing older than that
// window or ctx is done (it then returns ctx's error; what is left stays
// queued). After Shutdown it does nothing.
func (r *Reporter) ForceFlush(ctx context.Context) error {
	r.mu.Lock()
	shut := r.shut
	r.mu.Unlock()
	if shut {
		return nil
	}
	return r.flush(ctx, r.cut(false))
}

func (r *Reporter) flush(ctx context.Context, upTo uint64) error {
	// A flush tries at once, whatever the backoff of earlier failures;
	// its own failures then back off as usual.
	r.mu.Lock()
	r.retryAt = time.Time{}
	r.mu.Unlock()
	for {
		wait := r.drain(ctx, upTo)
		if err := ctx.Err(); err != nil {
			return err
		}
		if wait == 0 {
			r.mu.Lock()
			left := len(r.queue) > 0 && (upTo == 0 || r.queue[0].seq <= upTo)
			r.mu.Unlock()
			if !left {
				return nil
			}
			continue
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Shutdown stops the background work, cuts a last window and sends
// everything queued within ctx's deadline (or within the WithTimeout of
// one attempt if ctx has none). Reports still unsent then are dropped
// (and counted) and an error is returned. Later calls return nil.
func (r *Reporter) Shutdown(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.cfg.timeout)
		defer cancel()
	}
	r.mu.Lock()
	if r.shut {
		r.mu.Unlock()
		return nil
	}
	r.shut = true
	r.mu.Unlock()
	close(r.stop)
	// Let a background attempt in flight finish, unless ctx ends first:
	// then abort it (its report stays queued).
	stopped := make(chan struct{})
	go func() { r.wg.Wait(); close(stopped) }()
	select {
	case <-stopped:
	case <-ctx.Done():
		r.bg.cancel()
		<-stopped
	}
	r.bg.cancel()
	err := r.flush(ctx, r.cut(true))
	r.mu.Lock()
	left := len(r.queue)
	r.queue = nil
	r.mu.Unlock()
	if left > 0 {
		r.drop("shutdown", left)
		if err == nil {
			err = fmt.Errorf("%w: %d reports unsent", ErrShutdown, left)
		}
	}
	if r.m != nil {
		r.m.queue.Set(0)
	}
	if r.own != nil {
		r.own.CloseIdleConnections()
	}
	return err
}
