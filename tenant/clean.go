package tenant

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// ValidateString checks any string that came from outside the process
// and ends up in a store row, a label or a terminal (a hot key, a service
// or instance name): non-empty, at most max bytes, printable UTF-8. It is
// the check [Tags.Validate] applies to each tag; field names the value in
// the error.
func ValidateString(field, s string, max int) error { return validate(field, s, max) }

// ValidateKey checks a hot key: non-empty, at most MaxKeyLen bytes,
// printable UTF-8.
func ValidateKey(s string) error { return validate("key", s, MaxKeyLen) }

// Clean returns s made acceptable to [ValidateString] (except for being
// empty): each byte that is not valid UTF-8 and each non-printable rune
// becomes a \xNN or \uNNNN escape, so distinct binary values stay
// distinct, and the result is cut to at most max bytes at a rune
// boundary. It reports whether s changed; a valid s is returned as is,
// without allocating.
func Clean(s string, max int) (string, bool) {
	if len(s) <= max && printableUTF8(s) {
		return s, false
	}
	var b strings.Builder
	b.Grow(min(len(s), max) + 8)
	const hex = "0123456789abcdef"
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		var part string
		switch {
		case r == utf8.RuneError && size <= 1:
			part = string([]byte{'\\', 'x', hex[s[i]>>4], hex[s[i]&15]})
		case !unicode.IsPrint(r):
			if r < 0x100 {
				part = string([]byte{'\\', 'x', hex[r>>4], hex[r&15]})
			} else {
				part = string([]byte{'\\', 'u', hex[r>>12&15], hex[r>>8&15], hex[r>>4&15], hex[r&15]})
			}
		default:
			part = s[i : i+size]
		}
		if b.Len()+len(part) > max {
			break
		}
		b.WriteString(part)
		i += size
	}
	return b.String(), true
}

func printableUTF8(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			if !utf8.ValidString(s[i:]) {
				return false
			}
			for _, r := range s[i:] {
				if !unicode.IsPrint(r) {
					return false
				}
			}
			return true
		}
	}
	return true
}
