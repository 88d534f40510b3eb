package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qtop-dev/qtop/enforce"
	"github.com/qtop-dev/qtop/freshness"
	"github.com/qtop-dev/qtop/meter"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/ratio"
	"github.com/qtop-dev/qtop/report"
	"github.com/qtop-dev/qtop/tenant"
)

// Config configures the balance service.
type Config struct {
	Service   string
	Collector string // collector base URL; empty: no reporting
	Token     string
	Interval  time.Duration
	// Slots is the backend's concurrency and Work the time one balance
	// read holds a slot: the backend serves Slots/Work reads a second.
	Slots int
	Work  time.Duration
	// Key signs the ETags (at least 16 bytes; default random, which is
	// right for one process only).
	Key []byte
	// Sampling follows 1 account in Sampling for the repeat-share report
	// (0: none).
	Sampling int
	// Rules is the freshness policy until the collector sends one.
	Rules policy.Freshness
	// Clock is the freshness middleware's clock (default time.Now); the
	// replay drives it with the trace's time.
	Clock      func() time.Time
	Registerer prometheus.Registerer
	Logger     *slog.Logger
}

// MaxAccounts bounds the ledger.
const MaxAccounts = 1_000_000

// Errors of the service.
var (
	ErrConfig  = errors.New("balance: invalid configuration")
	ErrAccount = errors.New("balance: invalid account")
)

func (c *Config) defaults() error {
	if c.Service == "" {
		c.Service = "balance"
	}
	if c.Interval == 0 {
		c.Interval = time.Second
	}
	if c.Slots == 0 {
		c.Slots = 4
	}
	if c.Work == 0 {
		c.Work = 10 * time.Millisecond
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Key == nil {
		c.Key = make([]byte, 32)
		rand.Read(c.Key)
	}
	if c.Slots < 1 || c.Work < 0 || c.Sampling < 0 {
		return fmt.Errorf("%w: slots %d, work %v, sampling %d", ErrConfig, c.Slots, c.Work, c.Sampling)
	}
	return nil
}

// App is the account-balance service: GET /accounts/{id}/balance reads a
// balance through a backend of limited capacity, POST
// /accounts/{id}/transactions?amount=N changes it. Each GET goes through
// the freshness middleware (outermost, so a 304 it serves costs nothing
// downstream), then enforce's middleware (tier shedder → CoDel queue of
// Slots → RU bucket), then the handler.
type App struct {
	cfg     Config
	ledger  ledger
	signer  *freshness.ETagSigner
	enf     *enforce.Enforcer
	queue   *enforce.Queue
	fresh   *freshness.Shedder
	rec     *meter.Recorder
	rep     *meter.Reporter
	handler http.Handler
	reads   atomic.Uint64 // backend reads: the work freshness avoids
}

// New wires the service (the reporter, with a collector, is not started).
func New(cfg Config) (*App, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	a := &App{cfg: cfg}
	a.ledger.m = make(map[string]int64)
	var err error
	if a.signer, err = freshness.NewETagSigner(cfg.Key); err != nil {
		return nil, err
	}
	// Every account is its own tenant with room for far more than an app
	// asks; the latency ratio drives the tier prices.
	plans := map[string]enforce.Plan{enforce.PlanFree: {Limit: enforce.Limit{RUPerSecond: 1000, Burst: 1000}, Weight: 1}}
	if a.enf, err = enforce.New(enforce.WithPlans(plans), enforce.WithSignal(ratio.NewSignal())); err != nil {
		return nil, err
	}
	if a.queue, err = a.enf.NewQueue(cfg.Slots); err != nil {
		return nil, err
	}
	mw, err := enforce.NewMiddleware(a.enf, enforce.WithQueue(a.queue), enforce.WithTenantFunc(accountTags))
	if err != nil {
		return nil, err
	}
	fopts := []freshness.Option{freshness.WithRules(cfg.Rules), freshness.WithOverloadOf(a.enf, a.queue),
		freshness.WithClock(cfg.Clock), freshness.WithSampling(cfg.Sampling),
		freshness.WithCallerFunc(func(r *http.Request) string { return r.PathValue("id") })}
	if cfg.Registerer != nil {
		fopts = append(fopts, freshness.WithRegisterer(cfg.Registerer))
	}
	if a.fresh, err = freshness.New(a.signer, fopts...); err != nil {
		return nil, err
	}
	if a.rec, err = meter.NewRecorder(meter.WithSource(report.Source{Service: cfg.Service})); err != nil {
		return nil, err
	}
	if cfg.Collector != "" {
		opts := []meter.ReporterOption{meter.WithInterval(cfg.Interval), meter.WithPolicyHandler(a.applyPolicy),
			meter.WithSectionSource(freshness.Source(a.fresh))}
		if cfg.Token != "" {
			opts = append(opts, meter.WithToken(cfg.Token))
		}
		if a.rep, err = meter.NewReporter(strings.TrimRight(cfg.Collector, "/")+"/v1/reports", a.rec, opts...); err != nil {
			return nil, err
		}
	}
	mux := http.NewServeMux()
	mux.Handle("GET /accounts/{id}/balance", a.fresh.Wrap(mw.Wrap(http.HandlerFunc(a.balance))))
	mux.Handle("POST /accounts/{id}/transactions", mw.Wrap(http.HandlerFunc(a.transact)))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	a.handler = mux
	return a, nil
}

// Handler returns the service's handler.
func (a *App) Handler() http.Handler { return a.handler }

// Freshness returns the freshness middleware.
func (a *App) Freshness() *freshness.Shedder { return a.fresh }

// Reads returns the backend reads so far.
func (a *App) Reads() uint64 { return a.reads.Load() }

// Start starts reporting (nothing without a collector).
func (a *App) Start() {
	if a.rep != nil {
		a.rep.Start()
	}
}

// Shutdown sends the last report and closes the queue.
func (a *App) Shutdown(ctx context.Context) error {
	defer a.queue.Close()
	if a.rep != nil {
		return a.rep.Shutdown(ctx)
	}
	return nil
}

func (a *App) applyPolicy(p policy.Policy) {
	a.enf.ApplyPolicy(p)
	a.fresh.ApplyPolicy(p)
	a.cfg.Logger.Info("policy applied", "version", p.Version, "freshness", p.Freshness != nil)
}

// validAccount accepts 1 to 32 of [a-z0-9-].
func validAccount(id string) error {
	if id == "" || len(id) > 32 {
		return fmt.Errorf("%w: %q (1 to 32 of a-z, 0-9, -)", ErrAccount, id)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return fmt.Errorf("%w: %q (1 to 32 of a-z, 0-9, -)", ErrAccount, id)
		}
	}
	return nil
}

// accountTags makes each account its own tenant. A real service takes the
// account from the authenticated session, never from the path alone.
func accountTags(r *http.Request) (tenant.Tags, error) {
	id := r.PathValue("id")
	if err := validAccount(id); err != nil {
		return tenant.Tags{}, err
	}
	return tenant.Tags{Tenant: "acct-" + id, Route: r.Pattern, Tier: tenant.T2}, nil
}

// balanceBody is the response of a balance read: a function of the
// balance alone, so that its hash changes exactly when the data does.
func balanceBody(id string, minor int64) []byte {
	return fmt.Appendf(nil, `{"account":%q,"balance_minor":%d,"currency":"GBP"}`+"\n", id, minor)
}

func (a *App) balance(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	// The backend read: it holds one of the Slots (the CoDel queue in
	// front admits Slots at a time) for Work.
	a.reads.Add(1)
	select {
	case <-time.After(a.cfg.Work):
	case <-r.Context().Done():
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(balanceBody(id, a.ledger.get(id)))
}

func (a *App) transact(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	amount, err := strconv.ParseInt(r.URL.Query().Get("amount"), 10, 64)
	if err != nil || amount < -1e12 || amount > 1e12 {
		http.Error(w, "balance: amount must be an integer of at most 10^12 minor units", http.StatusBadRequest)
		return
	}
	if err := a.ledger.add(id, amount); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// ledger holds the balances in memory.
type ledger struct {
	mu sync.RWMutex
	m  map[string]int64
}

func (l *ledger) get(id string) int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.m[id]
}

func (l *ledger) add(id string, amount int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.m[id]; !ok && len(l.m) >= MaxAccounts {
		return fmt.Errorf("balance: ledger full (%d accounts)", MaxAccounts)
	}
	l.m[id] += amount
	return nil
}
