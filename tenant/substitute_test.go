package tenant

import (
	"strings"
	"testing"
)

// TestSubstitute: a valid name is kept as it is; any other gets a stand-in
// that is a valid name, its own (two names never share one, even when
// their first 128 bytes are the same) and the same in every run.
func TestSubstitute(t *testing.T) {
	long := strings.Repeat("a", 200)
	for _, c := range []struct {
		in, want string
		sub      bool
	}{
		{"", "", false},
		{"acme", "acme", false},
		{"zürich-ä", "zürich-ä", false},
		{"*/ DROP TABLE t; --", "*/ DROP TABLE t; --", false},
		{strings.Repeat("x", MaxTenantLen), strings.Repeat("x", MaxTenantLen), false},
		{"a\uFFFDb", "a\uFFFDb", false},
		// The stand-ins the package doc shows: fixed, as bills depend on them.
		{long, strings.Repeat("a", 48) + "…#c2a908d98f5df987", true},
		{"line\nbreak", `line\x0abreak#697affca60d5d0dc`, true},
		{Untagged, "(untagged)#bca5491ed84464fe", true},
		{"\xff", `\xff#a8100ae6aa1940d0`, true},
	} {
		got, sub := Substitute(c.in)
		if got != c.want || sub != c.sub {
			t.Errorf("Substitute(%.20q) = %q, %v; want %q, %v", c.in, got, sub, c.want, c.sub)
		}
		if got != "" {
			if err := ValidateTenant(got); err != nil {
				t.Errorf("stand-in of %.20q: %v", c.in, err)
			}
		}
	}
	// Two long names that share their first MaxTenantLen bytes, and a
	// long name and its first MaxTenantLen bytes, stay apart.
	a, _ := Substitute(long + "1")
	b, _ := Substitute(long + "2")
	c, _ := Substitute(long[:MaxTenantLen])
	if a == b || a == c || b == c {
		t.Errorf("merged: %q %q %q", a, b, c)
	}
	// A name standInPrefix bytes long once escaped is whole: no "…"; one
	// byte more is cut.
	if got, _ := Substitute(strings.Repeat("b", standInPrefix-4) + "\n"); strings.Contains(got, "…") {
		t.Errorf("whole name marked as cut: %q", got)
	}
	if got, _ := Substitute(strings.Repeat("b", standInPrefix-3) + "\n"); !strings.Contains(got, "…") {
		t.Errorf("cut name not marked: %q", got)
	}
}

func FuzzSubstitute(f *testing.F) {
	f.Add("acme")
	f.Add(strings.Repeat("é", 100))
	f.Add("(other)")
	f.Add("\x00\xff")
	f.Fuzz(func(t *testing.T, s string) {
		got, sub := Substitute(s)
		switch {
		case s == "":
			if got != "" || sub {
				t.Fatalf("empty: %q, %v", got, sub)
			}
		case ValidateTenant(s) == nil:
			if got != s || sub {
				t.Fatalf("valid %q changed to %q", s, got)
			}
		default:
			if !sub || ValidateTenant(got) != nil || got == s {
				t.Fatalf("Substitute(%q) = %q, %v: %v", s, got, sub, ValidateTenant(got))
			}
			if again, _ := Substitute(s); again != got {
				t.Fatalf("unstable: %q then %q", got, again)
			}
		}
	})
}

func BenchmarkSubstituteValid(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		Substitute("tenant-000123")
	}
}

func BenchmarkSubstituteLong(b *testing.B) {
	s := strings.Repeat("t", 200)
	b.ReportAllocs()
	for b.Loop() {
		Substitute(s)
	}
}

// TestSubstituteRoute: a valid route is kept, one named like the overflow
// route escaped (EscapeValue); any other non-empty route gets a stand-in
// of its own that is a valid route, formed as a bad tenant's, never the
// overflow route.
func TestSubstituteRoute(t *testing.T) {
	long := strings.Repeat("r", MaxRouteLen+44)
	for _, c := range []struct {
		in, want string
		sub      bool
	}{
		{"", "", false},
		{"GET /orders/{id}", "GET /orders/{id}", false},
		{"(untagged)", "(untagged)", false}, // no reserved routes
		{strings.Repeat("r", MaxRouteLen), strings.Repeat("r", MaxRouteLen), false},
		{Other, EscapeValue(Other), false},
		// The stand-ins the doc shows: fixed, as bills depend on them.
		{long, strings.Repeat("r", 48) + "…#4b7ae0000877ab8f", true},
		{"/r\x00oute", `/r\x00oute#717a48232c1b835d`, true},
	} {
		got, sub := SubstituteRoute(c.in)
		if got != c.want || sub != c.sub {
			t.Errorf("SubstituteRoute(%.20q) = %q, %v; want %q, %v", c.in, got, sub, c.want, c.sub)
		}
		if got != "" && (ValidateRoute(got) != nil || got == Other) {
			t.Errorf("SubstituteRoute(%.20q) = %q: not a route of its own", c.in, got)
		}
		if again, sub := SubstituteRoute(got); again != got || sub {
			t.Errorf("SubstituteRoute(%q) = %q, %v: not idempotent", got, again, sub)
		}
	}
	if a, _ := SubstituteRoute(long + "1"); a == strings.Repeat("r", 48)+"…#4b7ae0000877ab8f" {
		t.Errorf("two long routes share a stand-in")
	}
}
