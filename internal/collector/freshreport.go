package collector

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"

	"github.com/qtop-dev/qtop/api"
)

// WriteFreshness writes the repeat-share report of a freshness view — per
// route, the share of sampled GETs that repeated the caller's previous
// response within the repeat window — and the rules' live counters, in
// format (FormatTable, FormatCSV: routes only, FormatJSON: the whole
// view).
func WriteFreshness(w io.Writer, v api.Freshness, format string) error {
	switch format {
	case FormatJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case FormatCSV:
		cw := csv.NewWriter(w)
		cw.Write([]string{"route", "sampled_gets", "repeats", "repeat_share"})
		for _, r := range v.Routes {
			cw.Write([]string{csvSafe(r.Route), strconv.FormatUint(r.Samples, 10), strconv.FormatUint(r.Repeats, 10),
				strconv.FormatFloat(r.RepeatShare, 'f', 4, 64)})
		}
		cw.Flush()
		return cw.Error()
	case FormatTable, "":
	default:
		return fmt.Errorf("%w: format %q: want table, csv or json", ErrReport, clip(format))
	}
	fmt.Fprintf(w, "GETs that repeated the caller's previous response within %s, from sampled callers:\n\n", fmtHours(v.RepeatWindow))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ROUTE\tSAMPLED GETS\tREPEATS\tREPEAT SHARE")
	for _, r := range v.Routes {
		if r.Samples == 0 {
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f%%\n", printable(r.Route), r.Samples, r.Repeats, 100*r.RepeatShare)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(v.Rules) > 0 {
		fmt.Fprintf(w, "\nFreshness rules, last %s:\n\n", fmtHours(v.LiveWindow))
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "RULE\tROUTE\tMATCHED\tCUT\t304 SERVED\tSHADOW RIGHT\tSHADOW WRONG\tPRECISION")
		for _, r := range v.Rules {
			prec := "-"
			if r.Precision >= 0 {
				prec = fmt.Sprintf("%.1f%%", 100*r.Precision)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%.1f%%\t%d\t%d\t%d\t%s\n", printable(r.Rule), printable(r.Route), r.Matched, 100*r.Cut, r.Served, r.Right, r.Wrong, prec)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if v.Untracked > 0 || v.Dropped > 0 {
		fmt.Fprintf(w, "\n(%d samples not tracked for lack of room, %d dropped by processes)\n", v.Untracked, v.Dropped)
	}
	return nil
}

func fmtHours(secs float64) string {
	if secs >= 3600 {
		return strconv.FormatFloat(secs/3600, 'f', -1, 64) + " h"
	}
	return strconv.FormatFloat(secs/60, 'f', -1, 64) + " min"
}
