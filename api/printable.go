package api

import (
	"strings"
	"unicode"
)

// Printable makes text from the wire safe to print on a terminal:
// control characters (escape sequences, newlines, tabs; C1 controls; the
// replacement character of bytes that were not UTF-8) and bidirectional
// controls (U+202A…U+202E, U+2066…U+2069, U+200E, U+200F, U+061C, which
// reorder what follows them) become spaces, so that a tenant name or a
// query can never move the cursor, recolour the screen or disguise a line. Every screen of qtop and the incident headline print through it.
func Printable(s string) string {
	ok := true
	for _, r := range s {
		if Unprintable(r) {
			ok = false
			break
		}
	}
	if ok {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		if Unprintable(r) {
			r = ' '
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Unprintable reports whether Printable replaces r.
func Unprintable(r rune) bool {
	return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == unicode.ReplacementChar || unicode.Is(unicode.Bidi_Control, r)
}
