// Package demo is qtop's demo source: a collector in this process, on the
// embedded DuckDB store, with its synthetic fleet, read by the TUI through
// its Source interface. It lives apart from the TUI so that the TUI does
// not link the collector (nor DuckDB).
//
//	src, err := demo.New(ctx)
//	defer src.Close()
//	tui.New(src)
package demo

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/internal/collector"
	"github.com/qtop-dev/qtop/internal/tui"
	"github.com/qtop-dev/qtop/policy"
)

// StoreFile is the DuckDB file of the demo, inside its data folder.
const StoreFile = "qtop.duckdb"

// Source runs a collector in this process, on the embedded DuckDB store,
// with its synthetic fleet (dozens of tenants; a few seconds in, the
// catalog import of collector.DemoImportTenant starts hurting everyone),
// and reads it without HTTP.
type Source struct {
	srv  *collector.Server
	dir  string
	temp bool
	now  func() time.Time

	mu     sync.Mutex
	last   int64 // the second of the last snapshot handed out
	closed bool
	done   chan struct{}
}

var (
	_ tui.Source          = (*Source)(nil)
	_ tui.OnceSource      = (*Source)(nil)
	_ tui.FreshnessSource = (*Source)(nil)
	_ tui.FreshnessHinter = (*Source)(nil)
)

type config struct {
	dir    string
	listen string
	log    *slog.Logger
	now    func() time.Time
}

// Option configures New.
type Option func(*config)

// WithDemoDir keeps the demo's data (its DuckDB file, write-ahead log and
// policy) in dir instead of a temporary folder removed at Close.
func WithDir(dir string) Option { return func(c *config) { c.dir = dir } }

// WithDemoListen also serves the collector's HTTP API on addr, so that
// another `qtop --collector` or the ingest reporter of an app can join.
func WithListen(addr string) Option { return func(c *config) { c.listen = addr } }

// WithDemoLogger sets the demo collector's logger (default: discard, as
// log lines would tear the screen).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// WithDemoClock sets the demo's clock (default time.Now).
func WithClock(now func() time.Time) Option { return func(c *config) { c.now = now } }

// New starts the demo collector; its fleet reports from the next
// second on. Close stops it and removes its temporary folder.
func New(ctx context.Context, opts ...Option) (*Source, error) {
	cfg := config{log: slog.New(slog.DiscardHandler), now: time.Now}
	for _, o := range opts {
		o(&cfg)
	}
	d := &Source{dir: cfg.dir, now: cfg.now, done: make(chan struct{})}
	if d.dir == "" {
		dir, err := os.MkdirTemp("", "qtop-demo-")
		if err != nil {
			return nil, fmt.Errorf("demo: %w", err)
		}
		d.dir, d.temp = dir, true
	} else if err := os.MkdirAll(d.dir, 0o700); err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	ccfg := collector.Config{
		Demo: true, DataDir: d.dir, Store: "duckdb://" + filepath.Join(d.dir, StoreFile),
		Writer: "qtop-demo", Logger: cfg.log, Now: cfg.now,
	}
	if cfg.listen != "" {
		ccfg.Listen = cfg.listen
	}
	srv, err := collector.New(ccfg)
	if err != nil {
		d.cleanup()
		return nil, fmt.Errorf("demo: %w", err)
	}
	d.srv = srv
	if cfg.listen != "" {
		err = srv.Start(ctx)
	} else {
		srv.Run(ctx)
	}
	if err != nil {
		srv.Shutdown(context.Background())
		d.cleanup()
		return nil, fmt.Errorf("demo: %w", err)
	}
	return d, nil
}

func (d *Source) cleanup() {
	if d.temp {
		os.RemoveAll(d.dir)
	}
}

// Dir returns the folder of the demo's data.
func (d *Source) Dir() string { return d.dir }

// Addr returns the address the demo's HTTP API listens on ("" without
// WithDemoListen).
func (d *Source) Addr() string { return d.srv.Addr() }

// Token returns the demo collector's policy token.
func (d *Source) Token() string { return d.srv.Token() }

// Describe names the demo.
func (d *Source) Describe() string {
	if a := d.srv.Addr(); a != "" {
		return "demo (collector on http://" + a + ", policy token " + d.srv.Token() + ")"
	}
	return "demo"
}

// Features: the demo takes throttles.
func (d *Source) Features() tui.Features { return tui.Features{Throttle: true} }

// Next returns the snapshot of the next second (the current one at once on
// the first call).
func (d *Source) Next(ctx context.Context, q tui.Query) (api.Snapshot, error) {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return api.Snapshot{}, tui.ErrClosed
	}
	last := d.last
	d.mu.Unlock()
	now := d.now()
	if last != 0 && now.Unix() <= last {
		next := time.Unix(last+1, 0)
		t := time.NewTimer(next.Sub(now) + 5*time.Millisecond)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return api.Snapshot{}, ctx.Err()
		case <-d.done:
			return api.Snapshot{}, tui.ErrClosed
		case <-t.C:
		}
		now = d.now()
	}
	if q.Measure == "" {
		q.Measure = api.MeasureRU
	}
	if q.Top <= 0 {
		q.Top = tui.DefaultTop
	}
	s := d.srv.Snapshot(now, q.Measure, min(q.Top, 1000))
	d.mu.Lock()
	d.last = now.Unix()
	d.mu.Unlock()
	return s, nil
}

// Once returns the first snapshot with tenants in it, for --once; the
// demo fleet reports within a few seconds of the start.
func (d *Source) Once(ctx context.Context, q tui.Query) (api.Snapshot, error) {
	for {
		s, err := d.Next(ctx, q)
		if err != nil {
			return s, err
		}
		if len(s.Tenants) > 0 && len(s.Services) > 0 {
			return s, nil
		}
	}
}

// Throttle adds rule to the demo collector's policy.
func (d *Source) Throttle(ctx context.Context, rule policy.Rule) error {
	who := "qtop demo"
	if _, err := d.srv.SetRule(ctx, rule, who); err != nil {
		return fmt.Errorf("demo: throttle: %w", err)
	}
	return nil
}

// History returns tenant's per-minute load from the demo collector's
// store (the drill-in's h), as a collector's GET /v1/history does.
func (d *Source) History(ctx context.Context, tenant string, minutes int) (api.History, error) {
	return d.srv.History(ctx, tenant, minutes, d.now())
}

var _ tui.Historian = (*Source)(nil)

// NoAutopilotHint says how to give a demo an autopilot (A and x).
func (d *Source) NoAutopilotHint() string {
	return "the demo runs none: serve it (qtop demo --listen 127.0.0.1:7070), give its collector autopilot rules (POST /v1/policy/autopilot) and follow it with qtop --collector 127.0.0.1:7070"
}

var _ tui.NoAutopilotHinter = (*Source)(nil)

// Freshness returns the demo collector's freshness view.
func (d *Source) Freshness(context.Context) (api.Freshness, error) { return d.srv.Freshness(), nil }

// SetFreshness changes the demo collector's freshness policy.
func (d *Source) SetFreshness(ctx context.Context, f policy.Freshness) error {
	if _, err := d.srv.SetFreshness(ctx, f, "qtop demo"); err != nil {
		return fmt.Errorf("demo: freshness: %w", err)
	}
	return nil
}

// FreshnessHint says why the freshness view is empty: the demo's fleet
// samples no GET. The balance example does; the hint says how to run it
// against this demo (served with --listen) and send it a GET.
func (d *Source) FreshnessHint() string {
	const why = "The demo's fleet samples no GET. The balance example does: run it against the demo and send it GETs:"
	const get = "curl http://127.0.0.1:8081/accounts/42/balance"
	if a := d.srv.Addr(); a != "" {
		return why + "\ngo run ./examples/balance --collector http://" + a + " --sampling 1\n" + get
	}
	return why + "\nqtop demo --listen 127.0.0.1:7070\ngo run ./examples/balance --collector http://127.0.0.1:7070 --sampling 1\n" + get
}

// Cancel is not supported: the demo has no PostgreSQL.
func (d *Source) Cancel(context.Context, int32) error {
	return fmt.Errorf("%w: the demo has no PostgreSQL backends; run qtop --postgres DSN", tui.ErrUnsupported)
}

// Terminate is not supported: the demo has no PostgreSQL.
func (d *Source) Terminate(context.Context, int32) error {
	return fmt.Errorf("%w: the demo has no PostgreSQL backends; run qtop --postgres DSN", tui.ErrUnsupported)
}

// Close stops the demo collector (writing its open minutes to the store)
// and removes its temporary folder.
func (d *Source) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	close(d.done)
	d.mu.Unlock()
	// A temporary folder is removed right after: writing its last minute
	// to the store would only delay the exit.
	wait := 30 * time.Second
	if d.temp {
		wait = 500 * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	err := d.srv.Shutdown(ctx)
	if d.temp {
		err = nil // what the deadline cut short lived in a folder removed now
	}
	d.cleanup()
	return err
}
