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
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/qtop-dev/qtop/agent"
	"github.com/qtop-dev/qtop/enforce"
	"github.com/qtop-dev/qtop/meter"
	"github.com/qtop-dev/qtop/ru"
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
		c.Interval = meter.DefaultInterval
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

// App is the shop service: its handler and its database, instrumented by
// one qtop agent. Make one with New and end it with Shutdown.
type App struct {
	cfg      Config
	agent    *agent.Agent
	tp       *sdktrace.TracerProvider
	db       *sql.DB
	handler  http.Handler
	products string // quoted table name
}

// New opens the database, creates the schema and starts the agent, which
// reports to the collector when there is one.
func New(ctx context.Context, cfg Config) (*App, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	a := &App{cfg: cfg, products: pgx.Identifier{cfg.Schema, "products"}.Sanitize()}
	// Spans get the tenant too; the agent records requests and statements
	// itself, so nothing is counted twice.
	a.tp = sdktrace.NewTracerProvider()
	opts := []agent.Option{
		agent.WithService(cfg.Service),
		agent.WithTenant(agent.FromHeader(HeaderTenant, HeaderTier)),
		agent.WithPlans(enforce.DefaultPlans(), func(string) string { return cfg.Plan }),
		agent.WithSlots(cfg.Slots),
		agent.WithInterval(cfg.Interval),
		agent.WithOp(opOf),
		agent.WithLogger(cfg.Logger),
		agent.WithTracerProvider(a.tp),
	}
	if cfg.Collector != "" {
		opts = append(opts, agent.WithCollector(cfg.Collector, cfg.Token))
	}
	var err error
	if a.agent, err = agent.New(opts...); err != nil {
		return nil, fmt.Errorf("shopapp: %w", err)
	}
	if a.db, err = a.agent.OpenDB("pgx", cfg.Postgres); err != nil {
		a.agent.Shutdown(ctx)
		return nil, fmt.Errorf("shopapp: open database: %w", err)
	}
	a.db.SetMaxOpenConns(cfg.MaxConns)
	a.db.SetMaxIdleConns(cfg.MaxConns)
	if err := a.migrate(ctx); err != nil {
		a.db.Close()
		a.agent.Shutdown(ctx)
		return nil, err
	}

	mux := http.NewServeMux()
	// Each route behind the agent, so that its SQL carries the route too.
	route := func(pattern string, h http.HandlerFunc) { mux.Handle(pattern, a.agent.Handler(h)) }
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
func (a *App) Enforcer() *enforce.Enforcer { return a.agent.Enforcer() }

// Shutdown sends the last window, stops the tracer and closes the
// database, within ctx's deadline.
func (a *App) Shutdown(ctx context.Context) error {
	var errs []error
	if err := a.agent.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("shopapp: %w", err))
	}
	if err := a.tp.Shutdown(context.WithoutCancel(ctx)); err != nil {
		errs = append(errs, fmt.Errorf("shopapp: tracer: %w", err))
	}
	if err := a.db.Close(); err != nil {
		errs = append(errs, fmt.Errorf("shopapp: close database: %w", err))
	}
	return errors.Join(errs...)
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
	// Replicas started together would race in PostgreSQL's catalog: two
	// CREATE … IF NOT EXISTS of one name can both see none, and the second
	// fails on a unique index. One transaction-scoped advisory lock per
	// schema makes them take turns; the lock goes with the transaction.
	tx, err := a.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("shopapp: create schema: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock(hashtext($1))", "shopapp schema "+a.cfg.Schema); err != nil {
		return fmt.Errorf("shopapp: create schema: lock: %w", err)
	}
	for _, s := range stmts {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("shopapp: create schema: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("shopapp: create schema: %w", err)
	}
	return nil
}

// opOf prices a request: reports scan, other reads read, the rest write.
func opOf(r *http.Request) ru.Op {
	switch {
	case r.Pattern == "GET /reports":
		return ru.OpScan
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		return ru.OpRead
	}
	return ru.OpWrite
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
