package main

import (
	"context"
	"encoding/hex"
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

	"github.com/qtop-dev/qtop/internal/enforcesim"
	"github.com/qtop-dev/qtop/policy"
)

const usage = `balance: an account-balance API with freshness ETags and shedding by request
cause, and a replay of the freshness model's trace through it.

Usage:
  balance [serve] [flags]    run the service
  balance replay [flags]     replay the model's herd through the service: no rules, shadow, enforced

Examples:
  # The collector and the service; then watch the Freshness view of qtop:
  go run ./cmd/collector serve
  go run ./examples/balance --collector http://127.0.0.1:7070 --sampling 10
  go run ./cmd/qtop          # 7: Freshness

  # A client that already holds a copy, opening the app:
  curl -si http://127.0.0.1:8081/accounts/42/balance          # note the ETag
  curl -si -H 'If-None-Match: "q1…"' -H 'Qtop-Request-Cause: app-open' http://127.0.0.1:8081/accounts/42/balance

  # The measurement of the issue (a minute or so):
  go run ./examples/balance replay --users 400 --span 4h --rate 600

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
	if len(args) > 0 && (args[0] == "serve" || args[0] == "replay") {
		cmd, args = args[0], args[1:]
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cmd == "replay" {
		return runReplay(ctx, args, stdout, stderr)
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
	fs := flag.NewFlagSet("balance "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fmt.Fprintf(stderr, "\nFlags of balance %s:\n", name)
		fs.PrintDefaults()
	}
	return fs
}

func runServe(ctx context.Context, args []string, stderr io.Writer) error {
	fs := newFlags("serve", stderr)
	listen := fs.String("listen", env("BALANCE_LISTEN", "127.0.0.1:8081"), "address to serve on ($BALANCE_LISTEN)")
	collector := fs.String("collector", env("QTOP_COLLECTOR", ""), "collector base URL to report to, e.g. http://127.0.0.1:7070 ($QTOP_COLLECTOR)")
	token := fs.String("token", env("QTOP_TOKEN", ""), "bearer token of the collector's reports ($QTOP_TOKEN)")
	key := fs.String("etag-key", env("BALANCE_ETAG_KEY", ""), "hex key of at least 16 bytes that signs ETags, shared by every instance ($BALANCE_ETAG_KEY; default random)")
	sampling := fs.Int("sampling", 100, "follow 1 account in N for the repeat-share report (0: none)")
	batch := fs.Int("batch", 3, "Monzo's rules armed until the collector's policy says otherwise (0 to 3)")
	shadow := fs.Bool("shadow", true, "run the local rules in shadow mode")
	slots := fs.Int("slots", 4, "backend concurrency")
	work := fs.Duration("work", 10*time.Millisecond, "backend time per balance read")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg := Config{Collector: *collector, Token: *token, Sampling: *sampling, Slots: *slots, Work: *work,
		Logger: slog.New(slog.NewTextHandler(stderr, nil))}
	if *key != "" {
		b, err := hex.DecodeString(*key)
		if err != nil {
			return fmt.Errorf("balance: --etag-key: %v (want hex, e.g. openssl rand -hex 32)", err)
		}
		cfg.Key = b
	}
	if *batch < 0 || *batch > 3 {
		return fmt.Errorf("balance: --batch %d: want 0 to 3", *batch)
	}
	cfg.Rules = policy.Freshness{Rules: policy.MonzoRules(), Batch: *batch}
	for i := range cfg.Rules.Rules {
		cfg.Rules.Rules[i].Shadow = *shadow
	}
	app, err := New(cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("balance: listen: %w (is another service on %s? use --listen)", err, *listen)
	}
	srv := &http.Server{Handler: app.Handler(), ReadHeaderTimeout: 5 * time.Second}
	app.Start()
	cfg.Logger.Info("serving", "addr", ln.Addr().String(), "collector", *collector)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return errors.Join(srv.Shutdown(sctx), app.Shutdown(sctx))
}

func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("replay", stderr)
	users := fs.Int("users", 400, "users of the model replayed")
	span := fs.Duration("span", 4*time.Hour, "trace time replayed after the first day")
	rate := fs.Float64("rate", 600, "requests sent per second")
	slots := fs.Int("slots", 4, "backend concurrency")
	work := fs.Duration("work", 10*time.Millisecond, "backend time per balance read")
	if err := fs.Parse(args); err != nil {
		return err
	}
	fmt.Fprintln(stderr, "calibrating the model (a few seconds)…")
	model, err := enforcesim.Freshness(enforcesim.DefaultFreshness())
	if err != nil {
		return err
	}
	enforcesim.WriteFreshness(stdout, model)
	fmt.Fprintln(stdout)
	c := ReplayConfig{Model: model.Config, Users: *users, Span: *span, Rate: *rate, Slots: *slots, Work: *work}
	var rows []ReplayResult
	for _, m := range []Mode{ModeOff, ModeShadow, ModeEnforced} {
		fmt.Fprintf(stderr, "replaying with %s…\n", m)
		r, err := Replay(ctx, c, m)
		if err != nil {
			return err
		}
		rows = append(rows, r)
	}
	fmt.Fprintf(stdout, "%d users, %v of trace at %.0f GETs/s, backend %d × %v (%.0f reads/s):\n\n", *users, *span, *rate, *slots, *work,
		float64(*slots)/work.Seconds())
	WriteReplay(stdout, rows)
	return nil
}
