package sqlcomment

import (
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
			t.Fatalf("value %q: %q", clip(v), clip(got))
		}
		body := got[len(q)+3 : len(got)-2]
		if strings.Contains(body, "*/") || strings.Contains(body, "/*") {
			t.Errorf("value %q: body can close or nest the comment: %q", clip(v), clip(body))
		}
		r := scan(got)
		if r.open || r.lastStart != len(q)+1 || r.lastEnd != len(got) {
			t.Errorf("value %q: the comment is not one block at the end: %+v", clip(v), r)
		}
		back, err := Parse(got)
		if err != nil {
			t.Fatalf("value %q: %v", clip(v), err)
		}
		if back["tenant"] != v || back[v] != "k" || len(back) != 2 {
			t.Errorf("value %q: round trip lost it", clip(v))
		}
	}
}
