package tui

import (
	"fmt"
	"slices"
	"strings"

	"github.com/qtop-dev/qtop/api"
	"github.com/qtop-dev/qtop/policy"
)

// budgetLines renders the Enforcement view's section of database budgets
// and runaway rules: each with its match, its limits, its mode and what it
// did over the window (summed over processes and the collector's
// sampler). It renders nothing when the policy has none and nothing
// reports any, so that the view is unchanged for those who do not use
// them. A rule is listed by its id as the policy has it, with the
// counters of its name (api.BudgetName: a rule named "other" has those of
// other#d9298a10d1b07358, never those of the ids not in the policy,
// which the row "other" sums).
func budgetLines(c *common, pol policy.Policy, rows []api.BudgetRow) []string {
	if len(pol.Budgets) == 0 && len(pol.Runaway) == 0 && len(rows) == 0 {
		return nil
	}
	byID := map[string]api.BudgetRow{}
	for _, r := range rows {
		k := r.ID
		if r.Runaway {
			k = "\x00" + k
		}
		byID[k] = r
	}
	mw, lw := 24, 26
	aw := max(c.width-(2+12+1+mw+1+lw+1+9+1), 8)
	out := []string{"", c.st.title.Render(clip(fmt.Sprintf("Database budgets — %d budgets, %d runaway rules",
		len(pol.Budgets), len(pol.Runaway)), c.width))}
	out = append(out, c.st.header.Render(clip("  "+fit("ID", 12, false)+" "+fit("MATCH", mw, false)+" "+
		fit("LIMITS", lw, false)+" "+fit("MODE", 9, false)+" "+fit("WINDOW", aw, false), c.width)))
	line := func(id, match, limits, mode, activity string, hot bool) {
		l := clip("  "+fit(clean(id), 12, false)+" "+fit(clean(match), mw, false)+" "+fit(limits, lw, false)+" "+
			fit(mode, 9, false)+" "+fit(activity, aw, false), c.width)
		if hot {
			l = c.st.warn.Render(l)
		}
		out = append(out, l)
	}
	for _, b := range pol.Budgets {
		k := api.BudgetName(b.ID)
		r := byID[k]
		delete(byID, k)
		match := matchText(b.Match)
		if b.Each != "" && len(b.Match) == 0 {
			match = "each " + b.Each
		} else if b.Each != "" {
			match += ", each " + b.Each
		}
		line(b.ID, match, b.Limits(), string(b.ModeOrDefault()), budgetActivity(r), r.Refused+r.Warned+r.InTx > 0)
	}
	for _, ru := range pol.Runaway {
		k := "\x00" + api.BudgetName(ru.ID)
		r := byID[k]
		delete(byID, k)
		line(ru.ID, matchText(ru.Match), ru.Limits(), string(ru.Action), runawayActivity(r), r.Cancelled+r.Terminated+r.Reported > 0)
	}
	// Counters of ids the policy no longer has (a process not yet told).
	rest := make([]string, 0, len(byID))
	for k := range byID {
		rest = append(rest, k)
	}
	slices.Sort(rest)
	for _, k := range rest {
		r := byID[k]
		if r.Runaway {
			line(r.ID, "(not in policy)", "", "runaway", runawayActivity(r), false)
		} else {
			line(r.ID, "(not in policy)", "", "budget", budgetActivity(r), false)
		}
	}
	return out
}

func matchText(m []map[string]string) string {
	if len(m) == 0 {
		return "every statement"
	}
	alts := make([]string, 0, len(m))
	for _, a := range m {
		keys := make([]string, 0, len(a))
		for k := range a {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			keys[i] = k + "=" + a[k]
		}
		alts = append(alts, strings.Join(keys, " "))
	}
	return strings.Join(alts, " | ")
}

func budgetActivity(r api.BudgetRow) string {
	return "sent " + fmtCount(r.Admitted) + " · refused " + fmtCount(r.Refused) + " · warned " + fmtCount(r.Warned) +
		" · in tx " + fmtCount(r.InTx)
}

func runawayActivity(r api.BudgetRow) string {
	s := "cancelled " + fmtCount(r.Cancelled)
	if r.Terminated > 0 {
		s += " · terminated " + fmtCount(r.Terminated)
	}
	return s + " · reported " + fmtCount(r.Reported) + " · watch " + fmtCount(r.WatchRefused)
}
