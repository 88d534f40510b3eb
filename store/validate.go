package store

import (
	"fmt"
	"math"
	"time"
	"unicode/utf8"
)

// ValidateRollups checks what every store needs of a rollup batch: a
// minute-aligned, non-zero time; a valid or unset tier; a known kind;
// finite, non-negative sums. (A latency histogram is valid by
// construction: ratio.Sparse holds buckets of its layout only.) The first
// bad row is named in an ErrInvalid.
func ValidateRollups(rows []Rollup) error {
	for i := range rows {
		r := &rows[i]
		switch {
		case !timeOK(r.Minute):
			return invalid("rollup", i, "minute %v outside 1970–2105", r.Minute)
		case !r.Minute.Equal(r.Minute.Truncate(time.Minute)):
			return invalid("rollup", i, "minute %v is not truncated to the minute", r.Minute)
		case r.Tier != 0 && !r.Tier.Valid():
			return invalid("rollup", i, "tier %d", uint8(r.Tier))
		case r.Kind != KindRequest && r.Kind != KindDB && r.Kind != KindJob && r.Kind != KindPG:
			return invalid("rollup", i, "kind %q (request, db, job or pg)", r.Kind)
		case !utf8OK(r.Writer, r.Service, r.Tenant, r.Route):
			return invalid("rollup", i, "a string is not valid UTF-8 (writer %q, service %q, tenant %q, route %q)", r.Writer, r.Service, r.Tenant, r.Route)
		}
		for _, f := range [...]float64{r.DurationSeconds, r.RU, r.ActiveSessionSeconds} {
			if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
				return invalid("rollup", i, "sum %v is not a finite non-negative number", f)
			}
		}
	}
	return nil
}

// ValidateHotKeys checks minute alignment and the error bound (Err ≤ Count).
func ValidateHotKeys(rows []HotKey) error {
	for i := range rows {
		r := &rows[i]
		switch {
		case !timeOK(r.Minute):
			return invalid("hot key", i, "minute %v outside 1970–2105", r.Minute)
		case !r.Minute.Equal(r.Minute.Truncate(time.Minute)):
			return invalid("hot key", i, "minute %v is not truncated to the minute", r.Minute)
		case r.Err > r.Count:
			return invalid("hot key", i, "error bound %d above count %d", r.Err, r.Count)
		case !utf8OK(r.Writer, r.Key, r.Tenant):
			return invalid("hot key", i, "a string is not valid UTF-8 (key %q, tenant %q)", r.Key, r.Tenant)
		}
	}
	return nil
}

// ValidateStatements checks that every statement has a time.
func ValidateStatements(rows []Statement) error {
	for i := range rows {
		if !timeOK(rows[i].Time) {
			return invalid("statement", i, "time %v outside 1970–2105", rows[i].Time)
		}
		if rows[i].Duration < 0 {
			return invalid("statement", i, "negative duration %v", rows[i].Duration)
		}
		r := &rows[i]
		if !utf8OK(r.Writer, r.Tenant, r.Route, r.Application, r.Query, r.State, r.WaitEventType, r.WaitEvent) {
			return invalid("statement", i, "a string is not valid UTF-8")
		}
	}
	return nil
}

// ValidateAudit checks that every audit row has a time, a who and an action.
func ValidateAudit(rows []Audit) error {
	for i := range rows {
		switch {
		case !timeOK(rows[i].Time):
			return invalid("audit", i, "time %v outside 1970–2105", rows[i].Time)
		case rows[i].Who == "" || rows[i].Action == "":
			return invalid("audit", i, "who and action are required")
		case !utf8OK(rows[i].Who, rows[i].Action, rows[i].Rule):
			return invalid("audit", i, "a string is not valid UTF-8")
		}
	}
	return nil
}

func invalid(what string, i int, format string, args ...any) error {
	return fmt.Errorf("%w: %s %d: %s", ErrInvalid, what, i, fmt.Sprintf(format, args...))
}

// timeOK reports whether t fits every store's time type (ClickHouse
// DateTime: 1970 to 2106).
func timeOK(t time.Time) bool {
	u := t.Unix()
	return !t.IsZero() && u > 0 && u < 1<<32-1
}

// utf8OK reports whether every string is valid UTF-8, which DuckDB's
// VARCHAR requires (it refuses the row: a batch that would be retried for
// ever).
func utf8OK(ss ...string) bool {
	for _, s := range ss {
		if !utf8.ValidString(s) {
			return false
		}
	}
	return true
}
