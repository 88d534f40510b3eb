package comment

import "github.com/qtop-dev/qtop/sqlcomment/internal/lex"

// Shape returns a 64-bit hash of query's shape: its text with comments
// removed, string and number literals replaced by one placeholder,
// whitespace kept only between two words (so "id = 1" is "id=1"), ASCII
// letters lower-cased and a trailing ';' dropped. Statements that differ only in literals, comment (so in their
// sqlcommenter tags) or layout have the same shape; $n parameters are
// kept. Budgets estimate a statement's cost from the measured durations of
// its shape. It does not allocate.
func Shape(query string) uint64 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	space := false    // a space is pending
	prev := byte(' ') // the last byte hashed
	n := len(query)
	for i := 0; i < n; i++ {
		c := query[i]
		cl := shapeClass[c]
		if cl == classPlain {
			// The common case, one table look-up a byte: letters (lower-
			// cased), '_' and punctuation.
			if space && wordByte(prev) && shapeWord[c] {
				h = (h ^ ' ') * prime
			}
			space = false
			c = shapeLower[c]
			h = (h ^ uint64(c)) * prime
			prev = c
			continue
		}
		emit := byte(0)
		switch {
		case cl == classSpace:
			space = true
		case c == '/' && i+1 < n && query[i+1] == '*':
			// A comment, nested as PostgreSQL nests them.
			j, _ := lex.SkipBlockComment(query, i+2)
			i = j - 1
			space = true
		case c == '-' && i+1 < n && query[i+1] == '-':
			for i < n && query[i] != '\n' {
				i++
			}
			space = true
		case c == '\'':
			// A string literal; '' inside is a quote.
			for i++; i < n; i++ {
				if query[i] == '\'' {
					if i+1 < n && query[i+1] == '\'' {
						i++
						continue
					}
					break
				}
			}
			emit = '?'
		case isDigit(c) && !identByte(prev):
			for i+1 < n && (isDigit(query[i+1]) || query[i+1] == '.' ||
				query[i+1] == 'e' || query[i+1] == 'E') {
				i++
			}
			emit = '?'
		case c == ';' && trailing(query[i+1:]):
			i = n
		default:
			emit = shapeLower[c]
		}
		if emit != 0 {
			// Whitespace counts only between two words: "id = 1" is "id=1".
			if space && wordByte(prev) && wordByte(emit) {
				h = (h ^ ' ') * prime
			}
			space = false
			h = (h ^ uint64(emit)) * prime
			prev = emit
		}
	}
	return h
}

// Byte classes of Shape: plain bytes are hashed as they are (lower-cased);
// the others start whitespace, a comment, a literal or a trailing ';', or
// are digits, which may start a number.
const (
	classPlain = iota
	classSpace
	classOther
)

var (
	shapeClass [256]uint8
	shapeLower [256]byte
	shapeWord  [256]bool
)

func init() {
	for c := range 256 {
		b := byte(c)
		shapeLower[c] = b
		if b >= 'A' && b <= 'Z' {
			shapeLower[c] = b + 'a' - 'A'
		}
		shapeWord[c] = wordByte(shapeLower[c])
		switch {
		case b == ' ' || b == '\t' || b == '\n' || b == '\r' || b == '\f':
			shapeClass[c] = classSpace
		case b == '/' || b == '-' || b == '\'' || b == ';' || isDigit(b):
			shapeClass[c] = classOther
		}
	}
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// identByte reports whether c continues an identifier or a parameter
// ($1), so that a digit after it is not a literal.
func identByte(c byte) bool {
	return c == '_' || c == '$' || isDigit(c) || (c >= 'a' && c <= 'z') || c >= 0x80
}

// trailing reports whether s is only whitespace and comments.
func trailing(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ', '\t', '\n', '\r', '\f', ';':
		case '/':
			return i+1 < len(s) && s[i+1] == '*'
		default:
			return false
		}
	}
	return true
}

func wordByte(c byte) bool { return c == '?' || identByte(c) }
