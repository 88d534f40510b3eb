// Command qtop is the terminal UI for incidents: which tenant is hurting
// everyone, what it is running, and a key to throttle it.
//
// Run `qtop --help` for every form and its flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/qtop-dev/qtop/internal/live"
	"github.com/qtop-dev/qtop/internal/tui"
)

const usage = `qtop — which tenant is hurting everyone, what it is running, and a key to throttle it

Usage:
  qtop [--collector URL] [flags]   follow a collector's live stream (default http://127.0.0.1:7070)
  qtop --postgres DSN [flags]      standalone: sample pg_stat_activity, group by tenant (no collector)
  qtop demo [flags]                a demo collector in this process, with a noisy tenant a few seconds in
  qtop help                        this text

The demo keeps its DuckDB store (qtop.duckdb), write-ahead log and policy in a
new temporary folder that is removed when qtop exits; --data-dir keeps them in
a folder of your choice instead.

Examples:
  # First look, on a fresh machine: find the noisy tenant, enter on it, t to throttle.
  qtop demo

  # Follow the collector of this machine, or another one (throttling needs its token):
  qtop
  qtop --collector http://collector.internal:7070 --token "$QTOP_TOKEN"

  # A fleet reporting to several collectors: their sum (each asked for its own part):
  qtop --collector c1:7070,c2:7070,c3:7070 --token "$QTOP_TOKEN"

  # No collector: read PostgreSQL directly (a role with pg_monitor; c/k need pg_signal_backend):
  qtop --postgres 'postgres://qtop_monitor:secret@db:5432/app'

  # One snapshot for an incident note or a script, then exit:
  qtop --once --format table
  qtop --collector 127.0.0.1:7070 --once --format json | jq '.tenants[0]'
  qtop --postgres 'postgres://qtop_monitor@db/app' --once --format json
  qtop demo --once --format table

  # Keep the demo's data, and serve its API so that another qtop can join:
  qtop demo --data-dir ./qtop-demo --listen 127.0.0.1:7070

Keys: 1–5 or tab switch views · s sort · / filter · enter drill in · t throttle
      c/k cancel/terminate a backend (--postgres) · p pause · ? help · q quit

Flags:
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type flags struct {
	collector, token, postgres string
	dataDir, listen            string
	once                       bool
	format, sort               string
	top                        int
	interval                   time.Duration
}

func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

func newFlagSet(demo bool, stderr io.Writer, f *flags) *flag.FlagSet {
	name := "qtop"
	if demo {
		name = "qtop demo"
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	if !demo {
		fs.StringVar(&f.collector, "collector", env("QTOP_COLLECTOR", "http://127.0.0.1:7070"), "collector to follow, or several, comma-separated, to show their sum ($QTOP_COLLECTOR)")
		fs.StringVar(&f.token, "token", env("QTOP_TOKEN", ""), "the collector's bearer token, needed to throttle ($QTOP_TOKEN)")
		fs.StringVar(&f.postgres, "postgres", env("QTOP_POSTGRES", ""), "PostgreSQL DSN: sample pg_stat_activity instead of following a collector ($QTOP_POSTGRES)")
		fs.DurationVar(&f.interval, "interval", time.Second, "how often --postgres samples pg_stat_activity")
	} else {
		fs.StringVar(&f.dataDir, "data-dir", "", "keep the demo's DuckDB store, log and policy in this folder (default: a temporary folder, removed at exit)")
		fs.StringVar(&f.listen, "listen", "", "also serve the demo collector's HTTP API on this address, e.g. 127.0.0.1:7070")
	}
	fs.BoolVar(&f.once, "once", false, "print one snapshot and exit")
	fs.StringVar(&f.format, "format", tui.FormatTable, "with --once: table or json")
	fs.StringVar(&f.sort, "sort", "", "initial sort: ru, db, req, err or p95 (default ru; db with --postgres)")
	fs.IntVar(&f.top, "top", tui.DefaultTop, "tenants shown before the \"other\" row (1…1000)")
	return fs
}

func run(args []string, stdout, stderr io.Writer) int {
	demo := false
	if len(args) > 0 {
		switch args[0] {
		case "demo":
			demo, args = true, args[1:]
		case "help":
			fmt.Fprint(stdout, usage)
			newFlagSet(false, stdout, new(flags)).PrintDefaults()
			return 0
		}
	}
	var f flags
	fs := newFlagSet(demo, stderr, &f)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "qtop: unexpected argument %q (did you mean `qtop demo`?); see qtop --help\n", fs.Arg(0))
		return 2
	}
	if err := check(&f); err != nil {
		fmt.Fprintln(stderr, "qtop:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	q := tui.Query{Measure: f.sort, Top: f.top}
	src, err := open(ctx, demo, &f)
	if err != nil {
		fmt.Fprintln(stderr, "qtop:", err)
		return 1
	}
	defer func() {
		if err := src.Close(); err != nil {
			fmt.Fprintln(stderr, "qtop: closing:", err)
		}
	}()
	if f.once {
		return once(ctx, src, q, f.format, stdout, stderr)
	}
	name := ""
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	m := tui.New(src, tui.WithTop(f.top), tui.WithSort(q.Measure), tui.WithUser(name), tui.WithContext(ctx),
		tui.WithRenderer(lipgloss.NewRenderer(os.Stdout)))
	p := tea.NewProgram(m, tea.WithAltScreen(), tea.WithContext(ctx))
	if _, err := p.Run(); err != nil && !errors.Is(err, tea.ErrProgramKilled) {
		fmt.Fprintln(stderr, "qtop:", err)
		return 1
	}
	return 0
}

// check validates the flags before anything starts.
func check(f *flags) error {
	switch f.sort {
	case "":
		f.sort = live.MeasureRU
		if f.postgres != "" {
			f.sort = live.MeasureDB
		}
	case live.MeasureRU, live.MeasureDB, live.MeasureReq, live.MeasureErr, live.MeasureP95:
	default:
		return fmt.Errorf("--sort %q: want ru, db, req, err or p95", f.sort)
	}
	if f.top < 1 || f.top > 1000 {
		return fmt.Errorf("--top %s: want 1…1000", strconv.Itoa(f.top))
	}
	if f.format != tui.FormatTable && f.format != tui.FormatJSON {
		return fmt.Errorf("--format %q: want table or json", f.format)
	}
	if f.interval < 0 || (f.postgres != "" && f.interval < 100*time.Millisecond) {
		return fmt.Errorf("--interval %s: want at least 100ms", f.interval)
	}
	return nil
}

func open(ctx context.Context, demo bool, f *flags) (tui.Source, error) {
	switch {
	case demo:
		var opts []tui.DemoOption
		if f.dataDir != "" {
			opts = append(opts, tui.WithDemoDir(f.dataDir))
		}
		if f.listen != "" {
			opts = append(opts, tui.WithDemoListen(f.listen))
		}
		return tui.NewDemo(ctx, opts...)
	case f.postgres != "":
		return tui.NewPostgres(ctx, f.postgres, tui.WithInterval(f.interval))
	}
	if strings.Contains(f.collector, ",") {
		return tui.NewFleet(strings.Split(f.collector, ","), f.token)
	}
	return tui.NewCollector(f.collector, f.token)
}

// once prints one snapshot.
func once(ctx context.Context, src tui.Source, q tui.Query, format string, stdout, stderr io.Writer) int {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var (
		s   live.Snapshot
		err error
	)
	switch src := src.(type) {
	case *tui.Demo:
		s, err = src.WaitData(ctx, q)
	case *tui.Collector:
		s, err = src.Once(ctx, q)
	case *tui.Postgres:
		s, err = src.Once(ctx, q)
	default:
		s, err = src.Next(ctx, q)
	}
	if err != nil {
		fmt.Fprintln(stderr, "qtop:", err)
		return 1
	}
	if err := tui.Print(stdout, s, format); err != nil {
		fmt.Fprintln(stderr, "qtop:", err)
		return 1
	}
	return 0
}
