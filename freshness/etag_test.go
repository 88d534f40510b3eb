package freshness

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func testSigner(t testing.TB) *ETagSigner {
	t.Helper()
	s, err := NewETagSigner([]byte("0123456789abcdef-test-key"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestETagRoundTrip(t *testing.T) {
	s := testSigner(t)
	at := time.Unix(1_700_000_000, 0)
	for _, h := range []uint64{0, 1, 0xdeadbeefcafef00d, ^uint64(0)} {
		e := s.Sign("/balance?account=7", h, at.Add(300*time.Millisecond))
		gotH, gotAt, err := s.Verify("/balance?account=7", e)
		if err != nil || gotH != h || !gotAt.Equal(at) {
			t.Fatalf("Verify(%s) = %x, %v, %v; want %x, %v", e, gotH, gotAt, err, h, at)
		}
		if _, _, err := s.Verify("/balance?account=7", "W/"+e); err != nil {
			t.Errorf("weak form of %s refused: %v", e, err)
		}
		if _, _, err := s.Verify("/balance?account=8", e); !errors.Is(err, ErrETag) {
			t.Errorf("etag accepted for another resource: %v", err)
		}
	}
}

func TestETagForgedAndGarbage(t *testing.T) {
	s := testSigner(t)
	at := time.Unix(1_700_000_000, 0)
	good := s.Sign("/r", 42, at)
	parts := strings.Split(strings.Trim(good, `"`), ".")
	fresher := `"` + strings.Join([]string{parts[0], parts[1], "1800000000", parts[3]}, ".") + `"`
	otherHash := `"` + strings.Join([]string{parts[0], "00000000000000ff", parts[2], parts[3]}, ".") + `"`
	other, _ := NewETagSigner([]byte("another-key-of-the-right-size"))
	for _, tc := range []struct{ name, etag string }{
		{"newer computed-at", fresher},
		{"other hash", otherHash},
		{"signed with another key", other.Sign("/r", 42, at)},
		{"empty", ""},
		{"unquoted", strings.Trim(good, `"`)},
		{"one quote", `"`},
		{"star", "*"},
		{"other scheme", `"abc123"`},
		{"version 2", `"q2.` + strings.Join(parts[1:], ".") + `"`},
		{"short hash", `"q1.abc.` + parts[2] + "." + parts[3] + `"`},
		{"non-hex tag", `"q1.` + parts[1] + "." + parts[2] + ".zzzzzzzzzzzzzzzz" + `"`},
		{"negative time", `"q1.` + parts[1] + ".-5." + parts[3] + `"`},
		{"huge time", `"q1.` + parts[1] + ".99999999999999999999." + parts[3] + `"`},
		{"too long", `"` + strings.Repeat("a", 200) + `"`},
		{"extra field", `"q1.` + strings.Join(parts[1:], ".") + `.x"`},
	} {
		if h, _, err := s.Verify("/r", tc.etag); !errors.Is(err, ErrETag) {
			t.Errorf("%s: Verify(%q) = %x, %v; want ErrETag", tc.name, tc.etag, h, err)
		}
	}
}

func TestETagKeyRotation(t *testing.T) {
	old, _ := NewETagSigner([]byte("the-old-key-0123456"))
	cur, err := NewETagSigner([]byte("the-new-key-0123456"), []byte("the-old-key-0123456"))
	if err != nil {
		t.Fatal(err)
	}
	e := old.Sign("/r", 7, time.Unix(100, 0))
	if h, _, err := cur.Verify("/r", e); err != nil || h != 7 {
		t.Fatalf("etag of the previous key: %x, %v", h, err)
	}
	if _, err := NewETagSigner([]byte("short")); !errors.Is(err, ErrConfig) {
		t.Errorf("short key: %v", err)
	}
	if _, err := NewETagSigner([]byte("long-enough-key-123"), []byte("short")); !errors.Is(err, ErrConfig) {
		t.Errorf("short previous key: %v", err)
	}
}

func TestVerifyIfNoneMatch(t *testing.T) {
	s := testSigner(t)
	e := s.Sign("/r", 9, time.Unix(1000, 0))
	for _, tc := range []struct {
		header string
		ok     bool
	}{
		{e, true},
		{`"x", ` + e, true},
		{`W/"x",` + e + `, "y"`, true},
		{"*", false},
		{`"x", "y"`, false},
		{strings.Repeat(`"x", `, 8) + e, false}, // beyond the 8 entries looked at
		{strings.Repeat(" ", MaxIfNoneMatch) + e, false},
	} {
		got, h, _, ok := s.VerifyIfNoneMatch("/r", tc.header)
		if ok != tc.ok || (ok && (got != e || h != 9)) {
			t.Errorf("VerifyIfNoneMatch(%.40q) = %q, %x, %v; want ok %v", tc.header, got, h, ok, tc.ok)
		}
	}
}

func FuzzETagVerify(f *testing.F) {
	s := testSigner(f)
	f.Add(s.Sign("/r", 1, time.Unix(5, 0)))
	f.Add(`"q1.0000000000000001.5.0000000000000000"`)
	f.Add("W/\"\"")
	f.Fuzz(func(t *testing.T, etag string) {
		h, at, err := s.Verify("/r", etag)
		if err != nil {
			return
		}
		// Whatever verifies carries fields Sign would sign the same way.
		again := s.Sign("/r", h, at)
		if !strings.EqualFold(strings.TrimLeft(strings.TrimPrefix(etag, "W/"), `"`)[:19], strings.Trim(again, `"`)[:19]) {
			t.Fatalf("verified %q, which Sign writes as %q", etag, again)
		}
	})
}

func BenchmarkETagSign(b *testing.B) {
	s := testSigner(b)
	at := time.Unix(1_700_000_000, 0)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_ = s.Sign("/accounts/1234/balance", uint64(i), at)
	}
}

func BenchmarkETagVerify(b *testing.B) {
	s := testSigner(b)
	e := s.Sign("/accounts/1234/balance", 99, time.Unix(1_700_000_000, 0))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := s.Verify("/accounts/1234/balance", e); err != nil {
			b.Fatal(err)
		}
	}
}
