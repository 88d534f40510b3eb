package pgactivity

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestFingerprint(t *testing.T) {
	for _, tt := range []struct{ q, want string }{
		{"UPDATE pgbench_accounts SET abalance = abalance + -2714 WHERE aid = 48213;", "UPDATE pgbench_accounts SET abalance = abalance + ? WHERE aid = ?"},
		{"UPDATE pgbench_accounts SET abalance = abalance + 12 WHERE aid = 7", "UPDATE pgbench_accounts SET abalance = abalance + ? WHERE aid = ?"},
		{"SELECT * FROM t WHERE id = $1 /*tenant='acme'*/", "SELECT * FROM t WHERE id = ?"},
		{"select x from t where name = 'o''reilly' and id in (1, 2, 3)", "select x from t where name = ? and id in (?)"},
		{"SELECT  a1,\n\tb2 FROM t2 -- trailing\n", "SELECT a1, b2 FROM t2"},
		{"/*x*/SELECT 1", "SELECT ?"},
		{"SELECT 3.5e2 - 1", "SELECT ? - ?"},
		{"", ""},
	} {
		if got := Fingerprint(tt.q); got != tt.want {
			t.Errorf("Fingerprint(%q) = %q, want %q", tt.q, got, tt.want)
		}
	}
	long := "SELECT " + strings.Repeat("column_name_x, ", 10000) + "1 FROM t"
	if got := Fingerprint(long); len(got) > MaxFingerprint || !strings.HasPrefix(got, "SELECT column_name_x,") {
		t.Errorf("long: %d bytes %q", len(got), got)
	}
}

func FuzzFingerprint(f *testing.F) {
	f.Add("UPDATE t SET a = a + -1 WHERE id = $1")
	f.Add("SELECT 'x")
	f.Add("/* unclosed")
	f.Fuzz(func(t *testing.T, q string) {
		got := Fingerprint(q)
		if len(got) > MaxFingerprint {
			t.Fatalf("%d bytes", len(got))
		}
		if utf8.ValidString(q) && len(q) < MaxFingerprint && !utf8.ValidString(got) {
			t.Fatalf("invalid UTF-8 from valid %q: %q", q, got)
		}
	})
}

func BenchmarkFingerprint(b *testing.B) {
	q := "UPDATE pgbench_accounts SET abalance = abalance + -2714 WHERE aid = 48213 /*tenant='acme',route='POST%20%2Fx'*/"
	b.ReportAllocs()
	for b.Loop() {
		Fingerprint(q)
	}
}

// Two pgbench statements, untagged, have one fingerprint: their load can
// be grouped by what they run.
func ExampleFingerprint() {
	fmt.Println(Fingerprint("UPDATE pgbench_accounts SET abalance = abalance + -2714 WHERE aid = 48213;"))
	fmt.Println(Fingerprint("UPDATE pgbench_accounts SET abalance = abalance + 12 WHERE aid = 7 /*x='y'*/"))
	// Output:
	// UPDATE pgbench_accounts SET abalance = abalance + ? WHERE aid = ?
	// UPDATE pgbench_accounts SET abalance = abalance + ? WHERE aid = ?
}
