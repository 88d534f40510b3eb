package sqlcomment

import (
	"errors"
	"maps"
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
	for _, q := range []string{
		"SELECT 1 /*tenant='acme'",    // not closed (pg_stat_activity truncates long texts)
		"SELECT 1 /*tenant='acme*/",   // quote not closed
		"SELECT 1 /*tenant*/",         // no =
		"SELECT 1 /*a='1',b*/",        // no = in the second pair
		"SELECT 1 /*='1'*/",           // empty key
		"SELECT 1 /*a='%G1'*/",        // bad escape
		"SELECT 1 /*a='%4'*/",         // truncated escape
		"SELECT 1 /*a%='1'*/",         // bad escape in key
		"SELECT 1 /*a='1' b='2'*/",    // missing comma
		"SELECT 1 /*a='1',a='2'*/",    // duplicate
		"SELECT 1 /*a='1',*/",         // trailing comma
		`SELECT 1 /*a='\*/`,           // lone backslash then unclosed
		"SELECT 1 /* hint */",         // a plain comment
		"SELECT 1 /*a=%zz*/",          // bad escape unquoted
		"SELECT 1 /* /* nested */ */", // nested, not tags
	} {
		got, err := Parse(q)
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("Parse(%q) = %q, %v; want ErrMalformed", q, got, err)
		}
		if got != nil {
			t.Errorf("Parse(%q) returned tags with an error", q)
		}
	}
}
