package bench

// One instrumented request side by side: the tenant found, admitted,
// served, charged and recorded, with one tagged statement through
// database/sql on a driver that does nothing. qtop's agent (spans off,
// and with its server span and a batch span processor over an exporter
// that drops everything) against otelhttp + XSAM/otelsql v0.44 over the
// same batch span processor, and the bare handler with the bare
// statement.

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/XSAM/otelsql"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"

	"github.com/qtop-dev/qtop/agent"
	"github.com/qtop-dev/qtop/enforce"
)

// noopDriver answers every statement at once.
type (
	noopConnector struct{}
	noopDriver    struct{}
	noopConn      struct{}
	noopTx        struct{}
)

func (noopConnector) Connect(context.Context) (driver.Conn, error) { return noopConn{}, nil }
func (noopConnector) Driver() driver.Driver                        { return noopDriver{} }
func (noopDriver) Open(string) (driver.Conn, error)                { return noopConn{}, nil }
func (noopConn) Prepare(string) (driver.Stmt, error)               { return nil, driver.ErrSkip }
func (noopConn) Close() error                                      { return nil }
func (noopConn) Begin() (driver.Tx, error)                         { return noopTx{}, nil }
func (noopConn) ExecContext(context.Context, string, []driver.NamedValue) (driver.Result, error) {
	return driver.RowsAffected(1), nil
}
func (noopConn) CheckNamedValue(*driver.NamedValue) error { return nil }
func (noopTx) Commit() error                              { return nil }
func (noopTx) Rollback() error                            { return nil }

// dropExporter drops every span.
type dropExporter struct{}

func (dropExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (dropExporter) Shutdown(context.Context) error                             { return nil }

// discardWriter is a response writer that keeps nothing.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(int)             {}

const requestSQL = "UPDATE carts SET total = total + $1 WHERE id = $2"

func handlerOn(db *sql.DB) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /carts/{id}", func(w http.ResponseWriter, r *http.Request) {
		if _, err := db.ExecContext(r.Context(), requestSQL, 3, 42); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Write([]byte("ok\n"))
	})
	return mux
}

func newTracerProvider() *sdktrace.TracerProvider {
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(dropExporter{}))
}

func runRequests(b *testing.B, h http.Handler) {
	req := httptest.NewRequest("POST", "/carts/42", nil)
	req.Header.Set("X-Tenant", "acme")
	req.Header.Set("X-Tier", "T2")
	w := &discardWriter{h: http.Header{}}
	h.ServeHTTP(w, req) // warm: buckets, caches, connection
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		h.ServeHTTP(w, req)
	}
}

func BenchmarkRequest(b *testing.B) {
	plans := map[string]enforce.Plan{enforce.PlanFree: {Limit: enforce.Limit{RUPerSecond: 1e12, Burst: 1e12}, Weight: 1}}
	b.Run("bare", func(b *testing.B) {
		db := sql.OpenDB(noopConnector{})
		defer db.Close()
		runRequests(b, handlerOn(db))
	})
	b.Run("qtop-agent", func(b *testing.B) {
		a, err := agent.New(agent.WithService("bench"), agent.WithTenant(agent.FromHeader("X-Tenant", "X-Tier")), agent.WithPlans(plans, nil))
		if err != nil {
			b.Fatal(err)
		}
		defer a.Shutdown(context.Background())
		db := sql.OpenDB(a.WrapConnector(noopConnector{}))
		defer db.Close()
		runRequests(b, a.Handler(handlerOn(db)))
	})
	b.Run("qtop-agent-spans", func(b *testing.B) {
		tp := newTracerProvider()
		defer tp.Shutdown(context.Background())
		a, err := agent.New(agent.WithService("bench"), agent.WithTenant(agent.FromHeader("X-Tenant", "X-Tier")), agent.WithPlans(plans, nil),
			agent.WithTracerProvider(tp))
		if err != nil {
			b.Fatal(err)
		}
		defer a.Shutdown(context.Background())
		db := sql.OpenDB(a.WrapConnector(noopConnector{}))
		defer db.Close()
		runRequests(b, a.Handler(handlerOn(db)))
	})
	b.Run("otelhttp-otelsql", func(b *testing.B) {
		tp := newTracerProvider()
		defer tp.Shutdown(context.Background())
		db := otelsql.OpenDB(noopConnector{}, otelsql.WithTracerProvider(tp),
			otelsql.WithAttributes(semconv.DBSystemPostgreSQL))
		defer db.Close()
		runRequests(b, otelhttp.NewHandler(handlerOn(db), "server", otelhttp.WithTracerProvider(tp)))
	})
}
