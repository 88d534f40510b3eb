package tui

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"

	"github.com/qtop-dev/qtop/policy"
)

// FuzzCleanFit: whatever text comes from the wire (a query, a tenant, a
// key), what the UI prints has no control character and is exactly as
// wide as its column.
func FuzzCleanFit(f *testing.F) {
	for _, s := range []string{"", "bigcorp", "SELECT 1\n\t/*tenant='a'*/", "\x1b[2J\x1b[H", "日本語テナント", "a\u200bb", "\xff\xfe", "\u0085x"} {
		f.Add(s, 10)
	}
	f.Fuzz(func(t *testing.T, s string, w int) {
		w = w%200 + 1
		if w < 1 {
			w = -w + 1
		}
		c := clean(s)
		if strings.ContainsFunc(c, func(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }) {
			t.Fatalf("clean(%q) = %q keeps a control character", s, c)
		}
		if utf8.ValidString(s) && utf8.RuneCountInString(c) != utf8.RuneCountInString(s) {
			t.Fatalf("clean(%q) = %q changed the length", s, c)
		}
		got := fit(c, w, false)
		if ansi.StringWidth(got) != w && ansi.StringWidth(c) >= 0 {
			// A double-width rune cannot be cut in half: one column short is all that may happen.
			if ansi.StringWidth(got) != w-1 {
				t.Fatalf("fit(%q, %d) = %q is %d wide", c, w, got, ansi.StringWidth(got))
			}
		}
	})
}

// FuzzThrottlePrompt: whatever is typed into the throttle prompt, the rule
// it makes is valid or the prompt says why, and nothing panics.
func FuzzThrottlePrompt(f *testing.F) {
	f.Add("480", "15m")
	f.Add("-1", "1h")
	f.Add("NaN", "1s")
	f.Add("1e309", "9999h")
	f.Add("0", "0s")
	f.Add("1e12", "1h")
	f.Fuzz(func(t *testing.T, ru, dur string) {
		p := throttlePrompt("bigcorp", 4800)
		p.ru.value, p.dur.value = ru, dur
		if limit, _, err := p.parseThrottle(); err == nil && limit > policy.MaxRUPerSecond {
			// Asked to confirm, then refused by the collector.
			t.Fatalf("(%q, %q): cap %g taken to the confirmation, above the collector's %g", ru, dur, limit, float64(policy.MaxRUPerSecond))
		}
		r, err := p.rule(t0, "alice")
		if err != nil {
			return
		}
		if verr := r.Validate(); verr != nil {
			t.Fatalf("(%q, %q) made an invalid rule %+v: %v", ru, dur, r, verr)
		}
		if !r.Expires.After(t0) || r.Expires.Sub(t0) > MaxThrottle {
			t.Fatalf("(%q, %q): expires %v", ru, dur, r.Expires)
		}
	})
}
