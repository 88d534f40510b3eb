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
	"net/http"
	"os"
	"os/signal"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/internal/buildinfo"
	"github.com/qtop-dev/qtop/internal/demo"
	"github.com/qtop-dev/qtop/internal/tui"
	"github.com/qtop-dev/qtop/tlsfiles"
)

const usage = `qtop — which tenant is hurting everyone, what it is running, and a key to throttle it

Usage:
  qtop [--collector URL] [flags]   follow a collector's live stream (default http://127.0.0.1:7070)
  qtop --postgres DSN [flags]      standalone: sample pg_stat_activity, group by tenant (no collector)
  qtop demo [flags]                a demo collector in this process, with a noisy tenant a few seconds in
  qtop replay FILE [flags]         play back what qtop --record FILE saved, with the same views and keys
  qtop help                        this text
  qtop --version                   the version, revision and Go version of this build

The demo keeps its DuckDB store (qtop.duckdb), write-ahead log and policy in a
new temporary folder that is removed when qtop exits; --data-dir keeps them in
a folder of your choice instead.

Examples:
  # First look, on a fresh machine: find the noisy tenant, enter on it, t to throttle.
  qtop demo

  # Follow the collector of this machine, or another one: --token reads, throttling
  # needs the admin token (the collector's DATA_DIR/admin-token unless set):
  qtop
  qtop --collector http://collector.internal:7070 --token "$QTOP_TOKEN" --admin-token-file /var/lib/qtop/admin-token

  # A fleet reporting to several collectors: their sum (each asked for its own part):
  qtop --collector c1:7070,c2:7070,c3:7070 --token "$QTOP_TOKEN"

  # A collector serving TLS with a private CA, requiring client certificates (mTLS):
  qtop --collector https://collector.internal:7070 --ca-file ca.pem --cert-file me.pem --key-file me-key.pem
  # (or QTOP_CA_FILE, QTOP_CERT_FILE, QTOP_KEY_FILE in the environment)

  # No collector: read PostgreSQL directly (a role with pg_monitor; c/k need pg_signal_backend):
  qtop --postgres 'postgres://qtop_monitor:secret@db:5432/app'

  # Untagged load (pgbench, cron jobs, a new service): group it by what PostgreSQL knows.
  qtop --postgres 'postgres://qtop_monitor@db/app' --group-by application
  qtop --postgres 'postgres://qtop_monitor@db/app' --group-by fingerprint --once

  # One snapshot for an incident note or a script, then exit:
  qtop --once --format table
  qtop --collector 127.0.0.1:7070 --once --format json | jq '.tenants[0]'
  qtop --postgres 'postgres://qtop_monitor@db/app' --once --format json
  qtop demo --once --format table

  # Record the incident while you watch it (an existing file needs --force);
  # replay it for the post-mortem (p pauses):
  qtop --postgres 'postgres://qtop_monitor@db/app' --record incident.qtop.gz
  qtop replay incident.qtop.gz --speed 4
  qtop replay incident.qtop.gz --once --format table     # its last snapshot

  # Keep the demo's data, and serve its API so that another qtop can join:
  qtop demo --data-dir ./qtop-demo --listen 127.0.0.1:7070

Keys: 1–9 or tab switch views (6: lock tree, xmin horizon; c/k on the session selected) · s sort · / filter
      3: v whole query text, e EXPLAIN (--postgres, on demand) · 9 top SQL (pg_stat_statements, --postgres)
      b group by tenant → application → user → database → client → fingerprint (--postgres)
      7 freshness · 8 victims: each by name, p95 now vs baseline, share, routes hurt
      enter drill in (h: history from the store, [ ] earlier/later) · t throttle
      space mark statements · c/k cancel/terminate the
      marked (or selected) backends, only if they still run what was shown (--postgres, or a
      collector sampling PostgreSQL, with --admin-token)
      A pause/resume the autopilot · x end the autopilot action, or lift the rule, selected (5)
      p pause · ? help · q quit

Flags:
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type flags struct {
	collector, token, postgres string
	adminToken, adminTokenFile string
	dataDir, listen            string
	actionLog, record          string
	speed                      float64
	once, force                bool
	format, sort, groupBy      string
	top                        int
	interval                   time.Duration
	tls                        tlsfiles.ClientFiles
}

func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

func newFlagSet(demo bool, stderr io.Writer, f *flags) *flag.FlagSet {
	return newFlagSetFor(map[bool]string{true: "demo", false: ""}[demo], stderr, f)
}

// newFlagSetFor returns the flags of a form: "" (collector or postgres),
// "demo" or "replay".
func newFlagSetFor(form string, stderr io.Writer, f *flags) *flag.FlagSet {
	name := "qtop"
	if form != "" {
		name = "qtop " + form
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	switch form {
	case "replay":
		fs.Float64Var(&f.speed, "speed", 1, "play the recording this many times faster (up to 1000)")
	case "":
		fs.StringVar(&f.collector, "collector", env("QTOP_COLLECTOR", "http://127.0.0.1:7070"), "collector to follow, or several, comma-separated, to show their sum ($QTOP_COLLECTOR)")
		fs.StringVar(&f.token, "token", env("QTOP_TOKEN", ""), "the collector's read token, for its live view ($QTOP_TOKEN); also used for policy changes when no admin token is given")
		fs.StringVar(&f.adminToken, "admin-token", env("QTOP_ADMIN_TOKEN", ""), "the collector's admin token, for policy changes: t throttles, freshness keys, the autopilot's A and x ($QTOP_ADMIN_TOKEN; the collector keeps it in DATA_DIR/admin-token unless started with --admin-token)")
		fs.StringVar(&f.adminTokenFile, "admin-token-file", env("QTOP_ADMIN_TOKEN_FILE", ""), "read the admin token from this file, e.g. the collector's DATA_DIR/admin-token ($QTOP_ADMIN_TOKEN_FILE)")
		f.tls.RegisterFlags(fs)
		fs.StringVar(&f.postgres, "postgres", env("QTOP_POSTGRES", ""), "PostgreSQL DSN: sample pg_stat_activity (the sessions of its database) instead of following a collector ($QTOP_POSTGRES)")
		fs.DurationVar(&f.interval, "interval", time.Second, "how often --postgres samples pg_stat_activity")
	default:
		fs.StringVar(&f.dataDir, "data-dir", "", "keep the demo's DuckDB store, log and policy in this folder (default: a temporary folder, removed at exit)")
		fs.StringVar(&f.listen, "listen", "", "also serve the demo collector's HTTP API on this address, e.g. 127.0.0.1:7070")
	}
	if form != "replay" {
		fs.StringVar(&f.record, "record", "", "also save every snapshot shown to this file (JSON lines; gzip when it ends in .gz), for qtop replay; an existing file is refused unless --force")
		fs.BoolVar(&f.force, "force", false, "with --record: overwrite the file if it exists")
	}
	fs.StringVar(&f.actionLog, "action-log", defaultActionLog(), "append one JSON line per throttle, cancel and terminate (when, who, on which statement, result) to this file")
	fs.BoolVar(&f.once, "once", false, "print one snapshot and exit")
	fs.StringVar(&f.format, "format", tui.FormatTable, "with --once: table or json")
	fs.StringVar(&f.sort, "sort", "", "initial sort: ru, db, req, err or p95 (default ru; db with --postgres)")
	fs.IntVar(&f.top, "top", tui.DefaultTop, "tenants shown before the \"other\" row (1…1000)")
	fs.StringVar(&f.groupBy, "group-by", api.GroupTenant, "group the load by tenant, application, user, database, client or fingerprint (all but tenant need --postgres; key b switches)")
	return fs
}

func run(args []string, stdout, stderr io.Writer) int {
	return runContext(context.Background(), args, stdout, stderr)
}

// runContext is run under ctx (a test's deadline; it ends at an
// interrupt too).
func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	demo, form := false, ""
	if len(args) > 0 {
		switch args[0] {
		case "demo":
			demo, form, args = true, "demo", args[1:]
		case "replay":
			form, args = "replay", args[1:]
		case "version", "--version", "-version":
			buildinfo.Print(stdout, "qtop")
			return 0
		case "help":
			fmt.Fprint(stdout, usage)
			newFlagSet(false, stdout, new(flags)).PrintDefaults()
			return 0
		}
	}
	var f flags
	fs := newFlagSetFor(form, stderr, &f)
	if form == "replay" {
		return replay(args, fs, &f, stdout, stderr)
	}
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
		fail(stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP) // SIGHUP: the terminal closed
	defer stop()

	q := tui.Query{Measure: f.sort, Top: f.top, GroupBy: f.groupBy}
	src, err := open(ctx, demo, &f)
	if err != nil {
		fail(stderr, err)
		return 1
	}
	if f.record != "" {
		rec, err := tui.NewRecorder(src, f.record, time.Now(), f.force)
		if err != nil {
			src.Close()
			fail(stderr, err)
			return 1
		}
		src = rec
	}
	defer func() {
		if err := src.Close(); err != nil {
			fmt.Fprintln(stderr, "qtop: closing:", printable(err.Error()))
		}
	}()
	if f.once {
		return once(ctx, src, q, f.format, stdout, stderr)
	}
	return interactive(ctx, src, &f, stderr)
}

// replay plays a recording back: qtop replay FILE [flags].
func replay(args []string, fs *flag.FlagSet, f *flags, stdout, stderr io.Writer) int {
	var file string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		file, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if file == "" && fs.NArg() > 0 {
		file = fs.Arg(0)
	}
	if file == "" {
		fmt.Fprintln(stderr, "qtop replay: which recording? qtop replay FILE (qtop --record FILE writes one)")
		return 2
	}
	f.postgres, f.sort = "", ""
	if err := check(f); err != nil {
		fail(stderr, err)
		return 2
	}
	r, err := tui.OpenReplay(file, tui.WithSpeed(f.speed))
	if err != nil {
		fail(stderr, err)
		return 1
	}
	defer r.Close()
	if f.once {
		s, err := r.Last()
		if err == nil {
			err = tui.Print(stdout, s, f.format)
		}
		if err != nil {
			fail(stderr, err)
			return 1
		}
		if cut := r.CutShort(); cut != nil {
			fmt.Fprintf(stderr, "qtop: %s: %v (was its qtop killed?): this is its last whole snapshot\n", printable(file), cut)
		}
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	return interactive(ctx, r, f, stderr)
}

// interactive runs the UI on src until q.
func interactive(ctx context.Context, src tui.Source, f *flags, stderr io.Writer) int {
	q := tui.Query{Measure: f.sort, Top: f.top, GroupBy: f.groupBy}
	name := ""
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	alog, err := openActionLog(f.actionLog)
	if err != nil {
		fail(stderr, err)
		return 1
	}
	defer alog.Close()
	m := tui.New(src, tui.WithActionLog(alog), tui.WithTop(f.top), tui.WithSort(q.Measure), tui.WithGroupBy(f.groupBy), tui.WithUser(name), tui.WithContext(ctx),
		tui.WithRenderer(lipgloss.NewRenderer(os.Stdout)))
	p := tea.NewProgram(m, tea.WithAltScreen(), tea.WithContext(ctx))
	if _, err := p.Run(); err != nil && !errors.Is(err, tea.ErrProgramKilled) {
		fail(stderr, err)
		return 1
	}
	return 0
}

// check validates the flags before anything starts.
func check(f *flags) error {
	switch f.sort {
	case "":
		f.sort = api.MeasureRU
		if f.postgres != "" {
			f.sort = api.MeasureDB
		}
	case api.MeasureRU, api.MeasureDB, api.MeasureReq, api.MeasureErr, api.MeasureP95:
	default:
		return fmt.Errorf("--sort %q: want ru, db, req, err or p95", f.sort)
	}
	if !slices.Contains(api.Groups, f.groupBy) {
		return fmt.Errorf("--group-by %q: want one of %s", f.groupBy, strings.Join(api.Groups, ", "))
	}
	if f.groupBy != api.GroupTenant && f.postgres == "" {
		return fmt.Errorf("--group-by %s needs --postgres DSN: a collector groups its load by tenant only", f.groupBy)
	}
	if f.top < 1 || f.top > 1000 {
		return fmt.Errorf("--top %s: want 1…1000", strconv.Itoa(f.top))
	}
	if f.force && f.record == "" {
		return errors.New("--force goes with --record FILE: it overwrites FILE")
	}
	if f.format != tui.FormatTable && f.format != tui.FormatJSON {
		return fmt.Errorf("--format %q: want table or json", f.format)
	}
	if f.interval < 0 || (f.postgres != "" && f.interval < 100*time.Millisecond) {
		return fmt.Errorf("--interval %s: want at least 100ms", f.interval)
	}
	return nil
}

func open(ctx context.Context, isDemo bool, f *flags) (tui.Source, error) {
	switch {
	case isDemo:
		var opts []demo.Option
		if f.dataDir != "" {
			opts = append(opts, demo.WithDir(f.dataDir))
		}
		if f.listen != "" {
			opts = append(opts, demo.WithListen(f.listen))
		}
		return demo.New(ctx, opts...)
	case f.postgres != "":
		return tui.NewPostgres(ctx, f.postgres, tui.WithInterval(f.interval))
	}
	admin, err := adminToken(f)
	if err != nil {
		return nil, err
	}
	tr, err := f.tls.Transport()
	if err != nil {
		return nil, err
	}
	hc := api.WithHTTPClient(&http.Client{Transport: tr})
	if strings.Contains(f.collector, ",") {
		return tui.NewFleet(strings.Split(f.collector, ","), f.token, admin, hc)
	}
	return tui.NewCollector(f.collector, admin, api.WithToken(f.token), hc)
}

// adminToken is the token of policy changes: --admin-token, else the
// first line of --admin-token-file, else the read token.
func adminToken(f *flags) (string, error) {
	if f.adminToken != "" {
		return f.adminToken, nil
	}
	if f.adminTokenFile != "" {
		b, err := os.ReadFile(f.adminTokenFile)
		if err != nil {
			return "", fmt.Errorf("--admin-token-file: %w", err)
		}
		t, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
		if t == "" {
			return "", fmt.Errorf("--admin-token-file %s: empty", f.adminTokenFile)
		}
		return t, nil
	}
	return f.token, nil
}

// once prints one snapshot.
func once(ctx context.Context, src tui.Source, q tui.Query, format string, stdout, stderr io.Writer) int {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var (
		s   api.Snapshot
		err error
	)
	if o, ok := src.(tui.OnceSource); ok {
		s, err = o.Once(ctx, q)
	} else {
		s, err = src.Next(ctx, q)
	}
	recorded := err
	if errors.Is(err, tui.ErrRecordingStopped) {
		err = nil // the snapshot came: print it, then say what failed
	}
	if err == nil {
		err = tui.Print(stdout, s, format)
	}
	if err == nil && recorded != nil {
		err = recorded
	}
	if err != nil {
		fail(stderr, err)
		return 1
	}
	return 0
}

// fail prints err on stderr, on one line and printable: an error may
// carry what a collector answered, and that is no one's to run on the
// terminal.
func fail(stderr io.Writer, err error) { fmt.Fprintln(stderr, "qtop:", printable(err.Error())) }

func printable(s string) string { return api.Printable(s) }

// defaultActionLog is $XDG_STATE_HOME/qtop/actions.log, or
// ~/.local/state/qtop/actions.log.
func defaultActionLog() string {
	dir := os.Getenv("XDG_STATE_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "qtop-actions.log"
		}
		dir = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(dir, "qtop", "actions.log")
}

// openActionLog opens the action log for appending, creating its folder.
func openActionLog(path string) (*os.File, error) {
	if path == "" {
		return nil, errors.New("--action-log: want a file (every action is logged)")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("--action-log %s: %w (choose another file with --action-log)", path, err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("--action-log %s: %w (choose another file with --action-log)", path, err)
	}
	return f, nil
}
