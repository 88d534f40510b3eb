// Command budgetqueue is the job-queue load run of the database budgets
// (PlanetScale's queue lesson, scaled to one small machine): a SKIP LOCKED
// job queue fed at a fixed rate while three long analytics statements,
// tagged tenant='analytics', hold back vacuum — once without a budget,
// once with a concurrency budget of 1 for the analytics tag in Enforce
// mode, once with the same budget in Warn mode. Per second it records the
// backlog, the p99 job latency, the p99 lock wait (the SKIP LOCKED claim)
// and the dead tuples vacuum could not remove, and writes them as CSV and
// a Markdown table; scripts/plot-budget-queue draws the PNG.
//
// It is a load run, not a test: it takes about a minute per mode.
//
//	go run ./examples/budgetqueue --postgres "$QTOP_TEST_POSTGRES" --out docs/budget-queue
//	./scripts/plot-budget-queue docs/budget-queue
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"
)

const usage = `budgetqueue: the job-queue load run of qtop's database budgets.

Usage:
  budgetqueue [flags]

It creates its own tables (random names) in the database of --postgres,
runs each mode of --modes for --duration, drops the tables, and writes
queue.csv and queue.md to --out.

Examples:
  go run ./examples/budgetqueue --postgres "$QTOP_TEST_POSTGRES"
  go run ./examples/budgetqueue --duration 30s --rate 100 --modes none,enforce
  ./scripts/plot-budget-queue docs/budget-queue    # the PNG from queue.csv

Flags:
`

type options struct {
	dsn       string
	out       string
	duration  time.Duration
	rate      int
	workers   int
	analytics time.Duration
	vacuum    time.Duration
	modes     []string
}

func main() {
	var o options
	var modes string
	fs := flag.NewFlagSet("budgetqueue", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), usage); fs.PrintDefaults() }
	fs.StringVar(&o.dsn, "postgres", os.Getenv("QTOP_TEST_POSTGRES"), "PostgreSQL DSN (default $QTOP_TEST_POSTGRES)")
	fs.StringVar(&o.out, "out", "docs/budget-queue", "directory for queue.csv and queue.md")
	fs.DurationVar(&o.duration, "duration", 60*time.Second, "how long each mode runs")
	fs.IntVar(&o.rate, "rate", 150, "jobs enqueued per second")
	fs.IntVar(&o.workers, "workers", 4, "job workers")
	fs.DurationVar(&o.analytics, "analytics", 20*time.Second, "duration of each analytics statement (three clients, staggered)")
	fs.DurationVar(&o.vacuum, "vacuum-every", time.Second, "how often the run vacuums the queue table (standing in for an eager autovacuum)")
	fs.StringVar(&modes, "modes", "none,enforce,warn", "modes to run: none, enforce, warn")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		os.Exit(2)
	}
	o.modes = strings.Split(modes, ",")
	if err := o.check(); err != nil {
		fmt.Fprintln(os.Stderr, "budgetqueue:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "budgetqueue:", err)
		os.Exit(1)
	}
}

func (o options) check() error {
	switch {
	case o.dsn == "":
		return errors.New("no database: pass --postgres DSN or set QTOP_TEST_POSTGRES (./scripts/services env prints it)")
	case o.rate < 1 || o.rate > 10000:
		return errors.New("--rate must be from 1 to 10000 jobs per second")
	case o.workers < 1 || o.workers > 64:
		return errors.New("--workers must be from 1 to 64")
	case o.duration < 10*time.Second:
		return errors.New("--duration must be at least 10s")
	case o.analytics < time.Second:
		return errors.New("--analytics must be at least 1s")
	}
	for _, m := range o.modes {
		if m != "none" && m != "enforce" && m != "warn" {
			return fmt.Errorf("--modes: unknown mode %q (want none, enforce, warn)", m)
		}
	}
	return nil
}

func run(ctx context.Context, o options) error {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	var results []result
	for _, m := range o.modes {
		fmt.Fprintf(os.Stderr, "budgetqueue: mode %s for %v\n", m, o.duration)
		r, err := runMode(ctx, o, m)
		if err != nil {
			return fmt.Errorf("mode %s: %w", m, err)
		}
		results = append(results, r)
		fmt.Fprintln(os.Stderr, r.summaryLine())
	}
	return write(o, results)
}
