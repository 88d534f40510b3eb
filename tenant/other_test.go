package tenant

import "testing"

func TestEscapeOther(t *testing.T) {
	got := Escape(Other)
	if got != "other#d9298a10d1b07358" {
		t.Fatalf("Escape(%q) = %q, want other#d9298a10d1b07358", Other, got)
	}
	if err := ValidateTenant(got); err != nil {
		t.Errorf("the stand-in is not a valid name: %v", err)
	}
	for _, s := range []string{"acme", "Other", "other ", "others", "", got} {
		if e := Escape(s); e != s {
			t.Errorf("Escape(%q) = %q, want it unchanged", s, e)
		}
	}
	if name, sub := Substitute(Other); name != got || sub {
		t.Errorf("Substitute(%q) = %q, %v; want %q, false (escaped, not a bad name)", Other, name, sub, got)
	}
	if n := testing.AllocsPerRun(100, func() { _ = Escape(Other) }); n != 0 {
		t.Errorf("Escape allocates %v times", n)
	}
}

// TestEscapeValue: a value of another grouping named like the overflow
// row has the tenant's stand-in; every other value, a session id's form
// included (not a tenant's), is kept.
func TestEscapeValue(t *testing.T) {
	if got := EscapeValue(Other); got != Escape(Other) {
		t.Fatalf("EscapeValue(%q) = %q, want %q", Other, got, Escape(Other))
	}
	for _, s := range []string{"GET /other", "Other", "", "~abcdefghijkl", Escape(Other)} {
		if e := EscapeValue(s); e != s {
			t.Errorf("EscapeValue(%q) = %q, want it unchanged", s, e)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = EscapeValue(Other) }); n != 0 {
		t.Errorf("EscapeValue allocates %v times", n)
	}
}

func TestEscapeSessionID(t *testing.T) {
	const id = "~abcdefghij23"
	if !IsSessionID(id) {
		t.Fatalf("%q is not an id", id)
	}
	for _, s := range []string{"~abcdefghij2", "~abcdefghij234", "~abcdefghij18", "~ABCDEFGHIJKL", "abcdefghijklm", "~abcdefghij2#"} {
		if IsSessionID(s) {
			t.Errorf("%q taken for an id", s)
		}
		if e := Escape(s); e != s {
			t.Errorf("Escape(%q) = %q, want it unchanged", s, e)
		}
	}
	got := Escape(id)
	if got == id || IsSessionID(got) || ValidateTenant(got) != nil || got[:len(id)+1] != id+"#" {
		t.Errorf("Escape(%q) = %q, want a valid stand-in that is no id", id, got)
	}
	if Escape(got) != got {
		t.Errorf("Escape is not idempotent on %q", got)
	}
	if name, sub := Substitute(id); name != got || sub {
		t.Errorf("Substitute(%q) = %q, %v; want %q, false", id, name, sub, got)
	}
}
