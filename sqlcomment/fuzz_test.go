package sqlcomment

import (
	"context"
	"maps"
	"strings"
	"testing"

	"github.com/qtop-dev/qtop/tenant"
)

// FuzzAppendParse: for any statement and tags, Append changes nothing
// outside the comment it inserts, the comment is one closed block at the
// insertion point, and Parse returns the tags.
func FuzzAppendParse(f *testing.F) {
	f.Add("SELECT * FROM t WHERE a = $1;", "tenant", "acme", "route", "GET /x")
	f.Add("SELECT 'x", "k", "*/ DROP TABLE t; --", "q", "'")
	f.Add("SELECT E'\\'' ;  ", "\x00", "\xff", "\\", "\n")
	f.Add("SELECT $a$ x $a$", "tier", "T1", "", "")
	f.Add("", "a", "b", "c", "d")
	f.Add("SELECT 1", "tenant", "*/ DROP TABLE t; --", "traceparent", "\xff'\\\x00")
	f.Add("SELECT 1", "application", strings.Repeat("é/", 200), "tracestate", "a=b,c=d")
	f.Fuzz(func(t *testing.T, q, k1, v1, k2, v2 string) {
		tags := map[string]string{}
		if k1 != "" {
			tags[k1] = v1
		}
		if k2 != "" {
			tags[k2] = v2
		}
		got := Append(q, tags)
		at, ok := insertAt(q)
		if !ok || len(tags) == 0 {
			if got != q {
				t.Fatalf("Append changed %q to %q", q, got)
			}
			return
		}
		c := Format(tags)
		if got[:at] != q[:at] || got[at:at+1+len(c)] != " "+c || got[at+1+len(c):] != q[at:] {
			t.Fatalf("Append(%q) = %q: the statement changed outside the comment", q, got)
		}
		body := c[2 : len(c)-2]
		if strings.Contains(body, "*/") || strings.Contains(body, "/*") {
			t.Fatalf("comment body %q can close or nest", body)
		}
		back, err := Parse(got)
		if err != nil {
			t.Fatalf("Parse(Append(%q, %q)) = %v", q, tags, err)
		}
		if !maps.Equal(back, tags) {
			t.Fatalf("Parse(Append(%q, %q)) = %q", q, tags, back)
		}
	})
}

// FuzzParse: Parse never panics, and what it returns without error
// formats and parses back to itself.
func FuzzParse(f *testing.F) {
	f.Add("SELECT 1 /*a='1',b=2*/")
	f.Add("/*x:y, z:w*/ SELECT")
	f.Add("SELECT 1 /*a='%'*/")
	f.Add("SELECT '/*' /* /* */ */")
	f.Fuzz(func(t *testing.T, q string) {
		tags, err := Parse(q)
		if err != nil {
			return
		}
		back, err := Parse("SELECT 1" + " " + Format(tags))
		if err != nil {
			t.Fatalf("reparse of %q: %v", tags, err)
		}
		if !maps.Equal(back, tags) {
			t.Fatalf("reparse of %q = %q", tags, back)
		}
	})
}

// FuzzCommenter: the Commenter's fast path (static tags encoded once,
// context tags on the stack) and its general path (WithTag, the cap) write
// what Append writes for the same tags, when nothing is dropped.
func FuzzCommenter(f *testing.F) {
	f.Add("SELECT 1;", "acme", "GET /x", "api", "", 1024)
	f.Add("SELECT '", "*/", "'", "\\", "region", 64)
	f.Add("UPDATE t SET a = 1", "\xff", "\x00", "", "k", 200)
	f.Fuzz(func(t *testing.T, q, ten, route, app, custom string, maxLen int) {
		opts := []Option{WithApplication(app), WithMaxLen(maxLen)}
		if custom != "" {
			opts = append(opts, WithTag(custom, "v"))
		}
		c := NewCommenter(opts...)
		ctx := tenant.With(context.Background(), tenant.Tags{Tenant: ten, Route: route, Tier: tenant.T3})
		st := c.Comment(ctx, q, false)
		for range 2 { // admitted to the caches, then read from them
			if again := c.Comment(ctx, q, false); again != st {
				t.Fatalf("Comment again = %+v, first %+v", again, st)
			}
		}
		if c.Dropped() > 0 {
			if _, ok := insertAt(q); ok && len(st.Query) > len(q)+1+c.cfg.maxLen {
				t.Fatalf("comment over the cap: %d bytes", len(st.Query)-len(q)-1)
			}
			return
		}
		want := map[string]string{"tier": "T3"}
		if ten != "" {
			want["tenant"] = ten
		}
		if route != "" {
			want["route"] = route
		}
		if app != "" {
			want["application"] = app
		}
		if custom != "" && !builtinKey(custom) {
			want[custom] = "v"
		}
		if got := Append(q, want); st.Query != got {
			t.Fatalf("Comment = %q, Append = %q", st.Query, got)
		}
	})
}
