// Package lex holds the pieces of PostgreSQL's lexer that both sides of
// the sqlcommenter format need — white space, identifier bytes, quoted
// literals, dollar quotes and nested block comments — so that the writer
// (sqlcomment's Append) and the reader (comment.Parse, comment.Shape)
// skip the same literals and comments.
package lex

// IsSpace reports whether c is white space to PostgreSQL.
func IsSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// IsIdent reports whether c may be part of an identifier (or of a
// dollar-quote tag).
func IsIdent(c byte) bool {
	return c == '_' || c == '$' || c >= 0x80 ||
		('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')
}

// SkipBlockComment returns the end of the block comment whose body starts
// at q[j] (comments nest, as in PostgreSQL), or false when it never ends.
func SkipBlockComment(q string, j int) (int, bool) {
	depth := 1
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
	return j, depth == 0
}

// SkipQuoted returns the index just past the closing quote q of a literal
// whose body starts at i. A doubled quote is part of the body; with escapes
// a backslash escapes the next byte.
func SkipQuoted(s string, i int, q byte, escapes bool) (int, bool) {
	for i < len(s) {
		c := s[i]
		switch {
		case escapes && c == '\\':
			i += 2
		case c == q:
			if i+1 < len(s) && s[i+1] == q {
				i += 2
				continue
			}
			return i + 1, true
		default:
			i++
		}
	}
	return 0, false
}

// DollarTag returns the end of a dollar-quote opening tag ($$ or $name$)
// at i, or false when the '$' at i is not one (a $1 parameter, say).
func DollarTag(s string, i int) (int, bool) {
	j := i + 1
	if j < len(s) && s[j] >= '0' && s[j] <= '9' {
		return 0, false
	}
	for j < len(s) && s[j] != '$' {
		if !IsIdent(s[j]) {
			return 0, false
		}
		j++
	}
	if j >= len(s) {
		return 0, false
	}
	return j + 1, true
}
