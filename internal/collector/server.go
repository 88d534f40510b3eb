package collector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/internal/otlpin"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/store"
)

// Server is the collector. Create it with New, serve Handler (or call
// Start), and stop it with Shutdown.
//
// It composes parts with one job each, each under its own lock; it holds
// no feature logic:
//   - in (intake; sources.go, screen.go): the front door for reports —
//     decode slots and memory, refusals held back, the table of reporting
//     processes (admission, the duplicate filter) — and the open minutes
//     with their write-ahead log (wal.go), under mu;
//   - agg (aggregator; aggregate.go): each open minute's rows and every
//     tenant's live windows, in shards by tenant, each under its own lock;
//   - em (emitter; emit.go): closed minutes to the store through the
//     spool, versions, the store's health;
//   - view (liveView; merge.go, snapshot.go): services, hot keys and
//     reports per second, under mu, and the snapshots made of every part;
//   - policy (policyPart; policy.go): the policy, its one commit path,
//     its audit and the encoded reply;
//   - feat (features; feature.go): one part per report section, called in
//     a loop — fleet quotas (quota.go), budgets and runaway rules
//     (budgets.go, runaway.go), freshness (freshness.go), enforcement
//     detail and pool waits (enforcepart.go);
//   - pg (pgPart; pg.go): the PostgreSQL sampler; fleet (fleet.go,
//     fleet_policy.go): the peers and the shared policy; streams
//     (stream.go): live stream clients; otlp (otlp.go): the OTLP receiver.
//
// A report takes mu twice, briefly — admission and the duplicate filter,
// then its per-report merge and reply, which take the features' and the
// policy's locks inside — writes the log between the two, and then takes
// once each shard that has rows of it, without mu. Locks are taken in the
// order mu; a feature's, pg's or em's; the policy's; a shard's last.
type Server struct {
	// Set once by New.
	cfg    Config
	log    *slog.Logger
	met    *metrics
	guard  *guardMetrics
	token  string // admin token: Config.AdminToken or the one kept in DataDir
	walDir string
	start  time.Time

	in      intake      // sources.go, screen.go
	agg     *aggregator // aggregate.go
	em      *emitter    // emit.go
	policy  *policyPart // policy.go
	feat    features    // feature.go
	pg      *pgPart     // pg.go
	fleet   *fleet      // fleet.go: peers and the shared policy, or nil
	otlp    *otlpState  // otlp.go
	streams streams     // stream.go
	disk    *diskGuard  // disk.go: the free-space reserve of DataDir

	mu sync.Mutex // guards the sources, the open minutes, the live view and closed
	// The open minutes (their rows are in agg).
	minutes   map[int64]*minute
	finalized map[int64]struct{} // minutes written for good (last 3 h)
	lastFinal int64
	view      liveView // merge.go, snapshot.go
	closed    bool

	wg   sync.WaitGroup // the background work
	life lifecycle
}

// lifecycle holds the handles of the background work, set by Start and
// Run and released by Shutdown.
type lifecycle struct {
	done     chan struct{}
	doneOnce sync.Once
	lock     *os.File // flock on DataDir
	httpSrv  *http.Server
	ln       net.Listener
	cancel   context.CancelFunc
}

// New checks cfg, opens the store (through the spool), replays the
// write-ahead log and returns a server that is not yet serving.
func New(cfg Config) (*Server, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	s, err := newParts(cfg)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(s.walDir, 0o700); err != nil {
		return nil, fmt.Errorf("collector: data dir: %w", err)
	}
	var tokenPath string
	if s.token, tokenPath, err = adminToken(cfg); err != nil {
		return nil, err
	}
	if tokenPath != "" {
		s.log.Info("no --admin-token given: policy changes take the token kept in this file", "file", tokenPath)
	}
	if s.life.lock, err = lockDataDir(cfg.DataDir); err != nil {
		return nil, err
	}
	if err := s.open(); err != nil {
		s.life.lock.Close()
		return nil, err
	}
	return s, nil
}

// newParts makes the parts and registers their metrics.
func newParts(cfg Config) (*Server, error) {
	s := &Server{
		cfg:       cfg,
		log:       cfg.Logger,
		walDir:    filepath.Join(cfg.DataDir, "wal"),
		start:     cfg.Now(),
		in:        newIntake(cfg),
		minutes:   make(map[int64]*minute),
		finalized: make(map[int64]struct{}),
		view:      newLiveView(),
		pg:        &pgPart{},
	}
	var err error
	if s.met, err = newMetrics(cfg.Registerer); err != nil {
		return nil, err
	}
	if s.guard, err = newGuardMetrics(cfg.Registerer, s); err != nil {
		return nil, fmt.Errorf("collector: metrics: %w", err)
	}
	s.in.guard = s.guard
	if s.disk, err = newDiskGuard(cfg, s.walDir); err != nil {
		return nil, err
	}
	s.agg = newAggregator(cfg, s.met, s.guard)
	s.em = &emitter{dir: cfg.DataDir, agg: s.agg, met: s.met, guard: s.guard, log: s.log, now: cfg.Now}
	s.policy = &policyPart{dir: cfg.DataDir, log: s.log, changes: s.met.policyChanges}
	if err := cfg.Registerer.Register(shedCollector{s}); err != nil {
		return nil, fmt.Errorf("collector: metrics: %w", err)
	}
	if s.feat, err = newFeatures(cfg, s.policy, s.met.enforcement); err != nil {
		return nil, err
	}
	if err := cfg.Registerer.Register(ratioCollector{s}); err != nil {
		return nil, fmt.Errorf("collector: metrics: %w", err)
	}
	return s, nil
}

// open reads what DataDir keeps — the writer identity, the policy —,
// opens the store and the peers, and replays the write-ahead log.
func (s *Server) open() error {
	var err error
	if s.em.writer, err = writerID(s.cfg); err != nil {
		return err
	}
	if err := s.policy.load(); err != nil {
		return err
	}
	if err := s.newOTLP(); err != nil {
		return err
	}
	next, err := s.em.openStore(s.cfg)
	if err != nil {
		return err
	}
	s.policy.store, s.feat.bud.store = s.em.store, s.em.store
	s.fleet, err = newFleet(s.cfg, next, s.policy)
	if err == nil {
		err = s.replay()
	}
	if err != nil && s.em.store != nil {
		s.em.store.Close()
	}
	return err
}

// writerID is Config.Writer, or the identity kept in DataDir, made once.
func writerID(cfg Config) (string, error) {
	if cfg.Writer != "" {
		return cfg.Writer, nil
	}
	p := filepath.Join(cfg.DataDir, "writer-id")
	if b, err := os.ReadFile(p); err == nil {
		if id := strings.TrimSpace(string(b)); id != "" {
			return id, nil
		}
	}
	host, _ := os.Hostname()
	if host == "" {
		host = "collector"
	}
	id := host + "-" + randomToken()[:8]
	if err := os.WriteFile(p, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("collector: writer id: %w", err)
	}
	return id, nil
}

// Token returns the admin token (RoleAdmin), which POST /v1/policy and
// GET /v1/audit require.
func (s *Server) Token() string { return s.token }

// Writer returns the identity under which this collector writes rollups.
func (s *Server) Writer() string { return s.em.writer }

// Store returns the store (behind its spool), or nil with StoreNone.
func (s *Server) Store() store.Store { return s.em.store }

// replay merges the reports of the write-ahead log into their minutes, so
// that minutes a killed collector had not finished are emitted again in
// full.
func (s *Server) replay() error {
	mins, err := walMinutes(s.walDir)
	if err != nil {
		return err
	}
	d := new(decoded)
	now := s.cfg.Now()
	for _, mt := range mins {
		m := newMinute(mt)
		n := 0
		cut, err := readWAL(walPath(s.walDir, mt), func(body []byte) error {
			if s.replayOne(d, body, m, now) {
				n++
			}
			return nil
		})
		if err != nil {
			return err
		}
		if cut > 0 {
			s.log.Warn("wal: cut a torn record (never acknowledged)", "minute", mt, "bytes", cut)
		}
		if m.wal, err = openWAL(s.walDir, mt); err != nil {
			return err
		}
		m.dirty.Store(true)
		s.minutes[mt.Unix()] = m
		s.log.Info("wal: replayed minute", "minute", mt, "reports", n)
	}
	return nil
}

// replayOne merges one logged report into m; it reports whether it was
// merged (not undecodable, not a duplicate).
func (s *Server) replayOne(d *decoded, body []byte, m *minute, now time.Time) bool {
	rep := &d.rep
	if err := reports.DecodeInto(rep, body); err != nil {
		s.log.Warn("wal: undecodable report skipped", "minute", m.start, "err", err)
		return false
	}
	s.screen(rep)
	src := s.sourceLocked(sourceKey(rep.Source), now)
	if src.last.IsZero() {
		src.last = now // and its bucket full, as a new one is
	}
	if src.check(rep.Seq) == seqDup {
		return false
	}
	src.mark(rep.Seq)
	s.acceptedLocked(src, now)
	d.prepare(s.agg)
	s.mergeReportLocked(d, m, now, false)
	s.agg.merge(rep, &d.order, m, now, false)
	return true
}

// Handler returns the collector's HTTP API.
func (s *Server) Handler() http.Handler {
	h := httpAPI{s}
	mux := http.NewServeMux()
	mux.HandleFunc(api.PathReports, s.disk.door(s.handleReports))
	mux.Handle(otlpin.PathTraces, s.otlp.recv)
	mux.HandleFunc(api.PathLive, h.authorized(RoleRead, h.handleLive))
	mux.HandleFunc(api.PathStream, h.authorized(RoleRead, h.handleStream))
	mux.HandleFunc(api.PathPolicy, h.handlePolicy)
	mux.HandleFunc(api.PathReport, h.authorized(RoleRead, h.handleCostReport))
	mux.HandleFunc(api.PathAudit, h.authorized(RoleAdmin, h.handleAudit))
	mux.HandleFunc(api.PathHistory, h.authorized(RoleRead, h.handleHistory))
	mux.HandleFunc(PathBudgets, h.handleBudgets) // budgets.go
	mux.HandleFunc(PathRunaway, h.handleRunaway)
	mux.HandleFunc(api.PathFreshness, h.authorized(RoleRead, h.handleFreshness))
	mux.HandleFunc(api.PathFreshnessPolicy, h.handleFreshnessPolicy)
	if s.cfg.Gatherer != nil {
		mux.Handle("/metrics", h.authorized(RoleRead, promhttp.HandlerFor(s.cfg.Gatherer, promhttp.HandlerOpts{}).ServeHTTP))
	}
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("/readyz", readyHandler(s)) // disk.go
	return h.withFleet(mux)
}

// httpAPI is the collector's HTTP API but POST /v1/reports: each handler
// checks the request, calls the part that answers it and maps its
// result or error to a status. Each handler is in the file of its part.
type httpAPI struct{ *Server }

// Start listens on Config.Listen and runs the ticker, the sampler and the
// demo fleet until Shutdown. It returns once listening.
func (s *Server) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("collector: listen: %w", err)
	}
	s.life.ln = ln
	if err := s.listenOTLP(); err != nil {
		ln.Close()
		return err
	}
	s.life.httpSrv = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.life.httpSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("http server", "err", err)
		}
	}()
	s.Run(ctx)
	s.log.Info("collector listening", "addr", ln.Addr().String(), "store", redactStore(s.cfg.Store), "writer", s.em.writer, "demo", s.cfg.Demo, "sampler", s.cfg.Postgres != "")
	return nil
}

// Addr returns the address Start listens on.
func (s *Server) Addr() string {
	if s.life.ln == nil {
		return ""
	}
	return s.life.ln.Addr().String()
}

// Run starts the background work — the once-a-second tick that writes
// closed minutes, the pg sampler and the demo fleet — without an HTTP
// listener (for callers that serve Handler themselves). Shutdown stops it.
func (s *Server) Run(ctx context.Context) {
	ctx, s.life.cancel = context.WithCancel(ctx)
	s.startOTLP()
	s.feat.quota.start(ctx, &s.wg)
	s.goRun(func() { every(ctx, time.Second, func() { s.Tick(ctx, s.cfg.Now()) }) })
	s.fleet.start(ctx, &s.wg)
	if s.cfg.Postgres != "" {
		s.goRun(func() {
			s.pg.run(ctx, s.cfg, s.met, s.AddSample, s.feat.bud.checkRunaway)
		})
	}
	if s.cfg.Demo {
		s.goRun(func() { s.runDemo(ctx) })
	}
}

// goRun runs f on a goroutine that Shutdown waits for.
func (s *Server) goRun(f func()) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
}

// every calls f every d until ctx ends.
func every(ctx context.Context, d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}

// Tick does the once-a-second work at now: writes minutes whose grace has
// passed, drops minutes no late report can change, prunes idle state,
// syncs the write-ahead log, checks the store and runs each feature's
// tick. The server calls it every second; tests call it with a fake
// clock.
func (s *Server) Tick(ctx context.Context, now time.Time) {
	s.disk.look()
	s.feat.tick(ctx, now)
	s.emit(ctx, now, false)
	// The aggregator's part takes only its shards' locks (one at a time),
	// so reports go on merging meanwhile; the ranking and the series have
	// their own.
	s.agg.prune(now.Unix())
	s.agg.flushRanking(now)
	s.met.ranking.Rerank()
	s.met.tenants.refresh(s.met.ranking.Members(), now)
	s.policy.prune(now)
	s.mu.Lock()
	s.view.prune(now)
	s.in.prune(now, time.Minute+s.cfg.Grace+s.cfg.LateKeep)
	wals := s.view.tick(now, s.minutes)
	s.met.openMinutes.Set(float64(len(s.minutes)))
	s.met.sources.Set(float64(len(s.in.sources)))
	s.met.tenantsTracked.Set(float64(s.agg.tenants.Load()))
	s.mu.Unlock()
	var walBytes int64
	for _, w := range wals {
		walBytes += w.size.Load()
		w.sync() // fsync outside the merge lock
	}
	s.met.walBytes.Set(float64(walBytes))
	if now.Unix()%5 == 0 {
		s.em.check(ctx)
	}
}

// emit writes every changed minute whose grace has passed (all changed
// minutes when all is set), and drops minutes past the late horizon.
func (s *Server) emit(ctx context.Context, now time.Time, all bool) {
	var todo []emission
	s.mu.Lock()
	for k, m := range s.minutes {
		closeAt := m.start.Add(time.Minute + s.cfg.Grace)
		if m.dirty.Load() && (all || !now.Before(closeAt)) {
			if s.em.store == nil {
				m.dirty.Store(false)
			} else {
				todo = append(todo, s.em.build(m))
			}
		}
		if !m.dirty.Load() && m.merging.Load() == 0 && !now.Before(closeAt.Add(s.cfg.LateKeep)) {
			if m.wal != nil {
				if err := m.wal.remove(); err != nil && !errors.Is(err, os.ErrNotExist) {
					s.log.Warn("wal: remove", "err", err)
				}
			}
			delete(s.minutes, k)
			s.agg.dropMinute(m)
			s.finalized[k] = struct{}{}
			s.lastFinal = max(s.lastFinal, k)
		}
	}
	for k := range s.finalized {
		if now.Unix()-k > 3*3600 && k < s.lastFinal {
			delete(s.finalized, k)
		}
	}
	s.mu.Unlock()
	s.em.writeAll(ctx, todo)
}

// Shutdown stops accepting work, writes every open minute, flushes the
// spool (within ctx) and closes the store. Calls after the first return
// ErrShutdown.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopOTLP(ctx)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrShutdown
	}
	s.closed = true
	s.mu.Unlock()
	close(s.life.doneChan())
	var errs []error
	if s.life.httpSrv != nil {
		errs = append(errs, s.life.httpSrv.Shutdown(ctx))
	}
	if s.life.cancel != nil {
		s.life.cancel()
	}
	s.wg.Wait()
	s.emit(ctx, s.cfg.Now(), true)
	s.mu.Lock()
	for _, m := range s.minutes {
		if m.wal != nil {
			m.wal.sync()
			m.wal.close()
		}
	}
	s.mu.Unlock()
	errs = append(errs, s.em.close(ctx))
	s.life.lock.Close()
	return errors.Join(errs...)
}

// doneChan is closed when the background work stops (Shutdown); streams
// and held refusals end with it so that http.Server.Shutdown does not wait
// for them.
func (l *lifecycle) doneChan() chan struct{} {
	l.doneOnce.Do(func() { l.done = make(chan struct{}) })
	return l.done
}

// handleReports is POST /v1/reports.
func (s *Server) handleReports(w http.ResponseWriter, r *http.Request) {
	// A refusal for what the request is, not for how busy the collector
	// is, is held back (Config.RefusalDelay).
	refuse := func(status int, reason, msg string) {
		s.holdRefusal(w, r, status)
		s.reject(w, status, reason, msg, 0)
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		s.reject(w, http.StatusMethodNotAllowed, reasonMethod, "use POST", 0)
		return
	}
	if _, err := s.Authorize(r, RoleReport); err != nil {
		refuse(http.StatusUnauthorized, reasonUnauthorized, err.Error())
		return
	}
	if ct := r.Header.Get("Content-Type"); !contentTypeIs(ct, report.ContentType) {
		refuse(http.StatusUnsupportedMediaType, reasonContentType,
			fmt.Sprintf("Content-Type %q: a report is %s", ct, report.ContentType))
		return
	}
	if r.ContentLength > report.MaxReportBytes {
		refuse(http.StatusRequestEntityTooLarge, reasonTooLarge,
			fmt.Sprintf("report of %d bytes, at most %d", r.ContentLength, report.MaxReportBytes))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, report.MaxReportBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			refuse(http.StatusRequestEntityTooLarge, reasonTooLarge, fmt.Sprintf("report larger than %d bytes", report.MaxReportBytes))
			return
		}
		refuse(http.StatusBadRequest, reasonMalformed, "reading body: "+err.Error())
		return
	}
	// A header that cannot be decoded (a bomb, a claim beyond what the
	// body can expand to) is refused before it takes a decode slot.
	if err := report.CheckHeader(body); err != nil {
		status, reason := decodeStatus(err)
		refuse(status, reason, err.Error())
		return
	}
	// Bound the reports decoded at once, and the memory they may take
	// (the body is read first, under the server's read timeout, so a slow
	// client holds no slot).
	if !s.waitSlot(r) {
		s.reject(w, http.StatusServiceUnavailable, reasonBusy, "collector busy", time.Second)
		return
	}
	budget := report.DecodeBudget(body)
	if !s.in.decode.TryAcquire(budget) {
		<-s.in.inflight
		s.reject(w, http.StatusServiceUnavailable, reasonBusy, "collector busy decoding other reports", time.Second)
		return
	}
	t0 := time.Now()
	d := s.in.take()
	var reply report.Reply
	if err = reports.DecodeInto(&d.rep, body); err == nil {
		reply, err = s.consume(d, body, t0)
	} else {
		err = errDecode{err}
	}
	s.in.give(d)
	s.in.decode.Release(budget)
	<-s.in.inflight
	if err != nil {
		status, reason, retry := refusalStatus(err)
		s.holdRefusal(w, r, status)
		s.reject(w, status, reason, err.Error(), retry)
		return
	}
	s.writeReply(w, reply)
}

// writeReply writes the reply to an accepted report.
func (s *Server) writeReply(w http.ResponseWriter, reply report.Reply) {
	b, err := report.EncodeReply(reply)
	if err != nil {
		s.log.Error("reply cannot be encoded; sending none", "err", err)
		b, _ = report.EncodeReply(report.Reply{Accepted: true})
	}
	w.Header().Set("Content-Type", report.ReplyContentType)
	w.Write(b)
}

// The refusals of Consume. The HTTP handler of POST /v1/reports is the
// only place that turns them into statuses (refusalStatus).
var (
	errShuttingDown = errors.New("collector shutting down")
	errAdmission    = errors.New("source over its report rate")
	errPending      = errors.New("the same report is being logged; retry")
	errStale        = errors.New("sequence too far behind")
	errWAL          = errors.New("collector cannot log the report")
)

// errDecode is a body that is not a report (report.ErrMalformed and its
// kin): only the HTTP handler decodes.
type errDecode struct{ err error }

func (e errDecode) Error() string { return e.err.Error() }
func (e errDecode) Unwrap() error { return e.err }

// refusalStatus maps a refusal of POST /v1/reports to its status, its
// metric reason and its Retry-After.
func refusalStatus(err error) (status int, reason string, retry time.Duration) {
	retry, _ = report.IsRetryable(err)
	var de errDecode
	switch {
	case errors.As(err, &de):
		status, reason = decodeStatus(de.err)
		return status, reason, 0
	case errors.Is(err, errAdmission):
		return http.StatusTooManyRequests, reasonAdmission, retry
	case errors.Is(err, errStale):
		return http.StatusConflict, reasonStale, 0
	case errors.Is(err, errWAL):
		return http.StatusServiceUnavailable, reasonWAL, retry
	case errors.Is(err, errShuttingDown), errors.Is(err, errPending):
		return http.StatusServiceUnavailable, reasonBusy, retry
	case errors.Is(err, report.ErrInvalid):
		return http.StatusBadRequest, reasonMalformed, 0
	}
	if retry > 0 {
		return http.StatusServiceUnavailable, reasonBusy, retry
	}
	return http.StatusBadRequest, reasonMalformed, 0
}

// take returns a decoded report from the pool, or a new one.
func (in *intake) take() *decoded {
	select {
	case d := <-in.reports:
		return d
	default:
		return new(decoded)
	}
}

// give hands d back to the pool, keeping the rows of a small report (and
// their latencies' memory), nothing else.
func (in *intake) give(d *decoded) {
	if cap(d.rep.Rows) > pooledRows {
		return
	}
	d.rep.Reset()
	select {
	case in.reports <- d:
	default:
	}
}

// Consume merges one report as POST /v1/reports does once it has decoded
// the body: the OTLP receiver and the demo fleet hand their reports here
// in process, with no encoding on the way. raw is the report's encoded
// body when the caller has it; without it the report is encoded once, for
// the write-ahead log, when it is admitted. Consume screens r's rows in
// place and keeps nothing of r or raw.
//
// It returns the reply for the reporting process (the policy, its quota
// verdicts), or a report.RetryableError (the collector is shutting down
// or busy, the source over its rate, the log failing) or a permanent
// error (a sequence too far behind, a report that cannot be encoded).
func (s *Server) Consume(ctx context.Context, r *report.Report, raw []byte) (report.Reply, error) {
	if err := ctx.Err(); err != nil {
		return report.Reply{}, report.NewRetryable(err, 0)
	}
	if err := s.disk.admit(int64(len(raw)) + 8); err != nil {
		return report.Reply{}, err
	}
	t0 := time.Now()
	d := s.in.take()
	own := d.rep
	d.rep = *r
	reply, err := s.consume(d, raw, t0)
	d.rep = own
	s.in.give(d)
	return reply, err
}

// consume admits, logs and merges d's report (raw is its body, nil to
// encode it for the log); t0 is when its handling began.
func (s *Server) consume(d *decoded, raw []byte, t0 time.Time) (report.Reply, error) {
	rep := &d.rep
	// Everything that needs no shared state runs before the lock, on as
	// many cores as there are requests: string checks, sparse latencies,
	// the rows' shard order.
	s.screen(rep)
	d.prepare(s.agg)

	// Under the lock: admission, the duplicate filter, the minute.
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return report.Reply{}, report.NewRetryable(errShuttingDown, time.Second)
	}
	now := s.cfg.Now()
	src := s.sourceLocked(sourceKey(rep.Source), now)
	if wait, ok := src.admit(now, s.cfg.SourceRate); !ok {
		s.mu.Unlock()
		return report.Reply{}, report.NewRetryable(fmt.Errorf("%w: source %s/%s sends more than %.0f reports/s",
			errAdmission, rep.Source.Service, rep.Source.Instance, s.cfg.SourceRate), max(wait, 100*time.Millisecond))
	}
	switch src.check(rep.Seq) {
	case seqDup:
		if src.isPending(rep.Seq) {
			s.mu.Unlock()
			return report.Reply{}, report.NewRetryable(errPending, time.Second)
		}
		s.met.duplicates.Inc()
		reply := s.quotaReplyLocked(rep, now, s.replyLocked(), false)
		s.mu.Unlock()
		return reply, nil
	case seqStale:
		s.mu.Unlock()
		return report.Reply{}, fmt.Errorf("%w: sequence %d is more than %d behind %d", errStale, rep.Seq, seqWindow, src.max)
	}
	m, err := s.minuteLocked(rep, now)
	if err != nil {
		s.mu.Unlock()
		s.log.Error("report not logged; refused", "err", err)
		return report.Reply{}, report.NewRetryable(errWAL, 5*time.Second)
	}
	wal := m.wal
	src.mark(rep.Seq)
	src.pend(rep.Seq)
	m.merging.Add(1) // the minute stays until the report's rows are in
	s.mu.Unlock()

	// The write-ahead log, outside the merge lock: reports of other
	// sources merge while this one is written.
	err = s.logReport(wal, rep, raw)

	s.mu.Lock()
	src.unpend(rep.Seq)
	if err != nil {
		src.unmark(rep.Seq) // not logged: a retry must count
		m.merging.Add(-1)
		s.mu.Unlock()
		s.log.Error("report not logged; refused", "err", err)
		if errors.Is(err, report.ErrInvalid) || errors.Is(err, report.ErrTooLarge) || errors.Is(err, report.ErrVersion) {
			return report.Reply{}, err // a report in process that cannot be encoded
		}
		return report.Reply{}, report.NewRetryable(errWAL, 5*time.Second)
	}
	s.acceptedLocked(src, now)
	s.mergeReportLocked(d, m, now, true)
	reply := s.quotaReplyLocked(rep, now, s.replyLocked(), true)
	s.mu.Unlock()

	// The rows, shard by shard, without s.mu.
	s.agg.merge(rep, &d.order, m, now, true)
	m.dirty.Store(true)
	m.merging.Add(-1)
	s.met.accepted.Inc()
	s.met.mergeSeconds.Observe(time.Since(t0).Seconds())
	return reply, nil
}

// minuteLocked returns the minute rep merges into, with its write-ahead
// log open.
func (s *Server) minuteLocked(rep *report.Report, now time.Time) (*minute, error) {
	mt, retimed := s.minuteOf(rep, now)
	if retimed {
		s.met.retimed.Inc()
	}
	m := s.minutes[mt.Unix()]
	if m == nil {
		m = newMinute(mt)
		s.minutes[mt.Unix()] = m
	}
	if m.wal == nil {
		var err error
		if m.wal, err = openWAL(s.walDir, mt); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// logReport appends rep's body to the write-ahead log, encoding rep when
// the caller had no body (a report handed over in process).
func (s *Server) logReport(wal *walFile, rep *report.Report, raw []byte) error {
	if raw == nil {
		var err error
		if raw, err = rep.MarshalBinary(); err != nil {
			return err
		}
	}
	return wal.append(raw)
}

func (s *Server) reject(w http.ResponseWriter, status int, reason, msg string, retry time.Duration) {
	s.met.rejected.WithLabelValues(reason).Inc()
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="qtop"`)
	}
	if retry > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(int((retry+time.Second-1)/time.Second)))
	}
	b, _ := report.EncodeReply(report.Reply{Accepted: false, RetryAfter: retry, Message: msg})
	w.Header().Set("Content-Type", report.ReplyContentType)
	w.WriteHeader(status)
	w.Write(b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error(), 0)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
	w.Write([]byte("\n"))
}

func writeError(w http.ResponseWriter, status int, msg string, retry time.Duration) {
	if retry > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(int((retry+time.Second-1)/time.Second)))
	}
	b, _ := json.Marshal(api.ErrorBody{Error: msg, RetryAfterSeconds: retry.Seconds()})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

// redactStore drops anything that looks like credentials from a store URL.
func redactStore(u string) string {
	if i := strings.Index(u, "@"); i >= 0 {
		if j := strings.Index(u, "://"); j >= 0 && j < i {
			return u[:j+3] + "…" + u[i:]
		}
	}
	return u
}
