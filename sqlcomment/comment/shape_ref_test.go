package comment

import "testing"

// shapeReference is the first, straightforward Shape, kept to check the
// table-driven one against (FuzzShapeReference).
func shapeReference(query string) uint64 {
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

func FuzzShapeReference(f *testing.F) {
	for _, q := range []string{"SELECT * FROM reports WHERE id = 42", "select 'a''b' -- c\n", "/* /* */ */ x", "SELECT $1::int8 + 1;", "1e5.5", "'", "a1 = 2;  ;", "É 1"} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, q string) {
		if Shape(q) != shapeReference(q) {
			t.Fatalf("Shape(%q) differs from the reference", q)
		}
	})
}
