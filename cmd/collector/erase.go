package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/qtop-dev/qtop/internal/collector"
	"github.com/qtop-dev/qtop/store"
)

const eraseUsage = `Usage: collector erase --tenant NAME --yes [flags]

Erases one tenant's history (a customer leaving, a privacy request): its
rollups, the hot keys attributed to it and its sampled statements, from

  - the write-ahead log of the collector's open minutes (--data-dir/wal),
  - the batches spooled for an unreachable store (--data-dir/spool),
  - the baselines kept for qtop's headline (--data-dir/baselines.json),
  - the store (--store: DuckDB, or ClickHouse — every shard of a cluster),

each file rewritten atomically, then writes an audit record (who, when,
what was removed where) to the store's audit log, as policy changes are,
and prints it. Policy rules and audit rows that name the tenant are kept.

The collector must be stopped on --data-dir: it holds the tenant's open
minutes in memory and would write them again (erase refuses while the data
dir is locked). With several collectors sharing a ClickHouse store, erase
each one's data dir in turn; the store part is idempotent. Reports that a
process buffered while the collector was stopped lose the tenant's rows
when they arrive: for 7 days the collector drops them from reports of
windows begun before the erasure (--data-dir/erased.json). Rows of later
windows are stored again: stop the tenant's traffic first.

Nothing is asked interactively: --yes is required.

Examples:
  # One collector on DuckDB: stop it, erase, start it again.
  systemctl stop qtop-collector
  collector erase --tenant acme --data-dir /var/lib/qtop-collector --store duckdb:///var/lib/qtop-collector/qtop.duckdb --yes
  systemctl start qtop-collector

  # A ClickHouse cluster; --by names who asked, for the audit:
  collector erase --tenant acme --store clickhouse://ch1:9000/qtop --cluster prod \
      --data-dir /var/lib/qtop-collector --by "dpo@example.com ticket 4711" --yes

  # Then check the record:
  collector audit --store clickhouse://ch1:9000/qtop --cluster prod --from 1h

Flags:
`

func erase(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("erase", eraseUsage, stderr)
	var envs []envFlag
	name := fs.String("tenant", "", "the tenant whose rows are erased (required)")
	dataDir := strFlag(fs, &envs, "data-dir", "QTOP_DATA_DIR", collector.DefaultDataDir, "the stopped collector's data dir (write-ahead log and spool)")
	storeFlag := newStoreFlags(fs, &envs, "store: duckdb://PATH or clickhouse://HOST:PORT/DB (as the collector's), or none for the data dir only (then no audit record)", dataDir)
	cluster := strFlag(fs, &envs, "cluster", "QTOP_CLUSTER", "", "ClickHouse cluster name")
	by := fs.String("by", "", "who asks, for the audit record (default: the OS user)")
	yes := fs.Bool("yes", false, "erase without asking (required: the erasure cannot be undone)")
	format := fs.String("format", "table", "table or json")
	if code, done := parse(fs, args, stderr); done {
		return code
	}
	switch {
	case *name == "":
		fmt.Fprintln(stderr, "collector erase: --tenant NAME is required")
		return 2
	case *format != "table" && *format != "json":
		fmt.Fprintf(stderr, "collector erase: --format %q: want table or json\n", *format)
		return 2
	case !*yes:
		fmt.Fprintf(stderr, "collector erase: this erases every row of tenant %q from the store, the spool, the write-ahead log and the baselines, and cannot be undone; run again with --yes\n", *name)
		return 2
	}
	who := *by
	if who == "" {
		who = osUser()
	}
	storeURL, err := storeFlag.resolve("erase", true, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "collector erase:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	er, err := collector.EraseTenant(ctx, collector.EraseConfig{
		Tenant: *name, Store: storeURL, Cluster: *cluster, DataDir: *dataDir,
		Who: "erase:" + who, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		fmt.Fprintln(stderr, "collector erase:", err)
		if errors.Is(err, collector.ErrDataDirLocked) {
			fmt.Fprintln(stderr, "collector erase: a collector is running on this data dir; stop it first (it holds the tenant's open minutes in memory)")
		}
		if er.WAL.Files+er.Spool.Files > 0 {
			fmt.Fprintln(stderr, "collector erase: removed before the error (run it again to finish; it is idempotent):")
			printErasure(stderr, er, "table")
		}
		return 1
	}
	printErasure(stdout, er, *format)
	if nothingFound(er) {
		fmt.Fprintf(stderr, "collector erase: nothing of tenant %q was found anywhere (tenant names are case-sensitive): check the name, unless this ran before\n", er.Tenant)
	}
	if er.Store == nil {
		fmt.Fprintln(stderr, "collector erase: --store none: the store was not touched and no audit record was written")
	}
	return 0
}

// nothingFound says an erasure found none of the tenant's data: a
// misspelt name (the erasure is recorded all the same), or a second run.
func nothingFound(er collector.Erasure) bool {
	empty := func(e store.Erased) bool { return e.Rollups+e.HotKeys+e.Statements == 0 }
	return er.WAL.Reports == 0 && empty(er.Spool.Erased) && !er.Baselines && (er.Store == nil || empty(*er.Store))
}

// osUser names the user running the command, for the audit record.
func osUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "uid " + strconv.Itoa(os.Getuid())
}

// printErasure writes what was removed where.
func printErasure(w io.Writer, er collector.Erasure, format string) {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(er)
		return
	}
	fmt.Fprintf(w, "tenant %q erased:\n", er.Tenant)
	fmt.Fprintf(w, "  write-ahead log: %d report rows, %d hot keys, %d pool waits and quota usages, from %d reports in %d files",
		er.WAL.Rows, er.WAL.Keys, er.WAL.Other, er.WAL.Reports, er.WAL.Files)
	if er.WAL.Undecodable > 0 {
		fmt.Fprintf(w, " (%d records could not be read and were left)", er.WAL.Undecodable)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  spool:           %s, in %d files\n", erasedRows(er.Spool.Erased), er.Spool.Files)
	for _, f := range er.Spool.Undecodable {
		fmt.Fprintf(w, "  spool: %s could not be read and may hold the tenant's rows: inspect or delete it\n", f)
	}
	if er.Baselines {
		fmt.Fprintln(w, "  baselines:       the tenant's removed")
	} else {
		fmt.Fprintln(w, "  baselines:       held nothing of the tenant")
	}
	if !er.RefusedBefore.IsZero() {
		fmt.Fprintf(w, "  late reports:    the tenant's rows in reports of windows begun before %s are dropped for %s (%s)\n",
			er.RefusedBefore.Format(time.RFC3339), strings.TrimSuffix(collector.ErasedKeep.String(), "0m0s"), "--data-dir/erased.json")
	}
	if er.Store != nil {
		fmt.Fprintf(w, "  store:           %s\n", erasedRows(*er.Store))
		fmt.Fprintln(w, "  audit:           recorded (collector audit shows it)")
	}
}

func erasedRows(e store.Erased) string {
	return fmt.Sprintf("%d rollups, %d hot keys, %d statements", e.Rollups, e.HotKeys, e.Statements)
}

// parseRetention reads --retention: 0 (keep everything) or a duration of
// at least store.MinRetention, in Go's syntax with days as well ("90d",
// "1d12h", "36h").
func parseRetention(s string) (time.Duration, error) {
	bad := fmt.Errorf("--retention %q: want 0 (keep everything) or a duration of at least %s such as 90d, 30d or 36h", s, strings.TrimSuffix(store.MinRetention.String(), "0m0s"))
	s = strings.TrimSpace(s)
	if s == "" || s == "0" {
		return 0, nil
	}
	var d time.Duration
	rest := s
	if i := strings.IndexByte(s, 'd'); i > 0 {
		days, err := strconv.ParseFloat(s[:i], 64)
		if err != nil || days < 0 || days > 100*365 {
			return 0, bad
		}
		d, rest = time.Duration(days*24*float64(time.Hour)), s[i+1:]
	}
	if rest != "" {
		r, err := time.ParseDuration(rest)
		if err != nil {
			return 0, bad
		}
		d += r
	}
	if d != 0 && d < store.MinRetention {
		return 0, bad
	}
	return d, nil
}
