package collector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/internal/otlpin"
	"github.com/qtop-dev/qtop/meter"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/store"
)

// Server is the collector. Create it with New, serve Handler (or call
// Start), and stop it with Shutdown.
//
// It is made of parts with one job each:
//   - in (intake; sources.go, screen.go): the front door for reports —
//     decode slots and memory, refusals held back, the table of reporting
//     processes (admission, the duplicate filter);
//   - the open minutes, their write-ahead log (wal.go) and their emission
//     to the store through the spool (emit, below);
//   - agg (aggregator; aggregate.go): each open minute's rows and every
//     tenant's live windows, in shards by tenant, each under its own lock;
//   - view (liveView; merge.go, snapshot.go): services, hot keys,
//     enforcement and reports per second, and the snapshots made of them;
//   - the policy (policy.go) and what it drives: budgets (budgets.go),
//     fleet quotas (quota.go), freshness (freshness.go), runaway
//     statements (runaway.go);
//   - the PostgreSQL sampler (pg.go), the OTLP receiver (otlp.go) and the
//     peers of a fleet (fleet.go).
//
// Everything but the aggregator's shards is under mu. A report takes mu
// twice, briefly — admission and the duplicate filter, then its
// per-report merge and reply — writes the log between the two, and then
// takes once each shard that has rows of it, without mu.
type Server struct {
	// Set once by New.
	cfg    Config
	log    *slog.Logger
	met    *metrics
	guard  *guardMetrics
	token  string // policy token: Config.Token or a random one
	store  store.Store
	spool  *store.Spool
	writer string
	walDir string
	start  time.Time

	in      intake      // sources.go
	agg     *aggregator // aggregate.go
	streams streams     // live stream clients and their shared events (stream.go)

	mu sync.Mutex // guards everything below but the background work's handles

	// The open minutes (their rows are in agg).
	minutes   map[int64]*minute
	finalized map[int64]struct{} // minutes written for good (last 3 h)
	lastFinal int64
	version   uint64 // of the last emission (nextVersionLocked)
	storeErr  string

	view liveView // merge.go, snapshot.go

	// The policy and what it drives.
	policy       policy.Policy
	reply        []byte // the reply to a report, with the policy, for replyVersion
	replyVersion uint64
	bud          budgetLive  // budgets.go
	quota        *fleetQuota // quota.go
	fresh        *freshState // freshness samples and counters (freshness.go)

	pg pgState // the PostgreSQL sampler's part of the live view (pg.go)

	closed   bool
	done     chan struct{}
	doneOnce sync.Once

	// Background work.
	otlp    *otlpState // OTLP receiver (otlp.go)
	lock    *os.File   // flock on DataDir
	fleet   *fleet     // peers and the shared policy (fleet.go), or nil
	httpSrv *http.Server
	ln      net.Listener
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// New checks cfg, opens the store (through the spool), replays the
// write-ahead log and returns a server that is not yet serving.
func New(cfg Config) (*Server, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	s := &Server{
		cfg:       cfg,
		log:       cfg.Logger,
		walDir:    filepath.Join(cfg.DataDir, "wal"),
		start:     cfg.Now(),
		in:        newIntake(),
		minutes:   make(map[int64]*minute),
		finalized: make(map[int64]struct{}),
		view:      newLiveView(),
	}
	var err error
	if s.met, err = newMetrics(cfg.Registerer); err != nil {
		return nil, err
	}
	if s.guard, err = newGuardMetrics(cfg.Registerer, s); err != nil {
		return nil, fmt.Errorf("collector: metrics: %w", err)
	}
	s.agg = newAggregator(cfg, s.met, s.guard)
	if err := cfg.Registerer.Register(shedCollector{s}); err != nil {
		return nil, fmt.Errorf("collector: metrics: %w", err)
	}
	if s.quota, err = newFleetQuota(cfg); err != nil {
		return nil, err
	}
	if err := cfg.Registerer.Register(ratioCollector{s}); err != nil {
		return nil, fmt.Errorf("collector: metrics: %w", err)
	}
	if err := s.bud.register(s, cfg.Registerer); err != nil { // budgets.go
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
	if s.lock, err = lockDataDir(cfg.DataDir); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			s.lock.Close()
		}
	}()
	if s.writer, err = writerID(cfg); err != nil {
		return nil, err
	}
	if err := s.loadPolicy(); err != nil {
		return nil, err
	}
	if err := s.newOTLP(); err != nil {
		return nil, err
	}
	s.version = loadVersion(cfg.DataDir)
	var next store.Store
	if cfg.Store != StoreNone {
		open := cfg.OpenStore
		if open == nil {
			open = func(u string) (store.Store, error) { return OpenStore(context.Background(), u, cfg) }
		}
		next, err = open(cfg.Store)
		if err != nil {
			u, _ := store.ParseURL(cfg.Store)
			if u.Scheme != store.SchemeClickHouse || errors.Is(err, ErrConfig) {
				return nil, err
			}
			// A server that is down now may answer later: start anyway,
			// log and acknowledge reports, and keep the minutes in the
			// spool until it does.
			s.log.Warn("store not reachable; starting anyway, rows wait in the spool", "store", redactStore(cfg.Store), "err", err)
			s.storeErr = err.Error()
			next = &lazyStore{log: s.log, lastTry: time.Now(), lastErr: err,
				open: func(context.Context) (store.Store, error) { return open(cfg.Store) }}
		}
		opts := []store.SpoolOption{store.WithRegisterer(cfg.Registerer), store.WithLogger(s.log)}
		if cfg.SpoolMaxBytes > 0 {
			opts = append(opts, store.WithMaxBytes(cfg.SpoolMaxBytes))
		}
		s.spool, err = store.NewSpool(next, filepath.Join(cfg.DataDir, "spool"), opts...)
		if err != nil {
			next.Close()
			return nil, err
		}
		s.store = s.spool
	}
	err = s.initFleet(next)
	if err == nil {
		err = s.replay()
	}
	if err != nil {
		if s.store != nil {
			s.store.Close()
		}
		return nil, err
	}
	ok = true
	return s, nil
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
func (s *Server) Writer() string { return s.writer }

// Store returns the store (behind its spool), or nil with StoreNone.
func (s *Server) Store() store.Store { return s.store }

// replay merges the reports of the write-ahead log into their minutes, so
// that minutes a killed collector had not finished are emitted again in
// full.
func (s *Server) replay() error {
	mins, err := walMinutes(s.walDir)
	if err != nil {
		return err
	}
	d := new(decoded)
	rep := &d.rep
	now := s.cfg.Now()
	for _, mt := range mins {
		m := newMinute(mt)
		n := 0
		cut, err := readWAL(walPath(s.walDir, mt), func(body []byte) error {
			if err := rep.UnmarshalBinary(body); err != nil {
				s.log.Warn("wal: undecodable report skipped", "minute", mt, "err", err)
				return nil
			}
			s.screen(rep)
			src := s.sourceLocked(sourceKey(rep.Source), now)
			if src.last.IsZero() {
				src.last = now // and its bucket full, as a new one is
			}
			if src.check(rep.Seq) == seqDup {
				return nil
			}
			src.mark(rep.Seq)
			s.acceptedLocked(src, now)
			d.prepare(s.agg)
			s.mergeReportLocked(d, m, now, false)
			s.agg.merge(rep, &d.order, m, now, false)
			n++
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

// Handler returns the collector's HTTP API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(api.PathReports, s.handleReports)
	mux.Handle(otlpin.PathTraces, s.otlp.recv)
	mux.HandleFunc(api.PathLive, s.authorized(RoleRead, s.handleLive))
	mux.HandleFunc(api.PathStream, s.authorized(RoleRead, s.handleStream))
	mux.HandleFunc(api.PathPolicy, s.handlePolicy)
	mux.HandleFunc(api.PathReport, s.authorized(RoleRead, s.handleCostReport))
	mux.HandleFunc(api.PathAudit, s.authorized(RoleAdmin, s.handleAudit))
	mux.HandleFunc(api.PathHistory, s.authorized(RoleRead, s.handleHistory))
	mux.HandleFunc(PathBudgets, s.handleBudgets) // budgets.go
	mux.HandleFunc(PathRunaway, s.handleRunaway)
	mux.HandleFunc(api.PathFreshness, s.authorized(RoleRead, s.handleFreshness))
	mux.HandleFunc(api.PathFreshnessPolicy, s.handleFreshnessPolicy)
	if s.cfg.Gatherer != nil {
		mux.Handle("/metrics", s.authorized(RoleRead, promhttp.HandlerFor(s.cfg.Gatherer, promhttp.HandlerOpts{}).ServeHTTP))
	}
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	return s.withFleet(mux)
}

// Start listens on Config.Listen and runs the ticker, the sampler and the
// demo fleet until Shutdown. It returns once listening.
func (s *Server) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("collector: listen: %w", err)
	}
	s.ln = ln
	if err := s.listenOTLP(); err != nil {
		ln.Close()
		return err
	}
	s.httpSrv = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.httpSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("http server", "err", err)
		}
	}()
	s.Run(ctx)
	s.log.Info("collector listening", "addr", ln.Addr().String(), "store", redactStore(s.cfg.Store), "writer", s.writer, "demo", s.cfg.Demo, "sampler", s.cfg.Postgres != "")
	return nil
}

// Addr returns the address Start listens on.
func (s *Server) Addr() string {
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Run starts the background work — the once-a-second tick that writes
// closed minutes, the pg sampler and the demo fleet — without an HTTP
// listener (for callers that serve Handler themselves). Shutdown stops it.
func (s *Server) Run(ctx context.Context) {
	ctx, s.cancel = context.WithCancel(ctx)
	s.startOTLP()
	s.runQuotaSync(ctx, &s.wg)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.tickLoop(ctx)
	}()
	s.runFleet(ctx)
	if s.cfg.Postgres != "" {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.runSampler(ctx)
		}()
	}
	if s.cfg.Demo {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.runDemo(ctx)
		}()
	}
}

func (s *Server) tickLoop(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.Tick(ctx, s.cfg.Now())
		}
	}
}

// Tick does the once-a-second work at now: writes minutes whose grace has
// passed, drops minutes no late report can change, prunes idle state,
// syncs the write-ahead log and checks the store. The server calls it
// every second; tests call it with a fake clock.
func (s *Server) Tick(ctx context.Context, now time.Time) {
	s.flushBudgetAudit(ctx) // budgets.go
	s.emit(ctx, now, false)
	// The aggregator's part takes only its shards' locks (one at a time),
	// so reports go on merging meanwhile; the ranking and the series have
	// their own.
	s.agg.prune(now.Unix())
	s.agg.flushRanking(now)
	s.met.ranking.Rerank()
	s.met.tenants.refresh(s.met.ranking.Members(), now)
	s.mu.Lock()
	s.pruneLocked(now)
	s.prunePolicyLocked(now)
	for _, sv := range s.view.services {
		if v, ok := sv.sig.ValueAt(now); ok && !math.IsNaN(v) && !math.IsInf(v, 0) {
			sv.ratio.set(now.Unix()-1, v)
		}
	}
	var walBytes int64
	var wals []*walFile
	for _, m := range s.minutes {
		if m.wal != nil {
			walBytes += m.wal.size.Load()
			wals = append(wals, m.wal)
		}
	}
	s.met.walBytes.Set(float64(walBytes))
	s.met.openMinutes.Set(float64(len(s.minutes)))
	s.met.sources.Set(float64(len(s.in.sources)))
	s.met.tenantsTracked.Set(float64(s.agg.tenants.Load()))
	clear(s.view.snapCache)
	s.mu.Unlock()
	for _, w := range wals {
		w.sync() // fsync outside the merge lock
	}
	if s.store != nil && now.Unix()%5 == 0 {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := s.store.Ping(pctx)
		cancel()
		if err == nil {
			err = s.spoolDraining()
		}
		s.mu.Lock()
		if err != nil {
			s.storeErr = err.Error()
			s.met.storeHealthy.Set(0)
		} else {
			s.storeErr = ""
			s.met.storeHealthy.Set(1)
		}
		s.mu.Unlock()
	}
}

// nextVersionLocked returns a rollup version above every one this writer
// used before, across restarts: it follows the clock, and never goes below
// the last version, which is kept in DataDir so a clock set back across a
// restart cannot make a re-emitted row lose to an older one.
func (s *Server) nextVersionLocked() uint64 {
	v := max(s.version+1, uint64(s.cfg.Now().UnixNano()))
	s.version = v
	p := filepath.Join(s.cfg.DataDir, versionFile)
	if err := os.WriteFile(p+".tmp", []byte(strconv.FormatUint(v, 10)), 0o600); err == nil {
		os.Rename(p+".tmp", p)
	}
	return v
}

const versionFile = "version"

func loadVersion(dir string) uint64 {
	b, err := os.ReadFile(filepath.Join(dir, versionFile))
	if err != nil {
		return 0
	}
	v, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return v
}

// emission is what one minute hands to the store.
type emission struct {
	m       *minute
	rollups []store.Rollup
	hotKeys []store.HotKey
	stmts   []store.Statement
}

// emit writes every changed minute whose grace has passed (all changed
// minutes when all is set), and drops minutes past the late horizon.
func (s *Server) emit(ctx context.Context, now time.Time, all bool) {
	var todo []emission
	s.mu.Lock()
	for k, m := range s.minutes {
		closeAt := m.start.Add(time.Minute + s.cfg.Grace)
		if m.dirty.Load() && (all || !now.Before(closeAt)) {
			if s.store == nil {
				m.dirty.Store(false)
			} else {
				todo = append(todo, s.buildLocked(m))
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
	for _, e := range todo {
		err := s.write(ctx, e)
		switch {
		case err == nil:
		case errors.Is(err, store.ErrInvalid):
			// Writing again cannot make these rows valid; say so loudly.
			s.met.storeErrors.Inc()
			s.log.Error("store refused rows of a minute as invalid; they are not retried", "minute", e.m.start, "err", err)
		default:
			s.met.storeErrors.Inc()
			s.log.Error("minute not written; trying again next tick", "minute", e.m.start, "err", err)
			e.m.dirty.Store(true)
		}
	}
}

// write hands one minute's rows to the store, table by table; an invalid
// table does not keep the others from being written.
func (s *Server) write(ctx context.Context, e emission) error {
	var errs []error
	if err := s.store.WriteRollups(ctx, e.rollups); err != nil {
		errs = append(errs, err)
	} else {
		s.met.rollupsWritten.WithLabelValues("rollups").Add(float64(len(e.rollups)))
	}
	if err := s.store.WriteHotKeys(ctx, e.hotKeys); err != nil {
		errs = append(errs, err)
	} else {
		s.met.rollupsWritten.WithLabelValues("hot_keys").Add(float64(len(e.hotKeys)))
	}
	if err := s.store.WriteStatements(ctx, e.stmts); err != nil {
		errs = append(errs, err)
	} else {
		s.met.rollupsWritten.WithLabelValues("statements").Add(float64(len(e.stmts)))
	}
	for _, err := range errs {
		if !errors.Is(err, store.ErrInvalid) {
			return errors.Join(errs...) // retried: the writes are idempotent
		}
	}
	return errors.Join(errs...)
}

// buildLocked turns a minute into store rows at a new version and marks it
// clean. s.mu is held.
func (s *Server) buildLocked(m *minute) emission {
	v := s.nextVersionLocked()
	m.dirty.Store(false) // before the rows are read: see minute.dirty
	e := emission{m: m, rollups: make([]store.Rollup, 0, m.nrows.Load())}
	s.agg.rows(m, func(k rowKey, a *rowAgg) {
		r := store.Rollup{
			Minute: m.start, Writer: s.writer, Version: v,
			Service: k.service, Tenant: k.tenant, Route: k.route, Tier: a.tier(), Kind: k.kind.String(),
			Count: a.count, Errors: a.errors, DurationSeconds: a.dur, RU: a.ru,
			Bytes: a.bytes, Rows: a.rows, ActiveSessionSeconds: a.active,
			Latency: a.lat.Clone(),
		}
		if r.Tenant == "" && k.kind == meter.KindPG {
			r.Tenant = "" // untagged sessions: the unattributed line of cost reports
		}
		e.rollups = append(e.rollups, r)
	})
	if m.keys != nil {
		at := make(map[string]int)
		for _, c := range m.keys.Top(hotKeysPerMinute) {
			k := s.cleanKey(c.Key)
			if i, dup := at[k]; dup { // two keys cut to the same prefix
				addSat(&e.hotKeys[i].Count, c.Count)
				addSat(&e.hotKeys[i].Err, c.Err)
				continue
			}
			at[k] = len(e.hotKeys)
			e.hotKeys = append(e.hotKeys, store.HotKey{
				Minute: m.start, Writer: s.writer, Version: v,
				Key: k, Tenant: m.keyTenants[c.Key], Count: c.Count, Err: c.Err,
			})
		}
	}
	for _, st := range m.stmts {
		e.stmts = append(e.stmts, st)
	}
	m.stmts = nil // statements are written once
	return e
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
	s.doneChan()
	close(s.done)
	var errs []error
	if s.httpSrv != nil {
		errs = append(errs, s.httpSrv.Shutdown(ctx))
	}
	if s.cancel != nil {
		s.cancel()
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
	if s.spool != nil {
		if err := s.spool.Flush(ctx); err != nil {
			s.log.Warn("spool not empty at shutdown; kept on disk for the next start", "err", err)
		}
		errs = append(errs, s.spool.Close())
	}
	s.lock.Close()
	return errors.Join(errs...)
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
	if ct := r.Header.Get("Content-Type"); !contentTypeIs(ct, meter.ContentType) {
		refuse(http.StatusUnsupportedMediaType, reasonContentType,
			fmt.Sprintf("Content-Type %q: a report is %s", ct, meter.ContentType))
		return
	}
	if r.ContentLength > meter.MaxReportBytes {
		refuse(http.StatusRequestEntityTooLarge, reasonTooLarge,
			fmt.Sprintf("report of %d bytes, at most %d", r.ContentLength, meter.MaxReportBytes))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, meter.MaxReportBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			refuse(http.StatusRequestEntityTooLarge, reasonTooLarge, fmt.Sprintf("report larger than %d bytes", meter.MaxReportBytes))
			return
		}
		refuse(http.StatusBadRequest, reasonMalformed, "reading body: "+err.Error())
		return
	}
	// A header that cannot be decoded (a bomb, a claim beyond what the
	// body can expand to) is refused before it takes a decode slot.
	if err := meter.CheckHeader(body); err != nil {
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
	budget := meter.DecodeBudget(body)
	if !s.in.decode.TryAcquire(budget) {
		<-s.in.inflight
		s.reject(w, http.StatusServiceUnavailable, reasonBusy, "collector busy decoding other reports", time.Second)
		return
	}
	status, reason, msg, retry, reply := s.Ingest(body)
	s.in.decode.Release(budget)
	<-s.in.inflight
	if status != http.StatusOK {
		s.holdRefusal(w, r, status)
		s.reject(w, status, reason, msg, retry)
		return
	}
	w.Header().Set("Content-Type", meter.ReplyContentType)
	w.Write(reply)
}

// Ingest decodes, logs and merges one report body, as POST /v1/reports
// does; the demo fleet calls it directly. It returns the HTTP status, the
// rejection reason and message when refused, and the reply body when
// accepted.
func (s *Server) Ingest(body []byte) (status int, reason, msg string, retry time.Duration, reply []byte) {
	t0 := time.Now()
	var d *decoded
	select {
	case d = <-s.in.reports:
	default:
		d = new(decoded)
	}
	defer func() {
		if cap(d.rep.Rows) > pooledRows {
			return // a pooled report keeps its rows: keep only small ones
		}
		d.rep.Reset() // rows (and their latencies' memory) kept, nothing else
		select {
		case s.in.reports <- d:
		default:
		}
	}()
	rep := &d.rep
	if err := rep.UnmarshalBinary(body); err != nil {
		status, reason := decodeStatus(err)
		return status, reason, err.Error(), 0, nil
	}
	// Everything that needs no shared state runs before the lock, on as
	// many cores as there are requests: string checks, sparse latencies,
	// the rows' shard order.
	s.screen(rep)
	d.prepare(s.agg)

	// Under the lock: admission, the duplicate filter, the minute.
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return http.StatusServiceUnavailable, reasonBusy, "collector shutting down", time.Second, nil
	}
	now := s.cfg.Now()
	src := s.sourceLocked(sourceKey(rep.Source), now)
	if wait, ok := src.admit(now, s.cfg.SourceRate); !ok {
		s.mu.Unlock()
		return http.StatusTooManyRequests, reasonAdmission,
			fmt.Sprintf("source %s/%s sends more than %.0f reports/s", rep.Source.Service, rep.Source.Instance, s.cfg.SourceRate), max(wait, 100*time.Millisecond), nil
	}
	switch src.check(rep.Seq) {
	case seqDup:
		if src.isPending(rep.Seq) {
			s.mu.Unlock()
			return http.StatusServiceUnavailable, reasonBusy, "the same report is being logged; retry", time.Second, nil
		}
		s.met.duplicates.Inc()
		reply := s.quotaReplyLocked(rep, now, s.replyLocked(), false)
		s.mu.Unlock()
		return http.StatusOK, "", "", 0, reply
	case seqStale:
		s.mu.Unlock()
		return http.StatusConflict, reasonStale, fmt.Sprintf("sequence %d is more than %d behind %d", rep.Seq, seqWindow, src.max), 0, nil
	}
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
			s.mu.Unlock()
			s.log.Error("report not logged; refused", "err", err)
			return http.StatusServiceUnavailable, reasonWAL, "collector cannot log the report", 5 * time.Second, nil
		}
	}
	wal := m.wal
	src.mark(rep.Seq)
	src.pend(rep.Seq)
	m.merging.Add(1) // the minute stays until the report's rows are in
	s.mu.Unlock()

	// The write-ahead log, outside the merge lock: reports of other
	// sources merge while this one is written.
	err := wal.append(body)

	s.mu.Lock()
	src.unpend(rep.Seq)
	if err != nil {
		src.unmark(rep.Seq) // not logged: a retry must count
		m.merging.Add(-1)
		s.mu.Unlock()
		s.log.Error("report not logged; refused", "err", err)
		return http.StatusServiceUnavailable, reasonWAL, "collector cannot log the report", 5 * time.Second, nil
	}
	s.acceptedLocked(src, now)
	s.mergeReportLocked(d, m, now, true)
	reply = s.quotaReplyLocked(rep, now, s.replyLocked(), true)
	s.mu.Unlock()

	// The rows, shard by shard, without s.mu.
	s.agg.merge(rep, &d.order, m, now, true)
	m.dirty.Store(true)
	m.merging.Add(-1)
	s.met.accepted.Inc()
	s.met.mergeSeconds.Observe(time.Since(t0).Seconds())
	return http.StatusOK, "", "", 0, reply
}

func (s *Server) reject(w http.ResponseWriter, status int, reason, msg string, retry time.Duration) {
	s.met.rejected.WithLabelValues(reason).Inc()
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="qtop"`)
	}
	if retry > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(int((retry+time.Second-1)/time.Second)))
	}
	b, _ := meter.EncodeReply(meter.Reply{Accepted: false, RetryAfter: retry, Message: msg})
	w.Header().Set("Content-Type", meter.ReplyContentType)
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
