package tenant

import (
	"errors"
	"testing"
)

func TestReservedNames(t *testing.T) {
	for _, s := range []string{Untagged, "(other)", "()"} {
		if err := ValidateTenant(s); !errors.Is(err, ErrReserved) {
			t.Errorf("%q: %v, want ErrReserved", s, err)
		}
	}
	for _, s := range []string{"unknown", "(acme", "acme)", "a(b)c", "("} {
		if err := ValidateTenant(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
}
