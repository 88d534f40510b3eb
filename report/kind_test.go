package report

import (
	"errors"
	"testing"
)

func TestKind(t *testing.T) {
	for k, name := range map[Kind]string{KindRequest: "request", KindDB: "db", KindJob: "job"} {
		if k.String() != name || !k.Valid() {
			t.Errorf("%d: %q valid %v", k, k.String(), k.Valid())
		}
		for _, s := range []string{name, " " + name + " ", map[string]string{"request": "REQUEST", "db": "DB", "job": "Job"}[name]} {
			got, err := ParseKind(s)
			if err != nil || got != k {
				t.Errorf("ParseKind(%q) = %v, %v", s, got, err)
			}
		}
		b, err := k.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back Kind
		if err := back.UnmarshalText(b); err != nil || back != k {
			t.Errorf("text round trip of %v: %v, %v", k, back, err)
		}
	}
	if Kind(7).Valid() || Kind(7).String() != "Kind(7)" {
		t.Errorf("Kind(7): %q", Kind(7).String())
	}
	if _, err := Kind(7).MarshalText(); !errors.Is(err, ErrInvalid) {
		t.Errorf("MarshalText(Kind(7)): %v", err)
	}
	k := KindDB
	for _, s := range []string{"", "span", "requests"} {
		if _, err := ParseKind(s); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseKind(%q): %v", s, err)
		}
		if err := k.UnmarshalText([]byte(s)); err == nil || k != KindDB {
			t.Errorf("UnmarshalText(%q) changed the kind to %v or did not fail", s, k)
		}
	}
}

func FuzzParseKind(f *testing.F) {
	for _, s := range []string{"request", "db", "job", " DB ", "", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseKind(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v wraps no sentinel", err)
			}
			return
		}
		if back, err := ParseKind(k.String()); err != nil || back != k {
			t.Fatalf("%q parsed as %v, which does not round-trip: %v %v", s, k, back, err)
		}
	})
}
