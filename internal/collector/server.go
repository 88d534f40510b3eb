package collector

import (
	"cmp"
	"context"
	"crypto/tls"
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
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/store"
	"github.com/qtop-dev/qtop/tlsfiles"
)

// Server is the collector. Create it with New, serve Handler (or call
// Start), and stop it with Shutdown.
//
// It composes parts with one job each, each under its own lock; it holds
// no feature logic, and its own methods are its exported API, Consume's
// one path through the parts (consume), the start (open, replay) and
// the emission of closed minutes (emit):
//   - in (intake; sources.go, screen.go, door.go): the front door for
//     reports — decode slots and memory, refusals held back, strings made
//     clean, the table of reporting processes (admission, the duplicate
//     filter) — with POST /v1/reports (door.go);
//   - minutes (openMinutes; minutes.go): the open minutes with their
//     write-ahead log (wal.go), the minutes written for good, the replay;
//     under mu;
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
//     (stream.go): live stream clients; otlp (otlpPart; otlp.go): the
//     OTLP receiver; rls (rlsPart; rls.go): the rate-limit service for
//     gateways, with Config.RLSListen, also a feature (its tick); the
//     demo fleet (demo.go) runs beside them when Config.Demo is set; life
//     (lifecycle): the background work.
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
	tokens *tokenPart // tokenfiles.go: the tokens in force
	start  time.Time

	in      intake      // sources.go, screen.go, door.go
	agg     *aggregator // aggregate.go
	em      *emitter    // emit.go
	policy  *policyPart // policy.go
	feat    features    // feature.go
	pg      *pgPart     // pg.go
	fleet   *fleet      // fleet.go: peers and the shared policy, or nil
	otlp    *otlpPart   // otlp.go
	rls     *rlsPart    // rls.go: the rate-limit service, or nil
	streams streams     // stream.go
	disk    *diskGuard  // disk.go: the free-space reserve of DataDir
	ret     *retention  // retention.go, or nil
	nodes   *nodeCheck  // storenodes.go, or nil

	mu      sync.Mutex  // guards in's sources, the open minutes, the live view and closed
	minutes openMinutes // minutes.go; their rows are in agg
	view    liveView    // merge.go, snapshot.go
	closed  bool

	boot bootState // replay.go: the write-ahead log not yet replayed (Config.ListenFirst)
	life lifecycle
}

// lifecycle holds the handles of the background work, set by Start and
// Run and released by Shutdown.
type lifecycle struct {
	wg       sync.WaitGroup // the background work
	done     chan struct{}
	doneOnce sync.Once
	lock     *os.File // flock on DataDir
	httpSrv  *http.Server
	ln       net.Listener
	cancel   context.CancelFunc
	tls      *tls.Config // Config.TLS's, nil without TLS; shared by both listeners
}

// New checks cfg, opens the store (through the spool), replays the
// write-ahead log (with Config.ListenFirst, Start does, once listening),
// reads the autopilot's saved state and returns a server that is not yet
// serving.
func New(cfg Config) (*Server, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	s, err := newParts(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.legacyStore {
		s.log.Warn("no --store given: the history stays in "+DefaultStoreFile+" in the working directory, where collectors kept it before; "+
			"the default is now the data dir: stop the collector and move the file (and its .wal) there, or pass --store",
			"store", cfg.Store, "move_to", filepath.Join(cfg.DataDir, DefaultStoreFile))
	}
	if cfg.TLS.Enabled() {
		if s.life.tls, err = tlsfiles.Server(cfg.TLS, cfg.Logger); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		if err := cfg.Registerer.Register(certExpiry(s.life.tls)); err != nil {
			return nil, fmt.Errorf("collector: metrics: %w", err)
		}
	}
	if err := os.MkdirAll(s.minutes.dir, 0o700); err != nil {
		return nil, fmt.Errorf("collector: data dir: %w", err)
	}
	admin, tokenPath, err := adminToken(cfg) // tokenfiles.go
	if err != nil {
		return nil, err
	}
	if tokenPath != "" {
		s.log.Info("no --admin-token given: policy changes take the token kept in this file", "file", tokenPath)
	}
	if s.tokens, err = newTokenPart(cfg, admin, tokenPath); err != nil {
		return nil, err
	}
	if s.life.lock, err = lockDataDir(cfg.DataDir); err != nil {
		return nil, err
	}
	if s.in.erased, err = newErasedBook(s.cfg); err != nil { // erased.go
		s.life.lock.Close()
		return nil, err
	}
	if err := s.open(); err != nil {
		s.life.lock.Close()
		return nil, err
	}
	// Before the server serves: the first GET /v1/autopilot after a
	// restart lists what the autopilot saved.
	s.feat.pilot.begin(context.Background(), time.Unix(cfg.Now().Unix(), 0).UTC())
	return s, nil
}

// newParts makes the parts and registers their metrics.
func newParts(cfg Config) (*Server, error) {
	s := &Server{
		cfg:     cfg,
		log:     cfg.Logger,
		start:   cfg.Now(),
		in:      newIntake(cfg),
		minutes: newOpenMinutes(cfg, filepath.Join(cfg.DataDir, "wal")),
		view:    newLiveView(),
		pg:      &pgPart{},
	}
	var err error
	if s.met, err = newMetrics(cfg.Registerer); err != nil {
		return nil, err
	}
	if s.guard, err = newGuardMetrics(cfg.Registerer, s); err != nil {
		return nil, fmt.Errorf("collector: metrics: %w", err)
	}
	s.in.guard, s.in.invalidTags, s.in.done = s.guard, s.met.invalidTags, s.life.doneChan()
	s.minutes.retimed = s.met.retimed
	if s.disk, err = newDiskGuard(cfg, s.minutes.dir); err != nil {
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
	s.pg.names = s.feat.names.lookup
	if cfg.Postgres != "" && !cfg.OTLPClientDBTime {
		if s.pg.dbt, err = newDBTimes(cfg.Registerer, cfg.DataDir, cfg.Postgres, s.log); err != nil {
			s.log.Warn("pg_stat_statements' totals of the last run not read: the minutes rebuilt from the write-ahead log keep their clients' DB time", "err", err)
		}
		s.em.dbt = s.pg.dbt
		s.agg.dbt = s.pg.dbt
	}
	s.feat.pilot.setBudget = func(ctx context.Context, b policy.Budget, del bool, who string) error {
		_, err := s.SetBudget(ctx, b, del, who)
		return err
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
	if s.otlp, err = newOTLPPart(s.cfg, s, &s.in, s.Authorize, s.disk, &s.boot); err != nil {
		return err
	}
	if s.rls, err = newRLSPart(s.cfg, s.policy, s.feat.quota, s.Authorize, &s.boot); err != nil {
		return err
	}
	if s.rls != nil {
		s.feat.all = append(s.feat.all, s.rls)
	}
	next, err := s.em.openStore(s.cfg)
	if err != nil {
		return err
	}
	s.policy.store, s.feat.bud.store = s.em.store, s.em.store
	s.fleet, err = newFleet(s.cfg, next, s.policy, s.tokens.peerToken)
	if err == nil {
		s.ret, err = newRetention(s.cfg, s.em.store, next)
	}
	if err == nil {
		s.nodes, err = newNodeCheck(s.cfg, next)
	}
	if err == nil {
		if s.cfg.ListenFirst {
			s.boot.pending.Store(true) // Start replays, once listening
		} else {
			err = s.replay(context.Background())
		}
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
func (s *Server) Token() string { return s.tokens.current().admin }

// Writer returns the identity under which this collector writes rollups.
func (s *Server) Writer() string { return s.em.writer }

// Store returns the store (behind its spool), or nil with StoreNone.
func (s *Server) Store() store.Store { return s.em.store }

// Handler returns the collector's HTTP API.
func (s *Server) Handler() http.Handler {
	h := httpAPI{s}
	mux := http.NewServeMux()
	mux.HandleFunc(api.PathReports, s.disk.door(h.handleReports, h.reject)) // door.go, disk.go
	mux.Handle(otlpin.PathTraces, s.otlp.recv)
	mux.HandleFunc(api.PathLive, h.authorized(RoleRead, h.handleLive))
	mux.HandleFunc("GET "+api.PathStream, h.authorized(RoleRead, h.handleStream)) // GET and HEAD; others 405
	// The views and the policy read their query strictly (strictQuery): a
	// parameter they do not have is refused, not ignored.
	mux.HandleFunc(api.PathPolicy, params(h.handlePolicy, "allow_t0"))
	mux.HandleFunc(api.PathReport, h.authorized(RoleRead, h.handleCostReport))
	mux.HandleFunc(api.PathAudit, h.authorized(RoleAdmin, params(h.handleAudit, "from", "to", "limit")))
	mux.HandleFunc(api.PathHistory, h.authorized(RoleRead, h.handleHistory))
	mux.HandleFunc(PathBudgets, params(h.handleBudgets)) // budgets.go
	mux.HandleFunc(PathRunaway, params(h.handleRunaway))
	mux.HandleFunc(api.PathFreshness, h.authorized(RoleRead, params(h.handleFreshness)))
	mux.HandleFunc(api.PathFreshnessPolicy, params(h.handleFreshnessPolicy))
	mux.HandleFunc(api.PathAutopilot, params(h.handleAutopilot)) // autopilot.go
	mux.HandleFunc(api.PathPGSignal, params(h.handlePGSignal))   // pgsignal.go
	mux.HandleFunc(PathAutopilotPolicy, params(h.handleAutopilotPolicy))
	if s.cfg.Gatherer != nil {
		mux.Handle("GET /metrics", h.authorized(RoleRead, promhttp.HandlerFor(s.cfg.Gatherer, promhttp.HandlerOpts{EnableOpenMetrics: true}).ServeHTTP))
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /readyz", readyHandler(s)) // disk.go
	return s.boot.gate(h.withFleet(mux))           // replay.go
}

// params refuses, with 400, a request whose query has a parameter other
// than names, or one twice (strictQuery), before next sees it: a
// parameter next does not read would otherwise be dropped silently (a
// dry_run=true on a policy change applied for real).
func params(next http.HandlerFunc, names ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.RawQuery != "" {
			if _, err := strictQuery(r.URL.RawQuery, names); err != nil {
				writeError(w, http.StatusBadRequest, err.Error(), 0)
				return
			}
		}
		next(w, r)
	}
}

// httpAPI is the collector's HTTP API but POST /v1/reports: each handler
// checks the request, calls the part that answers it and maps its
// result or error to a status. Each handler is in the file of its part.
type httpAPI struct{ *Server }

// Start listens on Config.Listen and runs the ticker, the sampler and the
// demo fleet until Shutdown. It returns once listening.
func (s *Server) Start(ctx context.Context) error {
	raw, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("collector: listen: %w", err)
	}
	httpConns, err := newHTTPConnMetrics(s.cfg.Registerer)
	if err != nil {
		raw.Close()
		return fmt.Errorf("collector: metrics: %w", err)
	}
	limit := limitHTTPConns(raw, s.cfg.MaxConns, httpConns, s.log, s.cfg.Now)
	var ln net.Listener = limit
	if s.life.tls != nil {
		ln = tls.NewListener(ln, s.life.tls)
	}
	s.life.ln = ln
	conns, err := newConnMetrics(s.cfg.Registerer)
	if err != nil {
		ln.Close()
		return fmt.Errorf("collector: metrics: %w", err)
	}
	s.life.httpSrv = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute, ErrorLog: httpErrorLog(s.log, newTLSRefusals("http", "http server", conns, s.log)),
		ConnContext: withConn, ConnState: limit.ConnState}
	s.life.goRun(func() {
		if err := s.life.httpSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("http server", "err", err)
		}
	})
	// OTLP and the rate-limit service listen before the log is replayed
	// too, and until it is answer each call Unavailable, saying why:
	// their exporters and gateways retry. Their admission checks refuse
	// a call after its credential and before it is read (newOTLPPart,
	// newRLSPart).
	env := grpcEnv{tls: s.life.tls, wg: &s.life.wg, m: conns, log: s.log, now: s.cfg.Now}
	if err := s.otlp.listen(s.cfg.OTLPGRPC, cmp.Or(s.cfg.OTLPGRPCMaxConns, DefaultOTLPGRPCMaxConns), env); err != nil {
		s.life.httpSrv.Close()
		return err
	}
	if s.rls != nil {
		if err := s.rls.listen(s.cfg.RLSListen, env); err != nil {
			s.life.httpSrv.Close()
			return err
		}
	}
	if s.boot.pending.Load() {
		if mins, _ := walMinutes(s.minutes.dir); len(mins) > 0 {
			s.log.Info("collector listening; replaying the write-ahead log first (until then every door but /healthz, /readyz and /metrics answers 503, and gRPC Unavailable)", "addr", ln.Addr().String(), "minutes", len(mins))
		}
		if err := s.replay(ctx); errors.Is(err, errReplayStopped) {
			s.log.Warn("stopped while replaying the write-ahead log: it is kept, and replayed in full at the next start", "reports_replayed", s.boot.reports.Load())
			return nil
		} else if err != nil {
			s.life.httpSrv.Close()
			s.otlp.stop(context.Background(), s.log) // listening since before the replay
			s.rls.stop(context.Background())
			return err
		}
	}
	s.Run(ctx)
	s.log.Info("collector listening", "addr", ln.Addr().String(), "max_conns", s.cfg.MaxConns, "store", redactStore(s.cfg.Store), "writer", s.em.writer, "demo", s.cfg.Demo, "sampler", s.cfg.Postgres != "", "tls", s.life.tls != nil, "mtls", s.cfg.TLS.ClientCA != "")
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
	if s.boot.pending.Load() { // Config.ListenFirst without Start
		if err := s.replay(ctx); err != nil {
			s.log.Error("the write-ahead log was not replayed: the collector takes no reports", "err", err)
			return
		}
	}
	ctx, s.life.cancel = context.WithCancel(ctx)
	s.otlp.recv.Start()
	s.feat.quota.start(ctx, &s.life.wg)
	// Minutes are written on a goroutine of their own: a slow write (the
	// DuckDB store rewrites a day's rows as one sorted run when the day
	// ends: seconds at 10,000 tenants) holds back no other tick's work.
	s.life.goRun(func() { every(ctx, time.Second, func() { s.tick(ctx, s.cfg.Now(), false) }) })
	s.life.goRun(func() { every(ctx, time.Second, func() { s.em.writeDue(ctx, &s.mu, &s.minutes, s.cfg.Now(), false) }) })
	s.fleet.start(ctx, &s.life.wg)
	s.life.goRun(func() { every(ctx, time.Second, func() { httpAPI{s}.stepAutopilot(ctx) }) })
	s.ret.start(ctx, &s.life.wg)
	s.nodes.start(ctx, &s.life.wg)
	if s.cfg.Postgres != "" {
		s.life.goRun(func() {
			s.pg.run(ctx, s.cfg, s.met, s.AddSample, s.feat.bud.checkRunaway)
		})
	}
	if s.cfg.Demo {
		s.life.goRun(func() { runDemo(ctx, s) })
	}
}

// goRun runs f on a goroutine that Shutdown waits for.
func (l *lifecycle) goRun(f func()) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
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
// tick. The server does it every second, the writing of minutes on a
// goroutine of its own; tests call it with a fake clock.
func (s *Server) Tick(ctx context.Context, now time.Time) { s.tick(ctx, now, true) }

// tick is Tick; with write unset it leaves the writing of minutes
// (emitter.writeDue) to its caller.
func (s *Server) tick(ctx context.Context, now time.Time, write bool) {
	if s.boot.pending.Load() {
		return // no minute is whole before the replay
	}
	s.disk.look()
	s.tokens.reload() // tokenfiles.go
	s.feat.tick(ctx, now)
	if write {
		s.em.writeDue(ctx, &s.mu, &s.minutes, now, false)
	}
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
	s.view.tick(now)
	wals := s.minutes.wals()
	s.met.openMinutes.Set(float64(len(s.minutes.byStart)))
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

// Shutdown stops accepting work, writes every open minute, flushes the
// spool (within ctx) and closes the store. Calls after the first return
// ErrShutdown.
func (s *Server) Shutdown(ctx context.Context) error {
	s.otlp.stop(ctx, s.log)
	s.rls.stop(ctx)
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
	s.life.wg.Wait()
	s.feat.pilot.flushActions() // its loop has stopped; it lets the lock go
	s.feat.quota.closeClient()  // the lock's client too, so after that
	if s.boot.pending.Load() {
		// The log was not replayed in full: the minutes are not whole and
		// the log, kept, is replayed at the next start.
		s.log.Warn("shutdown before the write-ahead log was replayed: no minute written; the log is kept for the next start")
	} else {
		s.em.writeDue(ctx, &s.mu, &s.minutes, s.cfg.Now(), true)
	}
	s.mu.Lock()
	for _, w := range s.minutes.wals() {
		w.sync()
		w.close()
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
	if s.boot.pending.Load() {
		return report.Reply{}, report.NewRetryable(errors.New(s.boot.status()), replayRetry)
	}
	if err := s.disk.admit(int64(len(raw)) + 8); err != nil {
		return report.Reply{}, err
	}
	t0 := time.Now()
	d := s.in.take()
	d.age = 0 // in process: sent as it was cut
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
	if s.in.erased.drop(rep) { // erased.go: a report buffered across an erasure
		raw = nil
	}
	// Everything that needs no shared state runs before the lock, on as
	// many cores as there are requests: string checks, sparse latencies,
	// the rows' shard order.
	s.in.screen(rep)
	d.prepare(s.agg)

	// Under the lock: admission, the duplicate filter, the minute.
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return report.Reply{}, report.NewRetryable(errShuttingDown, time.Second)
	}
	now := s.cfg.Now()
	src := s.in.source(sourceKey(rep.Source), now)
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
		reply := s.feat.reply(rep, now, s.policy.reply(), false)
		s.mu.Unlock()
		return reply, nil
	case seqStale:
		s.mu.Unlock()
		return report.Reply{}, fmt.Errorf("%w: sequence %d is more than %d behind %d", errStale, rep.Seq, seqWindow, src.max)
	}
	m, err := s.minutes.take(rep.Start, rep.End, now)
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
	err = wal.appendReport(rep, raw)

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
	s.in.accepted(src, rep, now)
	live := s.met.fresh(d.age)
	s.feat.merge(rep, now, live)
	s.view.merge(d, m, now, live)
	reply := s.feat.reply(rep, now, s.policy.reply(), true)
	s.mu.Unlock()

	// The rows, shard by shard, without s.mu.
	s.agg.merge(rep, &d.order, m, now, live)
	m.dirty.Store(true)
	m.merging.Add(-1)
	s.met.merged(t0)
	return reply, nil
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
