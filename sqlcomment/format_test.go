package sqlcomment

import (
	"encoding/binary"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestFormat(t *testing.T) {
	cases := []struct {
		name string
		tags map[string]string
		want string
	}{
		{"none", nil, ""},
		{"empty map", map[string]string{}, ""},
		{"sorted", map[string]string{"tenant": "acme", "route": "GET /reports", "application": "api"},
			`/*application='api',route='GET%20%2Freports',tenant='acme'*/`},
		// encodeURIComponent leaves A-Z a-z 0-9 - _ . ! ~ * ' ( ) alone.
		{"unreserved", map[string]string{"k": "aZ09-_.!~*()"}, `/*k='aZ09-_.!~*()'*/`},
		{"space is %20 not +", map[string]string{"k": "a b+c"}, `/*k='a%20b%2Bc'*/`},
		{"quote escaped", map[string]string{"k": "it's"}, `/*k='it\'s'*/`},
		{"key encoded", map[string]string{"a key=": "v"}, `/*a%20key%3D='v'*/`},
		{"comment close", map[string]string{"t": "*/ DROP TABLE t; --"}, `/*t='*%2F%20DROP%20TABLE%20t%3B%20--'*/`},
		{"backslash newline nul", map[string]string{"t": "\\\n\x00"}, `/*t='%5C%0A%00'*/`},
		{"invalid utf-8 byte by byte", map[string]string{"t": "\xff\xfe"}, `/*t='%FF%FE'*/`},
		{"utf-8", map[string]string{"t": "é"}, `/*t='%C3%A9'*/`},
		{"empty value", map[string]string{"t": ""}, `/*t=''*/`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Format(c.tags); got != c.want {
				t.Errorf("Format(%q) = %s, want %s", c.tags, got, c.want)
			}
		})
	}
}

func TestFormatManyTagsSorted(t *testing.T) {
	tags := map[string]string{}
	for i := 0; i < 40; i++ {
		tags[string(rune('a'+i%26))+strings.Repeat("z", i/26)] = "v"
	}
	got := Format(tags)
	if a := Append("SELECT 1;", tags); a != "SELECT 1 "+got+";" {
		t.Fatalf("Append with %d tags: %q", len(tags), a)
	}
	back, err := Parse("SELECT 1 " + got)
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != len(tags) {
		t.Fatalf("got %d tags back, want %d", len(back), len(tags))
	}
	keys := strings.Split(strings.Trim(got, "/*"), ",")
	for i := 1; i < len(keys); i++ {
		if keys[i-1] > keys[i] {
			t.Fatalf("keys out of order: %s before %s", keys[i-1], keys[i])
		}
	}
}

func TestAppend(t *testing.T) {
	tags := map[string]string{"tenant": "acme", "route": "GET /reports"}
	const c = ` /*route='GET%20%2Freports',tenant='acme'*/`
	cases := []struct {
		name, q, want string
	}{
		{"plain", "SELECT 1", "SELECT 1" + c},
		{"before semicolon", "SELECT 1;", "SELECT 1" + c + ";"},
		{"before trailing space", "SELECT 1 ;\n  ", "SELECT 1" + c + " ;\n  "},
		{"ends with operator", "SELECT 2-", "SELECT 2-" + c},
		{"ends with slash", "SELECT 2/", "SELECT 2/" + c},
		{"empty", "", ""},
		{"blank", " ;\n", " ;\n"},
		{"has block comment", "SELECT 1 /* hint */", "SELECT 1 /* hint */"},
		{"has leading comment", "/*x*/ SELECT 1", "/*x*/ SELECT 1"},
		{"has line comment", "SELECT 1 -- note\n", "SELECT 1 -- note\n"},
		{"comment chars in literal", "SELECT '/* -- */'", "SELECT '/* -- */'" + c},
		{"doubled quote", "SELECT 'it''s /*'", "SELECT 'it''s /*'" + c},
		{"comment chars in identifier", `SELECT 1 AS "a--b"`, `SELECT 1 AS "a--b"` + c},
		{"E string escape", `SELECT E'a\'--'`, `SELECT E'a\'--'` + c},
		{"plain string backslash", `SELECT 'a\' -- x`, `SELECT 'a\' -- x`},
		{"dollar quote", "SELECT $$ /* $$", "SELECT $$ /* $$" + c},
		{"tagged dollar quote", "SELECT $fn$ -- $$ $fn$", "SELECT $fn$ -- $$ $fn$" + c},
		{"parameter is not a dollar quote", "SELECT $1 -- p", "SELECT $1 -- p"},
		{"dollar in identifier", "SELECT a$b FROM t", "SELECT a$b FROM t" + c},
		{"open literal", "SELECT 'abc", "SELECT 'abc"},
		{"open identifier", `SELECT "abc`, `SELECT "abc`},
		{"open dollar quote", "SELECT $$abc", "SELECT $$abc"},
		{"division then star", "SELECT 4/ *x", "SELECT 4/ *x" + c},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Append(tc.q, tags); got != tc.want {
				t.Errorf("Append(%q)\n got %q\nwant %q", tc.q, got, tc.want)
			}
		})
	}
	if got := Append("SELECT 1", nil); got != "SELECT 1" {
		t.Errorf("no tags: %q", got)
	}
}

// TestHostileValues: no value can close the comment or change the
// statement, and every value comes back unchanged.
func TestHostileValues(t *testing.T) {
	hostile := []string{
		"*/ DROP TABLE t; --", "'", `\`, "\n", "\x00", "\xff\xfe\xfd", "/*", "*/", "--",
		"'; DROP TABLE t; --", `\'*/`, "$$", strings.Repeat("x", 10<<10), strings.Repeat("*/", 500),
	}
	const q = "SELECT * FROM t WHERE id = $1"
	for _, v := range hostile {
		tags := map[string]string{"tenant": v, v: "k"}
		if v == "" {
			continue
		}
		got := Append(q, tags)
		if !strings.HasPrefix(got, q+" /*") || !strings.HasSuffix(got, "*/") {
			t.Fatalf("value %.40q: %.40q", v, got)
		}
		body := got[len(q)+3 : len(got)-2]
		if strings.Contains(body, "*/") || strings.Contains(body, "/*") {
			t.Errorf("value %.40q: body can close or nest the comment: %.40q", v, body)
		}
		r := scan(got)
		if r.open || r.lastStart != len(q)+1 || r.lastEnd != len(got) {
			t.Errorf("value %.40q: the comment is not one block at the end: %+v", v, r)
		}
		back, err := Parse(got)
		if err != nil {
			t.Fatalf("value %.40q: %v", v, err)
		}
		if back["tenant"] != v || back[v] != "k" || len(back) != 2 {
			t.Errorf("value %.40q: round trip lost it", v)
		}
	}
}

// TestPlain8 checks the word test against the plain table: for every byte
// at every position of an otherwise plain word, plain8 accepts exactly the
// letters, digits, '-', '.' and '_', and never a byte that must be encoded.
func TestPlain8(t *testing.T) {
	for _, fill := range []byte{'a', 'Z', '0', '9', '-', '.', '_'} {
		for c := 0; c < 256; c++ {
			for pos := 0; pos < 8; pos++ {
				w := []byte(strings.Repeat(string(fill), 8))
				w[pos] = byte(c)
				x := binary.LittleEndian.Uint64(w)
				want := ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') ||
					c == '-' || c == '.' || c == '_'
				if got := plain8(x); got != want {
					t.Fatalf("plain8(%q) = %v, want %v", w, got, want)
				}
				if plain8(x) && !plain[c] {
					t.Fatalf("plain8 passes %q, which must be encoded", w)
				}
			}
		}
	}
}

// encodeRef is encodeInto written plainly, the reference for its fast
// paths.
func encodeRef(s string) string {
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case plain[c]:
			sb.WriteByte(c)
		case c == '\'':
			sb.WriteString(`\'`)
		default:
			sb.WriteByte('%')
			sb.WriteByte(hexDigits[c>>4])
			sb.WriteByte(hexDigits[c&15])
		}
	}
	return sb.String()
}

// TestEncodeIntoFastPaths puts every kind of byte at every position of
// strings of every length around the word boundaries (the 4-byte short
// path, whole words, the overlapping tail, words that fail), in a buffer
// as tight as the comment's: the string's worst case and the three bytes
// that follow it.
func TestEncodeIntoFastPaths(t *testing.T) {
	for n := 0; n <= 27; n++ {
		for pos := -1; pos < n; pos++ {
			for _, c := range []byte{'/', ' ', '\'', '~', '!', 0x00, 0x7f, 0x80, 0xff, 'z'} {
				b := []byte(strings.Repeat("aB3-x_.", 4)[:n])
				if pos >= 0 {
					b[pos] = c
				}
				s := string(b)
				buf := make([]byte, 3*len(s)+3)
				end := encodeInto(buf, 0, s)
				if got, want := string(buf[:end]), encodeRef(s); got != want {
					t.Fatalf("encodeInto(%q) = %q, want %q", s, got, want)
				}
				if got, want := encodedLen(s), end; got != want {
					t.Fatalf("encodedLen(%q) = %d, encodeInto wrote %d", s, got, want)
				}
			}
		}
	}
}

// TestScanWordSkip puts each construct the lexer looks for at every offset
// from a word boundary, so the eight-byte skip lands on it from every side.
func TestScanWordSkip(t *testing.T) {
	cases := []struct {
		tail          string
		comment, open bool
	}{
		{"-- c", true, false},
		{"/* c */", true, false},
		{"'x", false, true},
		{`"x`, false, true},
		{"$q$ x", false, true},
		{"'--' /**/", true, false},
		{"$1 - 2 / 3", false, false},
		{"'a''b' \"c\"", false, false},
	}
	for pad := 0; pad < 20; pad++ {
		for _, c := range cases {
			q := "SELECT " + strings.Repeat("x", pad) + " " + c.tail
			r := scan(q)
			if r.comment != c.comment || r.open != c.open {
				t.Errorf("scan(%q): comment %v open %v, want %v %v", q, r.comment, r.open, c.comment, c.open)
			}
		}
	}
}

// TestFormatKnownKeys: maps whose keys are all this package's keys take a
// path of their own (placed by rank, no sort); it writes what the general
// path (sort, then render) writes, for values of every kind and length,
// including values too long for its stack buffer.
func TestFormatKnownKeys(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	alphabet := []string{"a", "Z", "9", "-", "_", ".", "~", " ", "/", "'", "\\", "*", "é", "\x00", "\xff", "%", "="}
	for range 20000 {
		tags := map[string]string{}
		for _, k := range knownKeys {
			if rng.IntN(2) == 0 {
				continue
			}
			var sb strings.Builder
			n := rng.IntN(40)
			if rng.IntN(50) == 0 {
				n = 300 // past the stack buffer with the others
			}
			for range n {
				sb.WriteString(alphabet[rng.IntN(len(alphabet))])
			}
			tags[k] = sb.String()
		}
		if len(tags) == 0 {
			continue
		}
		want := formatSorted(tags)
		if got := Format(tags); got != want {
			t.Fatalf("Format(%q) = %q, want %q", tags, got, want)
		}
		if got, want := Append("SELECT 1", tags), "SELECT 1 "+want; got != want {
			t.Fatalf("Append: %q, want %q", got, want)
		}
	}
}
