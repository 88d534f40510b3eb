package pgactivity

import "strings"

// MaxFingerprint bounds the length of a Fingerprint, in bytes.
const MaxFingerprint = 160

// Fingerprint returns the shape of a statement, so that the load of
// untagged statements can be grouped by what they run: comments dropped,
// string and numeric literals and $n parameters replaced by ?, a list of
// them folded to one ?, white space collapsed, at most MaxFingerprint
// bytes. "UPDATE t SET a = a + 42 WHERE id = $1 /*x*/" and
// "UPDATE t SET a = a + -7 WHERE id = 9" have the same fingerprint
// ("UPDATE t SET a = a + ? WHERE id = ?"). It is a cheap lexical
// normalisation, not PostgreSQL's query_id: it reads at most
// 4×MaxFingerprint bytes of the text.
func Fingerprint(q string) string {
	if len(q) > 4*MaxFingerprint {
		q = q[:4*MaxFingerprint]
	}
	var b strings.Builder
	b.Grow(min(len(q), MaxFingerprint))
	space := false
	emit := func(s string) {
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteString(s)
	}
	for i := 0; i < len(q) && b.Len() < MaxFingerprint; {
		c := q[i]
		switch {
		case isSpaceByte(c):
			space = true
			i++
		case c == '\'':
			space = param(&b, space)
			i = quoteEnd(q, i)
		case c == '/' && i+1 < len(q) && q[i+1] == '*':
			k := strings.Index(q[i+2:], "*/")
			if k < 0 {
				i = len(q)
				break
			}
			i += k + 4
			space = true
		case c == '-' && i+1 < len(q) && q[i+1] == '-':
			k := strings.IndexByte(q[i:], '\n')
			if k < 0 {
				i = len(q)
				break
			}
			i += k + 1
			space = true
		case c == '$' && i+1 < len(q) && isDigit(q[i+1]):
			j := i + 1
			for j < len(q) && isDigit(q[j]) {
				j++
			}
			space = param(&b, space)
			i = j
		case isDigit(c) && (i == 0 || !isWordByte(q[i-1])):
			j := i
			for j < len(q) && (isDigit(q[j]) || q[j] == '.' || q[j] == 'e' || q[j] == 'E') {
				j++
			}
			space = param(&b, space)
			i = j
		case c == ';':
			i++
		default:
			j := i + 1
			if isWordByte(c) {
				for j < len(q) && isWordByte(q[j]) {
					j++
				}
			}
			emit(q[i:j])
			i = j
		}
	}
	s := b.String()
	if len(s) > MaxFingerprint {
		s = s[:MaxFingerprint]
	}
	return s
}

// quoteEnd returns where the string literal that starts at q[i] (a quote)
// ends: after its closing quote (” inside is a quote), or past len(q).
func quoteEnd(q string, i int) int {
	j := i + 1
	for j < len(q) {
		if q[j] == '\'' {
			if j+1 < len(q) && q[j+1] == '\'' {
				j += 2
				continue
			}
			break
		}
		j++
	}
	return j + 1
}

// param writes the ? of a literal or parameter to b, where space says
// whether white space came before it, and returns whether white space is
// still pending: a list of them folds to one ?, and a unary minus before it
// belongs to the literal.
func param(b *strings.Builder, space bool) bool {
	t := strings.TrimRight(b.String(), " ")
	switch {
	case strings.HasSuffix(t, "?"): // "? ?" cannot be; keep one
		return space
	case strings.HasSuffix(t, "?,"): // a list: "?, ?, ?" folds to "?"
		b.Reset()
		b.WriteString(t[:len(t)-1])
		return false
	case strings.HasSuffix(t, "-"):
		// A unary minus (after an operator, '(' or ',') belongs to
		// the literal.
		u := strings.TrimRight(t[:len(t)-1], " ")
		if u == "" || strings.IndexByte("=<>(,+-*/", u[len(u)-1]) >= 0 {
			b.Reset()
			b.WriteString(t[:len(t)-1])
			space = strings.HasSuffix(t[:len(t)-1], " ")
			if space {
				b.Reset()
				b.WriteString(strings.TrimRight(t[:len(t)-1], " "))
			}
		}
	}
	if space && b.Len() > 0 {
		b.WriteByte(' ')
	}
	b.WriteString("?")
	return false
}

func isSpaceByte(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' }
func isDigit(c byte) bool     { return '0' <= c && c <= '9' }
func isWordByte(c byte) bool {
	return c == '_' || c == '.' || c >= 0x80 || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || isDigit(c)
}
