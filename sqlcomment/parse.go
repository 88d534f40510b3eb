package sqlcomment

import (
	"errors"
	"fmt"
	"strings"
)

// ErrMalformed is returned by Parse for a comment it cannot read; test with
// errors.Is.
var ErrMalformed = errors.New("sqlcomment: malformed comment")

// Parse reads the tags of the last block comment in query: the inverse of
// Append, so Parse(Append(q, tags)) returns tags for any q that had no
// comment. A query without a block comment, or with an empty one, gives an
// empty map and no error.
//
// It also reads the variants seen in the wild: unquoted values (k=v), a
// space after the commas, the comment at the start of the statement,
// '+' for a space (as url.QueryEscape writes it), and marginalia's k:v pairs
// (taken verbatim, not URL-decoded). Anything else (an unterminated comment
// or quote, a pair without '=' or ':', an empty key, a bad %-escape, a key
// given twice) is an error wrapping ErrMalformed. Parse never panics.
func Parse(query string) (map[string]string, error) {
	r := scan(query)
	if r.lastStart < 0 {
		return map[string]string{}, nil
	}
	if r.lastEnd < 0 {
		return nil, fmt.Errorf("%w: comment at byte %d is not closed", ErrMalformed, r.lastStart)
	}
	return parseBody(query[r.lastStart+2 : r.lastEnd-2])
}

func parseBody(body string) (map[string]string, error) {
	tags := map[string]string{}
	i := skipSpace(body, 0)
	for i < len(body) {
		// Key, up to '=' or ':'.
		start := i
		for i < len(body) && body[i] != '=' && body[i] != ':' && body[i] != ',' {
			if body[i] == '\\' {
				i++ // \' in a key
			}
			i++
		}
		if i > len(body) {
			return nil, fmt.Errorf("%w: key ends in a lone '\\'", ErrMalformed)
		}
		if i == len(body) || body[i] == ',' {
			return nil, fmt.Errorf("%w: %q has no '=' or ':'", ErrMalformed, clip(body[start:i]))
		}
		sep := body[i]
		rawKey := unbackslash(strings.TrimRight(body[start:i], " \t\r\n"))
		if rawKey == "" {
			return nil, fmt.Errorf("%w: empty key at byte %d", ErrMalformed, start)
		}
		i = skipSpace(body, i+1)

		var key, val string
		var err error
		switch {
		case sep == ':':
			// Marginalia: verbatim key and value.
			key = rawKey
			j := i
			for j < len(body) && body[j] != ',' {
				j++
			}
			val = strings.TrimRight(body[i:j], " \t\r\n")
			i = j
		case i < len(body) && body[i] == '\'':
			var raw string
			raw, i, err = quoted(body, i+1)
			if err != nil {
				return nil, err
			}
			if key, err = unescape(rawKey); err != nil {
				return nil, err
			}
			if val, err = unescape(raw); err != nil {
				return nil, err
			}
			i = skipSpace(body, i)
			if i < len(body) && body[i] != ',' {
				return nil, fmt.Errorf("%w: %q after the value of %q", ErrMalformed, clip(body[i:]), clip(key))
			}
		default:
			j := i
			for j < len(body) && body[j] != ',' {
				j++
			}
			if key, err = unescape(rawKey); err != nil {
				return nil, err
			}
			if val, err = unescape(strings.TrimRight(body[i:j], " \t\r\n")); err != nil {
				return nil, err
			}
			i = j
		}
		if _, dup := tags[key]; dup {
			return nil, fmt.Errorf("%w: key %q given twice", ErrMalformed, clip(key))
		}
		tags[key] = val
		if i < len(body) { // at ','
			i = skipSpace(body, i+1)
			if i == len(body) {
				return nil, fmt.Errorf("%w: trailing ','", ErrMalformed)
			}
		}
	}
	return tags, nil
}

// quoted reads a '…' value whose body starts at i, with \' (or any \x) as
// an escape. It returns the body with escapes removed and the index past
// the closing quote.
func quoted(s string, i int) (string, int, error) {
	var b strings.Builder
	start := i
	for i < len(s) {
		switch s[i] {
		case '\\':
			if i+1 >= len(s) {
				return "", 0, fmt.Errorf("%w: value ends in a lone '\\'", ErrMalformed)
			}
			b.WriteString(s[start:i])
			b.WriteByte(s[i+1])
			i += 2
			start = i
		case '\'':
			if b.Len() == 0 {
				return s[start:i], i + 1, nil
			}
			b.WriteString(s[start:i])
			return b.String(), i + 1, nil
		default:
			i++
		}
	}
	return "", 0, fmt.Errorf("%w: value quote is not closed", ErrMalformed)
}

// unbackslash removes \ escapes (Format writes \' for a quote in a key).
func unbackslash(s string) string {
	if strings.IndexByte(s, '\\') < 0 {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b = append(b, s[i])
	}
	return string(b)
}

// unescape undoes percent-encoding byte by byte and reads '+' as a space.
func unescape(s string) (string, error) {
	if strings.IndexByte(s, '%') < 0 && strings.IndexByte(s, '+') < 0 {
		return s, nil
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '%':
			if i+2 >= len(s) {
				return "", fmt.Errorf("%w: truncated %%-escape in %q", ErrMalformed, clip(s))
			}
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if !ok1 || !ok2 {
				return "", fmt.Errorf("%w: bad %%-escape %q", ErrMalformed, s[i:i+3])
			}
			b = append(b, hi<<4|lo)
			i += 2
		case '+':
			b = append(b, ' ')
		default:
			b = append(b, c)
		}
	}
	return string(b), nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

func skipSpace(s string, i int) int {
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	return i
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
