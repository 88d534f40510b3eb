package tui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/qtop-dev/qtop/api"
)

// Formats of Print.
const (
	FormatJSON  = "json"
	FormatTable = "table"
)

// Print writes one snapshot for an incident note or a script: the
// collector's JSON with the headline added ("headline": offenders and
// victims by name, see Headline; from one snapshot, victims need the
// baselines the source sends), or plain tables (FormatTable).
func Print(w io.Writer, s api.Snapshot, format string) error {
	s = sanitize(s)
	switch format {
	case FormatJSON:
		var in summary
		in.add(&s)
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			api.Snapshot
			Headline Headline `json:"headline"`
		}{s, in.head})
	case FormatTable:
		return printTable(w, &s)
	}
	return fmt.Errorf("%w: format %q: want json or table", ErrInput, format)
}

// windowText says what the numbers are averaged over: "one sample" for a
// single pg_stat_activity sample (Window 0), not "window 1s".
func windowText(s *api.Snapshot) string {
	if s.Window <= 0 {
		return "one sample"
	}
	return "window " + s.Window.String()
}

func printTable(w io.Writer, s *api.Snapshot) error {
	var buf bytes.Buffer
	tw := newWideTab(&buf, 2)
	group := s.GroupBy
	if group == "" {
		group = api.GroupTenant
	}
	what := "tenants"
	if group != api.GroupTenant {
		what = "groups by " + group
	}
	fmt.Fprintf(tw, "qtop %s · source %s · %s · %d %s with load, ordered by %s\n",
		s.Time.UTC().Format(time.RFC3339), s.Source, windowText(s), s.TenantsSeen, what, s.Measure)
	if s.ParallelWorkers > 0 {
		fmt.Fprintf(tw, "DB load counts %d parallel workers: a parallel query keeps several backends busy, so DB load can exceed the client sessions\n", s.ParallelWorkers)
	}
	printHeadline(tw, s)
	fmt.Fprintln(tw)
	printTenants(tw, s, group)
	printHotKeys(tw, s)
	printPostgres(tw, s)
	printTopSQL(tw, s)
	printServices(tw, s)
	if e := s.Collector.SamplerError; e != "" {
		fmt.Fprintf(tw, "\nsampler: %s\n", clean(e))
	}
	printTrouble(tw, s)
	if u := unreadTags(s); u != "" {
		fmt.Fprintf(tw, "\ntags lost: %s\n", u)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	lines := bytes.Split(buf.Bytes(), []byte("\n"))
	for i, l := range lines {
		lines[i] = bytes.TrimRight(l, " ")
	}
	_, err := w.Write(bytes.Join(lines, []byte("\n")))
	return err
}

// printTrouble says what a collector's JSON says and the tables would
// otherwise hide: peers that did not answer (their load is missing from
// the figures above), and a store that takes no writes.
func printTrouble(tw io.Writer, s *api.Snapshot) {
	for _, p := range s.Peers {
		if !p.OK {
			fmt.Fprintf(tw, "\npeer %s did not answer (its processes are missing above): %s\n", clean(p.Collector), clean(p.Error))
		}
	}
	c := &s.Collector
	if c.Store != "" && c.Store != "none" && !c.StoreHealthy { // --store none: no store to be unhealthy
		fmt.Fprintf(tw, "\nstore unhealthy: %s", clean(c.StoreError))
		if c.SpoolBytes > 0 {
			fmt.Fprintf(tw, " (%d bytes wait in the spool, the oldest for %.0f s)", c.SpoolBytes, c.SpoolOldestSeconds)
		}
		fmt.Fprintln(tw)
	}
}

// printTenants prints the tenants (or groups) table.
func printTenants(tw io.Writer, s *api.Snapshot, group string) {
	pg := s.Source == api.SourcePostgres
	na := func(v string) string {
		if pg {
			return "n/a" // PostgreSQL knows neither RU, nor requests, nor their latency
		}
		return v
	}
	fmt.Fprintln(tw, groupName(group)+"\tTIER\tDB LOAD\tRU/s\tREQ/s\tP95\tERR/s\tSHARE\tTHROTTLED\t")
	for _, r := range s.Tenants {
		th := ""
		if r.Throttled {
			th = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", rowLabel(group, &r), r.Tier, fmtNum(r.DBLoad), na(fmtNum(r.RUPerSec)),
			na(fmtNum(r.ReqPerSec)), na(fmtSeconds(r.P95Seconds)), na(fmtNum(r.ErrPerSec)), fmtShare(r.Share), th)
	}
}

// printHotKeys prints the hottest keys.
func printHotKeys(tw io.Writer, s *api.Snapshot) {
	if len(s.HotKeys) > 0 {
		fmt.Fprintln(tw, "\nKEY\tTENANT\tCOUNT\t± ERR\tSHARE\t")
		for _, k := range s.HotKeys {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", clean(k.Key), clean(k.Tenant), k.Count, k.Err, fmtShare(k.Share))
		}
	}
}

// printPostgres prints what pg_stat_activity gives: statements, blocked
// sessions and xmin holders.
func printPostgres(tw io.Writer, s *api.Snapshot) {
	if len(s.Statements) > 0 {
		fmt.Fprintln(tw, "\nPID\tTENANT\tDATABASE\tAPP\tROUTE\tDURATION\tSTATE\tWAIT\tQUERY\t")
		for _, r := range s.Statements {
			q := fit(clean(r.Query), 80, false)
			tn := r.Tenant
			if tn == "" {
				tn = "(untagged)"
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.PID, clean(tn), orDash(clean(r.Database)), clean(r.Application), clean(r.Route), fmtDuration(r.Duration),
				clean(r.State), clean(waitText(&r)), q)
		}
	}
	if len(s.Blocked) > 0 {
		fmt.Fprintln(tw, "\nBLOCKED\tTENANT\tWAITS FOR\tTENANT\tSTATE\tQUERY OF THE BLOCKER\t")
		for _, p := range s.Blocked {
			fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\n", p.Blocked.PID, untaggedName(p.Blocked.Tenant), p.Blocking.PID,
				untaggedName(p.Blocking.Tenant), clean(p.Blocking.State), fit(clean(p.Blocking.Query), 60, false))
		}
	}
	if len(s.XminHolders) > 0 {
		fmt.Fprintln(tw, "\nXMIN HOLDER\tTENANT\tAPP\tSTATE\tXMIN AGE\tQUERY\t")
		for _, r := range s.XminHolders {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d xids\t%s\n", r.PID, untaggedName(r.Tenant), clean(r.Application), clean(r.State),
				r.XminAge, fit(clean(r.Query), 60, false))
		}
	}
}

// printServices prints the services' latency and the policy's rules.
func printServices(tw io.Writer, s *api.Snapshot) {
	if len(s.Services) > 0 {
		fmt.Fprintln(tw, "\nSERVICE\tRATIO\tDEGRADED\tSHEDDING\tREQ/s\tP95\tBASE P95\tPROCESSES\t")
		for _, r := range s.Services {
			fmt.Fprintf(tw, "%s\t%s\t%t\t%s\t%s\t%s\t%s\t%d\n", clean(r.Service), fmtRatio(r.Ratio), r.Degraded, shedName(r.ShedLevel),
				fmtNum(r.ReqPerSec), fmtSeconds(r.P95Seconds), fmtSeconds(r.BaselineP95Seconds), r.Processes)
		}
	}
	if len(s.Policy.Rules) > 0 {
		fmt.Fprintln(tw, "\nRULE\tTARGET\tACTION\tLIMIT\tEXPIRES\tREASON\t")
		for _, r := range s.Policy.Rules {
			target := r.Tenant
			if target == "" {
				target = "tier " + r.Tier.String()
			}
			limit := strconv.FormatFloat(r.RUPerSecond, 'f', -1, 64) + " RU/s"
			if r.Action == "price" {
				limit = "×" + strconv.FormatFloat(r.Multiplier, 'f', -1, 64)
			}
			action := string(r.Action)
			if r.Shadow {
				action += " (shadow)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", clean(r.ID), clean(target), action, limit,
				r.Expires.UTC().Format(time.RFC3339), clean(r.Reason))
		}
		for _, u := range s.Unapplied {
			fmt.Fprintln(tw, clean(u.Note()))
		}
	}
}

// untaggedName shows a statement's tenant, "(untagged)" for none.
func untaggedName(t string) string {
	if t == "" {
		return "(untagged)"
	}
	return clean(t)
}

// printHeadline prints the headline and its victims by name (from this
// one snapshot: victims need baselines the source sends).
func printHeadline(tw io.Writer, s *api.Snapshot) {
	var in summary
	in.add(s)
	fmt.Fprintf(tw, "headline: %s\n", clean(in.head.Line))
	if line, _ := autopilotHeadline(s.Autopilot, s.Unapplied, s.Time); line != "" {
		fmt.Fprintln(tw, line)
	}
	if s.Server != nil {
		fmt.Fprintln(tw, serverLine(s.Server))
	}
	if len(in.head.Victims) == 0 {
		return
	}
	fmt.Fprintln(tw, "\nVICTIM\tP95\tBASELINE P95\tSLOW FOR\tSHARE\tBASELINE SHARE\tROUTES HURT\t")
	for _, v := range in.head.Victims {
		var rs []string
		for _, r := range v.Routes {
			rs = append(rs, routeName(r.Route)+" "+fmtSeconds(r.P95Seconds))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", clean(v.Tenant), fmtSeconds(v.P95Seconds), fmtSeconds(v.BaselineP95Seconds),
			in.slowFor(v), fmtShare(v.Share), fmtShare(v.BaselineShare), orDash(strings.Join(rs, ", ")))
	}
}

// printTopSQL prints pg_stat_statements' deltas (qtop --postgres; none in
// one sample: --once has no interval to take deltas over).
func printTopSQL(tw io.Writer, s *api.Snapshot) {
	if s.TopSQLError != "" {
		fmt.Fprintf(tw, "\ntop SQL: %s\n", clean(s.TopSQLError))
	}
	if len(s.TopSQL) == 0 {
		return
	}
	fmt.Fprintln(tw, "\nTIME ms/s\tCALLS/s\tMEAN ms\tROWS/s\tHIT/s\tREAD/s\tDATABASE\tTENANTS\tQUERY\t")
	for _, r := range s.TopSQL {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", fmtNum(r.TimeMsPerSec), fmtNum(r.CallsPerSec), fmtNum(r.MeanMs),
			fmtNum(r.RowsPerSec), fmtNum(r.SharedHitPerSec), fmtNum(r.SharedReadPerSec), orDash(clean(r.Database)),
			orDash(clean(strings.Join(r.Tenants, ","))), fit(clean(strings.Join(strings.Fields(r.Query), " ")), 80, false))
	}
}
