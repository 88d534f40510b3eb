package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/autopilot"
	"github.com/qtop-dev/qtop/internal/collector"
	"github.com/qtop-dev/qtop/policy"
	"github.com/qtop-dev/qtop/tlsfiles"
)

const auditUsage = `Usage: collector audit [flags]

Prints the policy changes of a range, oldest first: when, who (the
credential and address that made it), the action (add, replace, lift), the
policy version, the rule's tenant or tier, action and expiry; and the
tenant erasures (action erase: what collector erase removed where). Reads the store
directly (--store, DuckDB or ClickHouse), or asks a running collector
(--collector, with its admin token), which is needed for a DuckDB file the
collector holds open.

Times: RFC 3339, YYYY-MM-DD (UTC), "now", or an age such as 24h or 7d.

Examples:
  collector audit --from 7d
  collector audit --store clickhouse://127.0.0.1:9000/qtop --from 2026-03-01 --format json
  collector audit --collector 127.0.0.1:7070 --admin-token-file qtop-data/admin-token
  collector audit --collector https://collector:7070 --ca-file ca.pem --admin-token-file admin-token

Flags:
`

func audit(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("audit", auditUsage, stderr)
	var envs []envFlag
	from := fs.String("from", "7d", "start of the range (inclusive)")
	to := fs.String("to", "now", "end of the range (exclusive)")
	format := fs.String("format", "table", "table or json")
	storeFlag := newStoreFlags(fs, &envs, "store to read: duckdb://PATH or clickhouse://HOST:PORT/DB", nil)
	cluster := strFlag(fs, &envs, "cluster", "QTOP_CLUSTER", "", "ClickHouse cluster name")
	remote := strFlag(fs, &envs, "collector", "QTOP_COLLECTOR", "", "ask a running collector (host:port) instead of opening the store")
	admin := secretFlag(fs, &envs, "admin-token", "QTOP_ADMIN_TOKEN", "the collector's admin token, with --collector")
	var tlsFiles tlsfiles.ClientFiles // with an https:// --collector
	tlsFiles.RegisterFlags(fs)
	if code, done := parse(fs, args, stderr); done {
		return code
	}
	if *format != "table" && *format != "json" {
		fmt.Fprintf(stderr, "collector audit: --format %q: want table or json\n", *format)
		return 2
	}
	now := time.Now()
	f, err := collector.ParseTime(*from, now)
	which := "--from"
	if err == nil {
		var t time.Time
		which = "--to"
		if t, err = collector.ParseTime(*to, now); err == nil {
			now = t
		}
	}
	if err != nil {
		// ParseTime is the cost report's: its errors name the report.
		fmt.Fprintf(stderr, "collector audit: %s: %s\n", which, strings.TrimPrefix(err.Error(), collector.ErrReport.Error()+": "))
		return 2
	}
	if !f.Before(now) { // now: --to
		fmt.Fprintf(stderr, "collector audit: --from %s is not before --to %s\n", f.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	storeURL := ""
	if *remote == "" {
		if storeURL, err = storeFlag.resolve("audit", true, stderr); err != nil {
			fmt.Fprintln(stderr, "collector audit:", err)
			return 1
		}
	}
	rows, code := auditRows(ctx, auditFrom{*remote, admin, tlsFiles, storeURL, *cluster}, f, now, stderr)
	if code != 0 {
		return code
	}
	if *format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rows); err != nil {
			return 1
		}
		return 0
	}
	if err := printAudit(stdout, rows); err != nil {
		return 1
	}
	return 0
}

// auditFrom is where collector audit reads: a running collector (remote,
// with the admin token, its TLS files for an https:// address), or else
// the store.
type auditFrom struct {
	remote            string
	admin             *secret
	tls               tlsfiles.ClientFiles
	storeURL, cluster string
}

// auditRows reads the audit rows from a running collector (remote) or
// from the store; code is the exit code when it cannot (0: read).
func auditRows(ctx context.Context, at auditFrom, from, to time.Time, stderr io.Writer) (rows []api.AuditRow, code int) {
	storeURL, cluster := at.storeURL, at.cluster
	if at.remote != "" {
		tok, err := at.admin.get()
		if err != nil {
			fmt.Fprintln(stderr, "collector audit:", err)
			return nil, 2
		}
		tr, err := at.tls.Transport()
		if err != nil {
			fmt.Fprintln(stderr, "collector audit:", err)
			return nil, 2
		}
		c, err := api.NewClient(at.remote, api.WithHTTPClient(&http.Client{Transport: tr}))
		if err != nil {
			fmt.Fprintln(stderr, "collector audit:", err)
			return nil, 2
		}
		if rows, err = c.Audit(ctx, from, to, tok); err != nil {
			if msg, ok := noAnswer(at.remote, err); ok {
				fmt.Fprintln(stderr, "collector audit:", msg)
				return nil, 1
			}
			fmt.Fprintln(stderr, "collector audit:", err)
			if errors.Is(err, api.ErrUnauthorized) {
				fmt.Fprintln(stderr, "collector audit: pass the collector's admin token: --admin-token-file DATA_DIR/admin-token")
			}
			return nil, 1
		}
		return rows, 0
	}
	st, err := collector.OpenExistingStore(ctx, storeURL, collector.Config{FleetConfig: collector.FleetConfig{Cluster: cluster}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Fprintln(stderr, "collector audit:", err)
		if strings.Contains(err.Error(), "lock") {
			fmt.Fprintln(stderr, "collector audit: a running collector holds the DuckDB file; ask it instead: --collector HOST:PORT --admin-token-file DATA_DIR/admin-token")
		}
		return nil, 1
	}
	defer st.Close()
	if rows, err = collector.ReadAudit(ctx, st, from, to); err != nil {
		fmt.Fprintln(stderr, "collector audit:", err)
		return nil, 1
	}
	return rows, 0
}

// printAudit writes the audit rows as a table.
func printAudit(w io.Writer, rows []api.AuditRow) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tWHO\tACTION\tVERSION\tTARGET\tRULE\tEXPIRES\tREASON")
	for _, r := range rows {
		if r.Action == collector.ActionErase {
			var er collector.Erasure
			json.Unmarshal(r.Rule, &er)
			what := "wal " + strconv.Itoa(er.WAL.Rows) + " rows, spool " + erasedRows(er.Spool.Erased)
			if er.Store != nil {
				what += ", store " + erasedRows(*er.Store)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Time.UTC().Format(time.RFC3339), printable(r.Who), r.Action,
				"-", printable(er.Tenant), what, "-", "")
			continue
		}
		target, what, expires, reason := auditCells(r)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Time.UTC().Format(time.RFC3339), printable(r.Who), r.Action,
			policy.VersionString(r.PolicyVersion), printable(target), printable(what), expires, printable(reason))
	}
	return tw.Flush()
}

// auditCells are the target, rule, expiry and reason of an audit row: a
// policy rule's, an autopilot decision's (autopilot-apply, -relax, -lift,
// -cancel: its evidence is in --format json), or the autopilot's rules
// (autopilot-set, -pause, -resume).
func auditCells(r api.AuditRow) (target, what, expires, reason string) {
	at := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format(time.RFC3339)
	}
	switch r.Action {
	case "autopilot-set", "autopilot-pause", "autopilot-resume":
		var a policy.Autopilot
		json.Unmarshal(r.Rule, &a)
		what = strconv.Itoa(len(a.Rules)) + " rules"
		if a.Paused {
			what += ", paused"
		}
		return "autopilot", what, "-", ""
	}
	if strings.HasPrefix(r.Action, "autopilot-") {
		var d autopilot.Decision
		json.Unmarshal(r.Rule, &d)
		unit := map[policy.AutopilotAction]string{policy.AutopilotQuota: " RU/s", policy.AutopilotThrottle: " RU/s",
			policy.AutopilotBudget: " sessions", policy.AutopilotDemote: "×"}[d.Action]
		what = fmt.Sprintf("%s %g%s (rule %s)", d.Action, d.Limit, unit, d.Rule)
		if d.Shadow {
			what += " (shadow)"
		}
		switch {
		case d.PolicyRule != nil:
			expires = at(d.PolicyRule.Expires)
		case d.Budget != nil:
			expires = at(d.Budget.Expires)
		default:
			expires = "-"
		}
		return d.Tenant, what, expires, d.Why
	}
	if target, what, expires, reason, ok := listCells(r, at); ok {
		return target, what, expires, reason
	}
	var rule policy.Rule
	json.Unmarshal(r.Rule, &rule)
	target = rule.Tenant
	if target == "" {
		target = "tier " + rule.Tier.String()
	}
	what = string(rule.Action)
	switch rule.Action {
	case policy.Throttle, policy.Quota:
		what = fmt.Sprintf("%s %g RU/s", rule.Action, rule.RUPerSecond)
	case policy.Price:
		what = fmt.Sprintf("price ×%g", rule.Multiplier)
	}
	if rule.Shadow {
		what += " (shadow)"
	}
	return target, what, at(rule.Expires), rule.Reason
}

// listCells are the cells of a row that is not a throttle, price or
// quota rule: a database budget or runaway rule set or deleted, the
// freshness rules, a runaway statement acted on (by the sampler or a
// wrapper) or a pg_stat_activity signal sent for qtop; ok is false for
// any other row.
func listCells(r api.AuditRow, at func(time.Time) string) (target, what, expires, reason string, ok bool) {
	switch {
	case r.Action == "budget-set" || r.Action == "budget-delete":
		var b policy.Budget
		json.Unmarshal(r.Rule, &b)
		return "budget " + b.ID, budgetLimits(b), at(b.Expires), b.Reason, true
	case r.Action == "runaway-rule-set" || r.Action == "runaway-rule-delete":
		var w policy.Runaway
		json.Unmarshal(r.Rule, &w)
		return "runaway " + w.ID, string(w.Action) + " " + w.Limits(), at(w.Expires), w.Reason, true
	case r.Action == "freshness":
		var f policy.Freshness
		json.Unmarshal(r.Rule, &f)
		what = fmt.Sprintf("batch %d of %d rules", f.Batch, len(f.Rules))
		if f.Force {
			what += ", forced"
		}
		return "freshness", what, at(f.ForceUntil), f.Reason, true
	case strings.HasPrefix(r.Action, "runaway-"):
		var a api.RunawayAudit
		json.Unmarshal(r.Rule, &a)
		what = a.Done
		if a.PID != 0 {
			what += " pid " + strconv.Itoa(int(a.PID))
		}
		return a.Tenant, fmt.Sprintf("%s after %s (rule %s)", what, a.Duration.Round(time.Millisecond), a.Rule), "-", "", true
	case strings.HasPrefix(r.Action, "pg-"):
		var sig api.PGSignal
		json.Unmarshal(r.Rule, &sig)
		if sig.Actor != "" {
			reason = "for " + sig.Actor
		}
		return "pid " + strconv.Itoa(int(sig.PID)), sig.Action, "-", reason, true
	}
	return "", "", "", "", false
}

// budgetLimits says a budget's mode, its limits in the words of qtop's
// Enforcement view (policy.Budget.Limits) and its bucket key.
func budgetLimits(b policy.Budget) string {
	parts := []string{string(b.ModeOrDefault())}
	if l := b.Limits(); l != "" {
		parts = append(parts, l)
	}
	if b.Each != "" {
		parts = append(parts, "each "+b.Each)
	}
	return strings.Join(parts, ", ")
}

// printable keeps a value from moving the terminal's cursor.
func printable(s string) string {
	out := []rune(s)
	for i, r := range out {
		if r < 0x20 || r == 0x7f {
			out[i] = '?'
		}
	}
	return string(out)
}
