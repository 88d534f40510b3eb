package comment

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	cases := []struct {
		name, q string
		want    map[string]string
	}{
		{"ours", `SELECT 1 /*route='GET%20%2Freports',tenant='acme'*/;`,
			map[string]string{"route": "GET /reports", "tenant": "acme"}},
		{"no comment", "SELECT 1", map[string]string{}},
		{"empty comment", "SELECT 1 /**/", map[string]string{}},
		{"blank comment", "SELECT 1 /*  */", map[string]string{}},
		{"escaped quote", `SELECT 1 /*t='it\'s'*/`, map[string]string{"t": "it's"}},
		{"unquoted", `SELECT 1 /*tenant=acme,route=GET%20%2F*/`, map[string]string{"tenant": "acme", "route": "GET /"}},
		{"space after commas", `SELECT 1 /* a='1', b='2' */`, map[string]string{"a": "1", "b": "2"}},
		{"space around =", `SELECT 1 /*a = '1' , b= '2'*/`, map[string]string{"a": "1", "b": "2"}},
		{"at the start", `/*tenant='acme'*/ SELECT 1`, map[string]string{"tenant": "acme"}},
		{"plus is a space", `SELECT 1 /*db_driver='database%2Fsql%3Apgx',route='a+b'*/`,
			map[string]string{"db_driver": "database/sql:pgx", "route": "a b"}},
		{"marginalia", `SELECT 1 /*application:Shop,controller:orders,action:index*/`,
			map[string]string{"application": "Shop", "controller": "orders", "action": "index"}},
		{"last comment wins", `/*tenant='a'*/ SELECT 1 /*tenant='b'*/`, map[string]string{"tenant": "b"}},
		{"comment in literal ignored", `SELECT '/*tenant=''x''*/' /*tenant='y'*/`, map[string]string{"tenant": "y"}},
		{"value with comma quoted", `SELECT 1 /*a='x,y'*/`, map[string]string{"a": "x,y"}},
		{"lowercase hex", `SELECT 1 /*a='%c3%a9'*/`, map[string]string{"a": "é"}},
		{"comment then literal left open", `SELECT 1 /*a='1'*/ 'x`, map[string]string{"a": "1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Parse(c.q)
			if err != nil {
				t.Fatalf("Parse(%q): %v", c.q, err)
			}
			if !maps.Equal(got, c.want) {
				t.Errorf("Parse(%q) = %q, want %q", c.q, got, c.want)
			}
		})
	}
}

func TestParseMalformed(t *testing.T) {
	for _, c := range []struct {
		q    string
		kept map[string]string // the well-formed pairs still returned
	}{
		{"SELECT 1 /*tenant='acme'", map[string]string{}},              // not closed (pg_stat_activity truncates long texts)
		{"SELECT 1 /*a='1',tenant='acme", map[string]string{"a": "1"}}, // cut: the pairs before the last ',' are whole
		{"SELECT 1 /*tenant=acmecorp,a=1", map[string]string{"tenant": "acmecorp"}},
		{"SELECT 1 /*tenant='acme*/", map[string]string{}},          // quote not closed
		{"SELECT 1 /*a='1',b*/", map[string]string{"a": "1"}},       // no = in the second pair
		{"SELECT 1 /*='1'*/", map[string]string{}},                  // empty key
		{"SELECT 1 /*a='%G1',b='2'*/", map[string]string{"b": "2"}}, // bad escape
		{"SELECT 1 /*a='%4'*/", map[string]string{}},                // truncated escape
		{"SELECT 1 /*a%='1'*/", map[string]string{}},                // bad escape in key
		{"SELECT 1 /*a='1' b='2'*/", map[string]string{}},           // missing comma
		{"SELECT 1 /*a='1',a='2'*/", map[string]string{"a": "1"}},   // duplicate: the first is kept
		{"SELECT 1 /*a='1',*/", map[string]string{"a": "1"}},        // trailing comma
		{`SELECT 1 /*a='\*/`, map[string]string{}},                  // lone backslash
		{"SELECT 1 /*a=%zz*/", map[string]string{}},                 // bad escape unquoted
		{"/*tenant='a',x*/ SELECT 1 /*route='r'*/", map[string]string{"tenant": "a", "route": "r"}},
	} {
		got, err := Parse(c.q)
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("Parse(%q) = %q, %v; want ErrMalformed", c.q, got, err)
		}
		if !maps.Equal(got, c.kept) {
			t.Errorf("Parse(%q) kept %q, want %q", c.q, got, c.kept)
		}
	}
}

// TestParseProse: comments of text, not tags, are skipped without error,
// and do not hide the tags of another comment.
func TestParseProse(t *testing.T) {
	for _, q := range []string{
		"SELECT 1 /* hint */",
		"SELECT 1 /*tenant*/",
		"SELECT 1 /* /* nested */ */",
		"/* select u from User u where u.name = :name */ select 1",
		"SELECT 1 /* nightly batch, step 2 */",
		"/*+ SeqScan(t) */ SELECT 1", // pg_hint_plan
	} {
		got, err := Parse(q)
		if err != nil || len(got) != 0 {
			t.Errorf("Parse(%q) = %q, %v; want no tags, no error", q, got, err)
		}
		tagged := "/*tenant='acme'*/ " + q
		if got, err := Parse(tagged); err != nil || got["tenant"] != "acme" {
			t.Errorf("Parse(%q) = %q, %v; want the tenant of the first comment", tagged, got, err)
		}
	}
}

// TestParseCount: the error counts the malformed pairs.
func TestParseCount(t *testing.T) {
	_, err := Parse("SELECT 1 /*a='%G1',b,c='3'*/ /*d='%'*/")
	if err == nil || !strings.Contains(err.Error(), "(and 2 more)") {
		t.Fatalf("err = %v", err)
	}
}

// TestParseManyTags: at most MaxParsedTags tags come back.
func TestParseManyTags(t *testing.T) {
	var b strings.Builder
	b.WriteString("SELECT 1 /*")
	for i := range MaxParsedTags + 5 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "k%03d='v'", i)
	}
	b.WriteString("*/")
	got, err := Parse(b.String())
	if !errors.Is(err, ErrMalformed) || len(got) != MaxParsedTags {
		t.Fatalf("%d tags, %v", len(got), err)
	}
}

// TestParseCorpus reads the comments other tools write (the shared corpus
// in the repository's testdata folder).
func TestParseCorpus(t *testing.T) {
	b, err := os.ReadFile("../../testdata/sqlcomments/corpus.json")
	if err != nil {
		t.Fatal(err)
	}
	var corpus []struct {
		Tool, Query string
		Tags        map[string]string
		Malformed   bool
	}
	if err := json.Unmarshal(b, &corpus); err != nil {
		t.Fatal(err)
	}
	if len(corpus) < 10 {
		t.Fatalf("corpus has %d cases", len(corpus))
	}
	for _, c := range corpus {
		got, err := Parse(c.Query)
		if c.Malformed != errors.Is(err, ErrMalformed) {
			t.Errorf("%s: Parse(%q) error %v, want malformed %v", c.Tool, c.Query, err, c.Malformed)
		}
		if !maps.Equal(got, c.Tags) {
			t.Errorf("%s: Parse(%q) = %q\nwant %q", c.Tool, c.Query, got, c.Tags)
		}
	}
}

// A statement with the tags of two tools and a comment of prose: every
// comment is read, the later one wins a key given twice.
func ExampleParse() {
	tags, err := Parse("/*dde='prod',tenant='a'*/ SELECT 1 /* nightly batch */ /*route='GET%20%2Fx',tenant='acme'*/")
	fmt.Println(tags["dde"], tags["tenant"], tags["route"], err)
	// Output:
	// prod acme GET /x <nil>
}
