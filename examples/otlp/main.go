// Command otlp is a Go service that feeds qtop through OpenTelemetry
// alone: no qtop package is imported. Its spans go over OTLP/HTTP
// (otlptracehttp) to the collector's POST /v1/traces, which turns server
// spans into requests and PostgreSQL client spans into database time for
// the tenant of their trace. The node/ folder holds the same service in
// Node.js.
//
//	collector serve &
//	OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:7070 OTEL_SERVICE_NAME=shop-go \
//	    go run ./examples/otlp --postgres postgres://127.0.0.1:5432/postgres
//	curl -H 'X-Tenant: acme' 127.0.0.1:8081/products
//	qtop --once
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8081", "HTTP address of the service")
	dsn := flag.String("postgres", os.Getenv("DATABASE_URL"), "PostgreSQL DSN ($DATABASE_URL)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), `Usage: otlp [flags]

A Go service instrumented with OpenTelemetry only, exporting to the qtop
collector over OTLP/HTTP. The exporter reads OTEL_EXPORTER_OTLP_ENDPOINT
(e.g. http://127.0.0.1:7070), OTEL_SERVICE_NAME and the other OTEL_*
variables. Routes: /products, /reports/{id}, /orders; the tenant comes from
the X-Tenant header.

Example:
  OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:7070 go run ./examples/otlp --postgres postgres://127.0.0.1/postgres

Flags:
`)
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := run(*listen, *dsn); err != nil {
		fmt.Fprintln(os.Stderr, "otlp:", err)
		os.Exit(1)
	}
}

func run(listen, dsn string) error {
	if dsn == "" {
		return errors.New("no PostgreSQL: pass --postgres or set DATABASE_URL")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		tp.Shutdown(sctx)
	}()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	srv := &http.Server{Addr: listen, Handler: newService(pool, tp).handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Shutdown(context.Background())
	}()
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
