package sqlcomment

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
	put := func(c byte) { h = (h ^ uint64(c)) * prime }
	space := false // a space is pending
	prev := byte(' ')
	emit := func(c byte) {
		// Whitespace counts only between two words: "id = 1" is "id=1".
		if space && wordByte(prev) && wordByte(c) {
			put(' ')
		}
		space = false
		put(c)
		prev = c
	}
	n := len(query)
	for i := 0; i < n; i++ {
		c := query[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			space = true
		case c == '/' && i+1 < n && query[i+1] == '*':
			// A comment, nested as PostgreSQL nests them.
			depth := 1
			for i += 2; i < n && depth > 0; i++ {
				if query[i] == '/' && i+1 < n && query[i+1] == '*' {
					depth++
					i++
				} else if query[i] == '*' && i+1 < n && query[i+1] == '/' {
					depth--
					i++
				}
			}
			i--
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
			emit('?')
		case c >= '0' && c <= '9' && !identByte(prev):
			for i+1 < n && (isDigit(query[i+1]) || query[i+1] == '.' ||
				query[i+1] == 'e' || query[i+1] == 'E') {
				i++
			}
			emit('?')
		case c == ';' && trailing(query[i+1:]):
			i = n
		default:
			if c >= 'A' && c <= 'Z' {
				c += 'a' - 'A'
			}
			emit(c)
		}
	}
	return h
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
