package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/qtop-dev/qtop/enforce"
	"github.com/qtop-dev/qtop/ingest"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/sqlcomment"
	"github.com/qtop-dev/qtop/sqlcomment/pgxcomment"
	"github.com/qtop-dev/qtop/tenant"
)

// Headers that carry the tenant and its tier. They stand in for
// authenticated data: see the package documentation.
const (
	HeaderTenant = "X-Tenant"
	HeaderTier   = "X-Tier"
)

// Defaults of Config.
const (
	DefaultListen      = "127.0.0.1:8080"
	DefaultService     = "shopapp"
	DefaultSchema      = "shopapp"
	DefaultPlan        = enforce.PlanPro
	DefaultReportSleep = 50 * time.Millisecond
	DefaultSlots       = 64
	DefaultMaxConns    = 16
	maxImportRows      = 5000
	keepRows           = 5000
)

// ErrConfig: a Config field is missing or out of range.
var ErrConfig = errors.New("shopapp: invalid config")

// Config configures an App.
type Config struct {
	// Postgres is the DSN of the database; required.
	Postgres string
	// Collector is the collector's base URL (http://host:7070); empty: the
	// app enforces locally and reports nothing.
	Collector string
	// Token is the bearer token the collector requires on reports.
	Token string
	// Service names the app in reports and in the application tag.
	Service string
	// Schema holds the app's tables, created at start when missing.
	Schema string
	// Plan is the enforce plan of every tenant (free, pro, enterprise).
	Plan string
	// Interval is how often the window is reported (default 1 s).
	Interval time.Duration
	// ReportSleep is the server time GET /reports holds a connection.
	ReportSleep time.Duration
	// Slots are the CoDel queue's places for requests in flight.
	Slots int
	// MaxConns bounds the database connections.
	MaxConns int
	Logger   *slog.Logger
}

func (c *Config) defaults() error {
	if c.Postgres == "" {
		return fmt.Errorf("%w: a PostgreSQL DSN is required (--postgres)", ErrConfig)
	}
	if c.Service == "" {
		c.Service = DefaultService
	}
	if c.Schema == "" {
		c.Schema = DefaultSchema
	}
	if c.Plan == "" {
		c.Plan = DefaultPlan
	}
	if c.Interval == 0 {
		c.Interval = ingest.DefaultInterval
	}
	if c.ReportSleep == 0 {
		c.ReportSleep = DefaultReportSleep
	}
	if c.Slots == 0 {
		c.Slots = DefaultSlots
	}
	if c.MaxConns == 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case c.Interval < 0, c.ReportSleep < 0, c.Slots < 0, c.MaxConns < 0:
		return fmt.Errorf("%w: interval, report sleep, slots and connections must not be negative", ErrConfig)
	case c.ReportSleep > time.Minute:
		return fmt.Errorf("%w: report sleep %v above a minute", ErrConfig, c.ReportSleep)
	}
	if _, ok := enforce.DefaultPlans()[c.Plan]; !ok {
		return fmt.Errorf("%w: unknown plan %q (want free, pro or enterprise)", ErrConfig, c.Plan)
	}
	return nil
}

// App is the shop service: its handler, its database and its telemetry.
// Make one with New, call Start to begin reporting, and Shutdown.
type App struct {
	cfg      Config
	db       *sql.DB
	rec      *ingest.Recorder
	rep      *ingest.Reporter // nil without a collector
	enf      *enforce.Enforcer
	tp       *sdktrace.TracerProvider
	tracer   trace.Tracer
	handler  http.Handler
	products string // quoted table name
}

// New opens the database, creates the schema and wires the recorder, the
// enforcer, the tracer and, with a collector, the reporter (not started).
func New(ctx context.Context, cfg Config) (*App, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	a := &App{cfg: cfg, products: pgx.Identifier{cfg.Schema, "products"}.Sanitize()}
	var err error
	if a.rec, err = ingest.NewRecorder(ingest.WithSource(ingest.Source{Service: cfg.Service})); err != nil {
		return nil, fmt.Errorf("shopapp: recorder: %w", err)
	}
	a.enf, err = enforce.New(enforce.WithPlanOf(func(string) string { return cfg.Plan }))
	if err != nil {
		return nil, fmt.Errorf("shopapp: enforcer: %w", err)
	}
	if cfg.Collector != "" {
		u := strings.TrimRight(cfg.Collector, "/") + "/v1/reports"
		opts := []ingest.ReporterOption{
			ingest.WithInterval(cfg.Interval),
			ingest.WithPolicyHandler(a.applyPolicy),
			ingest.WithEnforcementSource(enforcementSource(a.enf)),
		}
		if cfg.Token != "" {
			opts = append(opts, ingest.WithToken(cfg.Token))
		}
		if a.rep, err = ingest.NewReporter(u, a.rec, opts...); err != nil {
			return nil, fmt.Errorf("shopapp: reporter: %w", err)
		}
	}

	obs, err := ingest.SQLObserver(a.rec)
	if err != nil {
		return nil, fmt.Errorf("shopapp: %w", err)
	}
	a.db, err = sqlcomment.Open("pgx", cfg.Postgres,
		sqlcomment.WithApplication(cfg.Service),
		sqlcomment.WithObserver(obs),
		pgxcomment.StdlibExecMode())
	if err != nil {
		return nil, fmt.Errorf("shopapp: open database: %w", err)
	}
	a.db.SetMaxOpenConns(cfg.MaxConns)
	a.db.SetMaxIdleConns(cfg.MaxConns)
	if err := a.migrate(ctx); err != nil {
		a.db.Close()
		return nil, err
	}

	// The SQL observer records database time, so the span processor
	// leaves database spans alone.
	sp, err := ingest.NewSpanProcessor(a.rec, ingest.WithDBSpans(false))
	if err != nil {
		a.db.Close()
		return nil, fmt.Errorf("shopapp: %w", err)
	}
	a.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sp))
	a.tracer = a.tp.Tracer("github.com/qtop-dev/qtop/examples/shopapp")

	q, err := a.enf.NewQueue(cfg.Slots)
	if err != nil {
		a.db.Close()
		return nil, fmt.Errorf("shopapp: queue: %w", err)
	}
	mw, err := enforce.NewMiddleware(a.enf, enforce.WithQueue(q), enforce.WithOpFunc(opOf))
	if err != nil {
		a.db.Close()
		return nil, fmt.Errorf("shopapp: middleware: %w", err)
	}
	mux := http.NewServeMux()
	route := func(pattern string, h http.HandlerFunc) {
		mux.Handle(pattern, a.edge(mw.Wrap(a.priced(h))))
	}
	route("GET /products", a.listProducts)
	route("GET /reports", a.report)
	route("POST /catalog/import", a.importCatalog)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if err := a.db.PingContext(r.Context()); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	a.handler = mux
	return a, nil
}

// Handler returns the app's HTTP handler.
func (a *App) Handler() http.Handler { return a.handler }

// Enforcer returns the app's enforcer.
func (a *App) Enforcer() *enforce.Enforcer { return a.enf }

// Start starts reporting to the collector (nothing without one).
func (a *App) Start() {
	if a.rep != nil {
		a.rep.Start()
	}
}

// Shutdown sends the last window, stops the tracer and closes the
// database, within ctx's deadline.
func (a *App) Shutdown(ctx context.Context) error {
	var errs []error
	if a.rep != nil {
		if err := a.rep.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("shopapp: send the last report (%d reports dropped in all): %w", a.rep.Dropped(), err))
		}
	}
	// The tracer holds only the ingest processor, which returns at once:
	// it still shuts down when the reporter has used up ctx.
	if err := a.tp.Shutdown(context.WithoutCancel(ctx)); err != nil {
		errs = append(errs, fmt.Errorf("shopapp: tracer: %w", err))
	}
	if err := a.db.Close(); err != nil {
		errs = append(errs, fmt.Errorf("shopapp: close database: %w", err))
	}
	return errors.Join(errs...)
}

func (a *App) applyPolicy(p policy.Policy) {
	a.enf.ApplyPolicy(p)
	a.cfg.Logger.Info("policy applied", "version", p.Version, "rules", len(p.Rules))
}

// enforcementSource copies the enforcer's counters of each window into the
// report. CoDel drops are refusals for load like sheds (both answer 503),
// so they count as shed.
func enforcementSource(e *enforce.Enforcer) func() ingest.Enforcement {
	delta := e.StatsDelta()
	return func() ingest.Enforcement {
		s := delta()
		var out ingest.Enforcement
		for i, t := range s.Tiers {
			out.Admitted[i] = t.Admitted
			out.Throttled[i] = t.Throttled
			out.Shed[i] = t.Shed + t.Dropped
			out.ShadowThrottled[i] = t.ShadowThrottled
			out.ShadowShed[i] = t.ShadowShed + t.ShadowDropped
			out.PriceMultiplier[i] = t.Multiplier
		}
		return out
	}
}

func (a *App) migrate(ctx context.Context) error {
	stmts := []string{
		"CREATE SCHEMA IF NOT EXISTS " + pgx.Identifier{a.cfg.Schema}.Sanitize(),
		"CREATE TABLE IF NOT EXISTS " + a.products + ` (
			id bigserial PRIMARY KEY,
			tenant text NOT NULL,
			name text NOT NULL,
			price numeric(10,2) NOT NULL,
			created timestamptz NOT NULL DEFAULT now())`,
		"CREATE INDEX IF NOT EXISTS products_tenant_id ON " + a.products + " (tenant, id)",
	}
	for _, s := range stmts {
		if _, err := a.db.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("shopapp: create schema: %w", err)
		}
	}
	return nil
}

// opOf prices a request: reports scan, other reads read, the rest write.
// The middleware charges with it and priced reports with it, so both agree.
func opOf(r *http.Request) enforce.Op {
	switch {
	case r.Pattern == "GET /reports":
		return enforce.OpScan
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		return enforce.OpRead
	}
	return enforce.OpWrite
}

// edge takes the tenant from the headers, validates it, puts it in the
// context and runs next inside a server span.
func (a *App) edge(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tier, err := tenant.ParseTier(r.Header.Get(HeaderTier))
		tags := tenant.Tags{Tenant: r.Header.Get(HeaderTenant), Route: r.Pattern, Tier: tier}
		if err == nil {
			err = tags.Validate()
		}
		if err != nil {
			http.Error(w, "shopapp: bad tenant: "+err.Error(), http.StatusBadRequest)
			return
		}
		ctx, span := a.tracer.Start(tenant.With(r.Context(), tags), r.Pattern,
			trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.route", r.Pattern), attribute.String("http.request.method", r.Method)))
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		defer func() {
			span.SetAttributes(attribute.Int("http.response.status_code", sw.status), attribute.Int64("http.response.body.size", sw.n))
			if sw.status >= 500 {
				span.SetStatus(codes.Error, http.StatusText(sw.status))
			}
			span.End()
		}()
		next.ServeHTTP(sw, r.WithContext(ctx))
	})
}

// priced runs h and puts the request's RU on its span: the cost model over
// the same op, bytes and latency the middleware charges, at the price the
// enforcer applies. The middleware's charge stage already charges the
// bucket after the handler, so this only prices: charging here too would
// count every request twice against the tenant.
func (a *App) priced(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h(sw, r)
		end := time.Now()
		bytes := sw.n
		if r.ContentLength > 0 {
			bytes += r.ContentLength
		}
		tags, _ := tenant.From(r.Context())
		ru := a.enf.Model().Cost(opOf(r), bytes, end.Sub(start)) * a.enf.Multiplier(end, tags)
		trace.SpanFromContext(r.Context()).SetAttributes(ingest.AttrRU.Float64(ru))
	})
}

type product struct {
	ID    int64   `json:"id"`
	Name  string  `json:"name"`
	Price float64 `json:"price"`
}

func (a *App) listProducts(w http.ResponseWriter, r *http.Request) {
	limit, err := intParam(r, "limit", 20, 1, 100)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	tags, _ := tenant.From(r.Context())
	rows, err := a.db.QueryContext(r.Context(),
		"SELECT id, name, price::float8 FROM "+a.products+" WHERE tenant = $1 ORDER BY id DESC LIMIT $2", tags.Tenant, limit)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	defer rows.Close()
	out := []product{}
	for rows.Next() {
		var p product
		if err := rows.Scan(&p.ID, &p.Name, &p.Price); err != nil {
			a.fail(w, r, err)
			return
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, out)
}

func (a *App) report(w http.ResponseWriter, r *http.Request) {
	tags, _ := tenant.From(r.Context())
	var n int64
	var total float64
	err := a.db.QueryRowContext(r.Context(),
		`SELECT s.n, s.total FROM (
			SELECT count(DISTINCT p.id) AS n, coalesce(sum(p.price * g), 0)::float8 AS total
			FROM `+a.products+` p, generate_series(1, 20) g WHERE p.tenant = $1) s,
			pg_sleep($2::float8)`, tags.Tenant, a.cfg.ReportSleep.Seconds()).Scan(&n, &total)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, map[string]any{"tenant": tags.Tenant, "products": n, "score": total})
}

func (a *App) importCatalog(w http.ResponseWriter, r *http.Request) {
	n, err := intParam(r, "n", 200, 1, maxImportRows)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	tags, _ := tenant.From(r.Context())
	ctx := r.Context()
	tx, err := a.db.BeginTx(ctx, nil)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	res, err := tx.ExecContext(ctx,
		"INSERT INTO "+a.products+" (tenant, name, price) SELECT $1, 'item-' || g, round((random() * 100)::numeric, 2) FROM generate_series(1, $2::int) g",
		tags.Tenant, n)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	inserted, _ := res.RowsAffected()
	// Keep the table bounded: a tenant keeps its newest rows only.
	if _, err := tx.ExecContext(ctx,
		"DELETE FROM "+a.products+" WHERE tenant = $1 AND id < (SELECT min(id) FROM (SELECT id FROM "+a.products+" WHERE tenant = $1 ORDER BY id DESC LIMIT $2) k)",
		tags.Tenant, keepRows); err != nil {
		a.fail(w, r, err)
		return
	}
	if err := tx.Commit(); err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, map[string]any{"tenant": tags.Tenant, "imported": inserted})
}

// fail answers 500, or nothing when the client has gone.
func (a *App) fail(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return
	}
	a.cfg.Logger.Warn("request failed", "route", r.Pattern, "err", err)
	http.Error(w, "shopapp: internal error", http.StatusInternalServerError)
}

func intParam(r *http.Request, name string, def, lo, hi int) (int, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return def, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < lo || v > hi {
		return 0, fmt.Errorf("shopapp: %s=%q: want an integer from %d to %d", name, s, lo, hi)
	}
	return v, nil
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// statusWriter records the status and counts the body. It forwards Flush
// and unwraps for http.ResponseController.
type statusWriter struct {
	http.ResponseWriter
	status int
	n      int64
	wrote  bool
}

var _ http.Flusher = (*statusWriter)(nil)

func (s *statusWriter) WriteHeader(code int) {
	if !s.wrote {
		s.status, s.wrote = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	s.wrote = true
	n, err := s.ResponseWriter.Write(b)
	s.n += int64(n)
	return n, err
}

func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap returns the wrapped writer.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
