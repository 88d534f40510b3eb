package tenant

import (
	"errors"
	"strings"
	"testing"
)

// TestParseTierErrorQuotesWhatWasSent: the error names the value as
// sent ("T9", not "9"), and a huge or binary value is cut and escaped,
// since the error may be answered to whoever sent it.
func TestParseTierErrorQuotesWhatWasSent(t *testing.T) {
	for _, c := range []struct {
		in, has string
		most    int
	}{
		{"T9", `"T9"`, 100},
		{"gold", `"gold"`, 100},
		{strings.Repeat("a", 100000), "100000 bytes", 120},
		{strings.Repeat("\x01", 1000), `\\x01`, 120},
	} {
		_, err := ParseTier(c.in)
		if !errors.Is(err, ErrTier) {
			t.Fatalf("ParseTier(%.10q): %v, want ErrTier", c.in, err)
		}
		if msg := err.Error(); !strings.Contains(msg, c.has) || len(msg) > c.most {
			t.Errorf("ParseTier(%.10q): %d-byte error %.200q, want %q within %d bytes", c.in, len(msg), msg, c.has, c.most)
		}
	}
}
