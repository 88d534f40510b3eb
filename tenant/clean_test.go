package tenant

import (
	"strings"
	"testing"
)

func TestClean(t *testing.T) {
	for _, c := range []struct {
		in, want string
		max      int
		changed  bool
	}{
		{"acme", "acme", 128, false},
		{"zürich", "zürich", 128, false},
		{"a\xffb", `a\xffb`, 128, true},
		{"a\x00b", `a\x00b`, 128, true},
		{"a\u200bb", `a\u200bb`, 128, true},
		{"\xfe\xff", `\xfe\xff`, 128, true},
		{"\xfe\xff", `\xfe`, 5, true},
		{strings.Repeat("x", 10), "xxxx", 4, true},
		{"ééé", "éé", 5, true},
	} {
		got, changed := Clean(c.in, c.max)
		if got != c.want || changed != c.changed {
			t.Errorf("Clean(%q, %d) = %q, %v; want %q, %v", c.in, c.max, got, changed, c.want, c.changed)
		}
		if got != "" && ValidateString("v", got, c.max) != nil {
			t.Errorf("Clean(%q) = %q does not validate: %v", c.in, got, ValidateString("v", got, c.max))
		}
	}
	// Distinct binary values stay distinct.
	a, _ := Clean("\x01\x02", 64)
	b, _ := Clean("\x01\x03", 64)
	if a == b {
		t.Fatalf("distinct values cleaned to the same %q", a)
	}
}

func FuzzClean(f *testing.F) {
	f.Add("acme", 16)
	f.Add("\xff\x00é", 3)
	f.Fuzz(func(t *testing.T, s string, max int) {
		if max < 0 || max > 4096 {
			return
		}
		got, _ := Clean(s, max)
		if len(got) > max {
			t.Fatalf("Clean(%q, %d) = %q: too long", s, max, got)
		}
		if got != "" && ValidateString("v", got, max) != nil {
			t.Fatalf("Clean(%q, %d) = %q: %v", s, max, got, ValidateString("v", got, max))
		}
	})
}

func BenchmarkCleanValid(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		Clean("tenant-000123", MaxTenantLen)
	}
}
