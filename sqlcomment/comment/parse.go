package comment

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/qtop-dev/qtop/sqlcomment/internal/lex"
)

// ErrMalformed is returned by Parse for a comment it cannot read whole;
// test with errors.Is.
var ErrMalformed = errors.New("sqlcomment: malformed comment")

// MaxParsedTags bounds the tags Parse returns for one statement; pairs past
// it are reported as malformed.
const MaxParsedTags = 64

// Parse reads the tags of every block comment of query, outside literals:
// the inverse of Append, so Parse(Append(q, tags)) returns tags for any q
// that had no comment. A query without a block comment, or with only
// empty ones, gives an empty map and no error.
//
// Comments written by other tools are read too: Rails' query log tags and
// Django's sqlcommenter (key='value'), Datadog's prepended DBM comment,
// marginalia's key:value pairs (taken verbatim, not URL-decoded), unquoted
// values (k=v), spaces around '=' and ',', and Python sqlcommenter's
// doubled '%' (%%3A reads as %3A, a ':').
//
// Several comments: their tags are merged, and on a key given in two
// comments the comment nearer the end of the statement wins (where
// sqlcommenter appends its comment). A comment of prose (/* nightly
// batch */, Hibernate's /* select u from User u */: its first word is not
// followed by '=' or ':') carries no tags and is skipped without error.
//
// A malformed pair (a quote left open, a pair without '=' or ':', an
// empty key, a bad %-escape, a key given twice in one comment, where the
// first value is kept) does not lose the others: Parse returns the
// well-formed pairs of every comment together with an error wrapping
// ErrMalformed that names the first problem and counts them. A comment
// left open (pg_stat_activity cut the statement at
// track_activity_query_size) is such an error too; its pairs before the
// last ',' are kept (the last one may be cut). A quote inside a quoted
// value that is followed by neither ',', a space nor the end of the
// comment is part of the value (knex writes value quotes unescaped).
//
// The '+' rule: in a URL-encoded value (k='v' or k=v) a bare '+' is a
// space. Go's url.QueryEscape (the sqlcommenter Go module) writes '+' for
// a space and %2B for a '+'; encodeURIComponent and Python's quote (the
// Node.js, knex, Django and Rails writers) never write a bare '+'. Only
// marginalia's verbatim k:v pairs keep a '+' as it is.
//
// Parse never panics; its time and memory are linear in len(query).
func Parse(query string) (map[string]string, error) {
	tags := map[string]string{}
	var p problems
	eachComment(query, func(body string, closed bool) {
		if !closed {
			// Cut, most likely at track_activity_query_size: the pairs
			// before the last ',' are whole, the last one may not be.
			p.add(fmt.Errorf("%w: comment is not closed (the statement may be cut at track_activity_query_size)", ErrMalformed))
			body = body[:max(strings.LastIndexByte(body, ','), 0)]
		}
		parseBody(body, tags, &p)
	})
	return tags, p.err()
}

// problems gathers the malformed parts of a statement: the first error and
// how many there were.
type problems struct {
	first error
	n     int
}

func (p *problems) add(err error) {
	if p.first == nil {
		p.first = err
	}
	p.n++
}

func (p *problems) err() error {
	switch p.n {
	case 0:
		return nil
	case 1:
		return p.first
	}
	return fmt.Errorf("%w (and %d more)", p.first, p.n-1)
}

// eachComment calls fn with the body of every top-level block comment of
// q outside literals, quoted identifiers and dollar quotes, in order;
// closed is false for a comment left open at the end of q. Nested
// comments are part of their outer comment's body.
func eachComment(q string, fn func(body string, closed bool)) {
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == '\'':
			escapes := i > 0 && (q[i-1] == 'E' || q[i-1] == 'e') && (i == 1 || !lex.IsIdent(q[i-2]))
			j, ok := lex.SkipQuoted(q, i+1, '\'', escapes)
			if !ok {
				return
			}
			i = j
		case c == '"':
			j, ok := lex.SkipQuoted(q, i+1, '"', false)
			if !ok {
				return
			}
			i = j
		case c == '$' && (i == 0 || !lex.IsIdent(q[i-1])):
			tagEnd, ok := lex.DollarTag(q, i)
			if !ok {
				i++
				continue
			}
			k := strings.Index(q[tagEnd:], q[i:tagEnd])
			if k < 0 {
				return
			}
			i = tagEnd + k + (tagEnd - i)
		case c == '-' && i+1 < len(q) && q[i+1] == '-':
			k := strings.IndexByte(q[i:], '\n')
			if k < 0 {
				return
			}
			i += k + 1
		case c == '/' && i+1 < len(q) && q[i+1] == '*':
			depth, j := 1, i+2
			for j < len(q) && depth > 0 {
				switch {
				case q[j] == '/' && j+1 < len(q) && q[j+1] == '*':
					depth++
					j += 2
				case q[j] == '*' && j+1 < len(q) && q[j+1] == '/':
					depth--
					j += 2
				default:
					j++
				}
			}
			if depth > 0 {
				fn(q[i+2:], false)
				return
			}
			fn(q[i+2:j-2], true)
			i = j
		default:
			i++
		}
	}
}

// parseBody adds the pairs of one comment body to tags (a key already
// there, from an earlier comment, is replaced) and the malformed ones to
// p. A body of prose adds nothing.
func parseBody(body string, tags map[string]string, p *problems) {
	if prose(body) {
		return
	}
	var buf [8]string // this comment's keys; a comment has a few
	seen := buf[:0]
	i := skipSpace(body, 0)
	for i < len(body) {
		next, key, val, err := readPair(body, i)
		i = next
		switch {
		case err != nil:
			p.add(err)
		case slices.Contains(seen, key):
			p.add(fmt.Errorf("%w: key %q given twice in one comment (the first value is kept)", ErrMalformed, clip(key)))
		case len(tags) >= MaxParsedTags && !has(tags, key):
			p.add(fmt.Errorf("%w: more than %d tags", ErrMalformed, MaxParsedTags))
		default:
			seen = append(seen, key)
			tags[key] = val
		}
		if i < len(body) { // at ','
			i = skipSpace(body, i+1)
			if i == len(body) {
				p.add(fmt.Errorf("%w: trailing ','", ErrMalformed))
			}
		}
	}
}

func has(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

// prose reports whether a comment body is text rather than tags: it is
// blank, or its first word (up to the first '=', ':', ',' or space) is
// not followed by '=' or ':'.
func prose(body string) bool {
	i := skipSpace(body, 0)
	if i == len(body) {
		return true
	}
	for i < len(body) && body[i] != '=' && body[i] != ':' && body[i] != ',' && !lex.IsSpace(body[i]) {
		if body[i] == '\\' {
			i++
		}
		i++
	}
	i = skipSpace(body, i)
	return i >= len(body) || (body[i] != '=' && body[i] != ':')
}

// readPair reads one key=value or key:value pair starting at i. It returns the
// index of the ',' that ends it (or len(body)), and on a malformed pair an
// error; the index then is past the pair's end as best it can tell, so
// the pairs after it are still read.
func readPair(body string, i int) (next int, key, val string, err error) {
	start := i
	for i < len(body) && body[i] != '=' && body[i] != ':' && body[i] != ',' {
		if body[i] == '\\' {
			i++ // \' in a key
		}
		i++
	}
	if i > len(body) {
		return len(body), "", "", fmt.Errorf("%w: key ends in a lone '\\'", ErrMalformed)
	}
	if i == len(body) || body[i] == ',' {
		return i, "", "", fmt.Errorf("%w: %q has no '=' or ':'", ErrMalformed, clip(body[start:i]))
	}
	sep := body[i]
	rawKey := unbackslash(strings.TrimRight(body[start:i], " \t\r\n"))
	i = skipSpace(body, i+1)
	end := strings.IndexByte(body[i:], ',')
	if end < 0 {
		end = len(body)
	} else {
		end += i
	}
	if rawKey == "" {
		return end, "", "", fmt.Errorf("%w: empty key at byte %d", ErrMalformed, start)
	}
	switch {
	case sep == ':':
		// Marginalia: verbatim key and value.
		return end, rawKey, strings.TrimRight(body[i:end], " \t\r\n"), nil
	case i < len(body) && body[i] == '\'':
		raw, j, qerr := quoted(body, i+1)
		if qerr != nil {
			return end, "", "", qerr
		}
		if key, err = unescape(rawKey); err != nil {
			return j, "", "", err
		}
		if val, err = unescape(raw); err != nil {
			return j, "", "", err
		}
		j = skipSpace(body, j)
		if j < len(body) && body[j] != ',' {
			k := strings.IndexByte(body[j:], ',')
			if k < 0 {
				k = len(body) - j
			}
			return j + k, "", "", fmt.Errorf("%w: %q after the value of %q", ErrMalformed, clip(body[j:]), clip(key))
		}
		return j, key, val, nil
	default:
		if key, err = unescape(rawKey); err != nil {
			return end, "", "", err
		}
		if val, err = unescape(strings.TrimRight(body[i:end], " \t\r\n")); err != nil {
			return end, "", "", err
		}
		return end, key, val, nil
	}
}

// quoted reads a '…' value whose body starts at i, with \' (or any \x) as
// an escape. A quote closes the value only when what follows it (after
// spaces) is a ',' or the end of the comment; any other quote is part of
// the value, as knex writes them. It returns the body with escapes
// removed and the index past the closing quote.
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
			if j := i + 1; j < len(s) && s[j] != ',' && !lex.IsSpace(s[j]) && strings.IndexByte(s[j:], '\'') >= 0 {
				i++ // an unescaped quote inside the value, with a closing one to come
				continue
			}
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

// unescape undoes percent-encoding byte by byte and reads '+' as a space
// (see Parse for the rule). A doubled '%' before two hex digits is one
// escape (Python sqlcommenter doubles '%' for %-style parameters).
func unescape(s string) (string, error) {
	if strings.IndexByte(s, '%') < 0 && strings.IndexByte(s, '+') < 0 {
		return s, nil
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '%':
			if i+1 < len(s) && s[i+1] == '%' {
				i++ // %%XX: one escape
			}
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
	for i < len(s) && lex.IsSpace(s[i]) {
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
