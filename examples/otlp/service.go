package main

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// service is an ordinary Go service instrumented with OpenTelemetry only:
// a server span per request with http.route and the tenant.id attribute
// (from the X-Tenant header, also put in the W3C baggage for calls to
// other services), and a client span per PostgreSQL statement with
// db.system.name and db.query.text. Its database spans carry no tenant:
// the collector gives them their trace's.
type service struct {
	pool   *pgxpool.Pool
	tracer trace.Tracer

	mu    sync.Mutex
	stats map[string]*tenantStats
}

// tenantStats is what the service itself measured for a tenant: the
// truth the collector's attribution is checked against.
type tenantStats struct {
	Requests  int64   `json:"requests"`
	DBSeconds float64 `json:"db_seconds"`
}

func newService(pool *pgxpool.Pool, tp trace.TracerProvider) *service {
	return &service{pool: pool, tracer: tp.Tracer("qtop.example/otlp"), stats: map[string]*tenantStats{}}
}

// routes: each runs its statements; pg_sleep stands for real work.
var routes = map[string][]string{
	"/products":     {"SELECT pg_sleep(0.002)", "SELECT count(*) FROM generate_series(1, 1000)"},
	"/reports/{id}": {"SELECT pg_sleep(0.02)", "SELECT pg_sleep(0.01)"},
	"/orders":       {"SELECT pg_sleep(0.005)"},
}

func (s *service) handler() http.Handler {
	mux := http.NewServeMux()
	for route, stmts := range routes {
		pattern := "GET " + route
		mux.Handle(pattern, s.instrument(route, func(w http.ResponseWriter, r *http.Request) error {
			for _, q := range stmts {
				if err := s.query(r.Context(), q); err != nil {
					return err
				}
			}
			w.Write([]byte("ok\n"))
			return nil
		}))
	}
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(s.stats)
	})
	return mux
}

// instrument wraps a route's handler in a server span.
func (s *service) instrument(route string, h func(http.ResponseWriter, *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tn := r.Header.Get("X-Tenant")
		ctx := r.Context()
		if m, err := baggage.NewMemberRaw("tenant.id", tn); err == nil && tn != "" {
			if b, err := baggage.New(m); err == nil {
				ctx = baggage.ContextWithBaggage(ctx, b)
			}
		}
		ctx, span := s.tracer.Start(ctx, r.Method+" "+route, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("http.route", route),
				attribute.String("tenant.id", tn)))
		defer span.End()
		s.mu.Lock()
		st := s.statsLocked(tn)
		st.Requests++
		s.mu.Unlock()
		if err := h(w, r.WithContext(ctx)); err != nil {
			span.SetStatus(codes.Error, err.Error())
			span.SetAttributes(attribute.Int("http.response.status_code", http.StatusInternalServerError))
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		span.SetAttributes(attribute.Int("http.response.status_code", http.StatusOK))
	})
}

// query runs one statement in a client span and adds its time to the
// tenant's.
func (s *service) query(ctx context.Context, q string) error {
	start := time.Now()
	ctx, span := s.tracer.Start(ctx, "SELECT", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithTimestamp(start),
		trace.WithAttributes(attribute.String("db.system.name", "postgresql"), attribute.String("db.query.text", q)))
	_, err := s.pool.Exec(ctx, q)
	end := time.Now()
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End(trace.WithTimestamp(end))
	tn := baggage.FromContext(ctx).Member("tenant.id").Value()
	s.mu.Lock()
	s.statsLocked(tn).DBSeconds += end.Sub(start).Seconds()
	s.mu.Unlock()
	return err
}

func (s *service) statsLocked(tn string) *tenantStats {
	st := s.stats[tn]
	if st == nil {
		st = &tenantStats{}
		s.stats[tn] = st
	}
	return st
}
