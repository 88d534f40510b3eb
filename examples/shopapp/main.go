package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

const usage = `shopapp: a multi-tenant shop service wired with qtop, and its load generator.

Usage:
  shopapp [serve] [flags]     run the service
  shopapp load [flags]        send a Zipf mix of tenants and one noisy tenant

Examples:
  # The collector, the app and a noisy tenant (three terminals):
  go run ./cmd/collector serve
  go run ./examples/shopapp --postgres postgres://qtop:qtop@127.0.0.1:5432/qtop --collector http://127.0.0.1:7070
  go run ./examples/shopapp load --target http://127.0.0.1:8080 --tenants 20 --noisy bigcorp --duration 5m

  # Then watch and throttle:
  go run ./cmd/qtop

  # One request by hand (the tenant header stands in for authenticated data):
  curl -H 'X-Tenant: acme' -H 'X-Tier: T1' http://127.0.0.1:8080/products

Flags marked with ($VAR) also read that environment variable.
`

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, err)
		}
		os.Exit(2)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := "serve"
	if len(args) > 0 && (args[0] == "serve" || args[0] == "load") {
		cmd, args = args[0], args[1:]
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cmd == "load" {
		return runLoad(ctx, args, stdout, stderr)
	}
	return runServe(ctx, args, stderr)
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("shopapp "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fmt.Fprintf(stderr, "\nFlags of shopapp %s:\n", name)
		fs.PrintDefaults()
	}
	return fs
}

func runServe(ctx context.Context, args []string, stderr io.Writer) error {
	fs := newFlags("serve", stderr)
	listen := fs.String("listen", env("SHOPAPP_LISTEN", DefaultListen), "HTTP address ($SHOPAPP_LISTEN)")
	pg := fs.String("postgres", env("SHOPAPP_POSTGRES", ""), "PostgreSQL DSN, required ($SHOPAPP_POSTGRES)")
	coll := fs.String("collector", env("SHOPAPP_COLLECTOR", ""), "collector base URL, e.g. http://127.0.0.1:7070; empty: report nothing ($SHOPAPP_COLLECTOR)")
	token := fs.String("token", env("QTOP_TOKEN", ""), "bearer token the collector requires on reports ($QTOP_TOKEN)")
	service := fs.String("service", env("SHOPAPP_SERVICE", DefaultService), "service name in reports and SQL comments ($SHOPAPP_SERVICE)")
	schema := fs.String("schema", env("SHOPAPP_SCHEMA", DefaultSchema), "PostgreSQL schema of the app's tables ($SHOPAPP_SCHEMA)")
	plan := fs.String("plan", env("SHOPAPP_PLAN", DefaultPlan), "RU plan of every tenant: free, pro or enterprise ($SHOPAPP_PLAN)")
	sleep := fs.Duration("report-sleep", DefaultReportSleep, "server time GET /reports holds a connection")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("shopapp serve: unexpected argument %q", fs.Arg(0))
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	cfg := Config{Postgres: *pg, Collector: *coll, Token: *token, Service: *service, Schema: *schema,
		Plan: *plan, ReportSleep: *sleep, Logger: log}
	setup, cancel := context.WithTimeout(ctx, 30*time.Second)
	a, err := New(setup, cfg)
	cancel()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		_ = a.Shutdown(context.Background())
		return fmt.Errorf("shopapp: %w", err)
	}
	srv := &http.Server{Handler: a.Handler(), ReadHeaderTimeout: 5 * time.Second}

	log.Info("shopapp serving", "addr", ln.Addr().String(), "collector", *coll, "service", *service)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err = <-done:
	case <-ctx.Done():
	}
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	errs := []error{srv.Shutdown(sctx), a.Shutdown(sctx)}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func runLoad(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("load", stderr)
	target := fs.String("target", env("SHOPAPP_TARGET", "http://"+DefaultListen), "the app's base URL ($SHOPAPP_TARGET)")
	tenants := fs.Int("tenants", 20, "ordinary tenants, picked by a Zipf law")
	noisy := fs.String("noisy", "bigcorp", "the noisy tenant; empty: none")
	route := fs.String("noisy-route", "reports", "what the noisy tenant hammers: reports or import")
	workers := fs.Int("workers", 4, "concurrent requests of the ordinary tenants")
	pace := fs.Duration("pace", 5*time.Millisecond, "each ordinary worker's pause between requests")
	noisyWorkers := fs.Int("noisy-workers", 8, "concurrent requests of the noisy tenant")
	duration := fs.Duration("duration", time.Minute, "how long to send (Ctrl-C stops early)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("shopapp load: unexpected argument %q", fs.Arg(0))
	}
	if *duration <= 0 {
		return fmt.Errorf("%w: --duration %v must be positive", ErrConfig, *duration)
	}
	l, err := NewLoad(LoadConfig{Target: *target, Tenants: *tenants, Workers: *workers, Pace: *pace, Noisy: *noisy,
		NoisyRoute: *route, NoisyWorkers: *noisyWorkers})
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "sending to %s for %v: %d tenants, noisy %q on %s\n", *target, *duration, *tenants, *noisy, *route)
	ctx, cancel := context.WithTimeout(ctx, *duration)
	defer cancel()
	l.Run(ctx)
	return l.WriteSummary(stdout)
}
