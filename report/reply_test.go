package report

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// samplePolicy is a policy as its package encodes it (compact JSON).
func samplePolicy() json.RawMessage {
	return json.RawMessage(`{"version":3,"rules":[{"id":"r1","tenant":"acme","action":"throttle","ru_per_second":100}]}`)
}

func TestReplyRoundTrip(t *testing.T) {
	for _, want := range []Reply{
		{Accepted: true, Policy: samplePolicy()},
		{Accepted: true},
		{Message: "collector overloaded", RetryAfter: 1500 * time.Millisecond},
	} {
		b, err := EncodeReply(want)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeReply(b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("got %+v, want %+v (json %s)", got, want, b)
		}
	}
}

func TestReplyWire(t *testing.T) {
	b, err := EncodeReply(Reply{Accepted: true, RetryAfter: 2 * time.Second, Message: "ok"})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"accepted":true,"retry_after_seconds":2,"message":"ok"}`; string(b) != want {
		t.Errorf("got %s, want %s", b, want)
	}
}

func TestReplyBad(t *testing.T) {
	if _, err := EncodeReply(Reply{Policy: json.RawMessage(`{"version":`)}); !errors.Is(err, ErrInvalid) {
		t.Errorf("encoding a policy that is not JSON: got %v, want ErrInvalid", err)
	}
	if _, err := EncodeReply(Reply{RetryAfter: -1}); !errors.Is(err, ErrInvalid) {
		t.Errorf("negative retry: got %v, want ErrInvalid", err)
	}
	cases := map[string]struct {
		body string
		want error
	}{
		"empty":       {"", ErrMalformed},
		"html":        {"<html>502 Bad Gateway</html>", ErrMalformed},
		"truncated":   {`{"accepted":tr`, ErrMalformed},
		"two objects": {`{"accepted":true}{}`, ErrMalformed},
		"retry nan":   {`{"retry_after_seconds":-1}`, ErrMalformed},
		"retry huge":  {`{"retry_after_seconds":1e300}`, ErrMalformed},
		"wrong types": {`{"accepted":"yes"}`, ErrMalformed},
		"oversized":   {strings.Repeat(" ", MaxReplyBytes+1), ErrTooLarge},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := DecodeReply([]byte(c.body)); !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
}

func FuzzDecodeReply(f *testing.F) {
	b, _ := EncodeReply(Reply{Accepted: true, Policy: samplePolicy(), RetryAfter: time.Second})
	f.Add(b)
	f.Add([]byte(`{"accepted":false}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeReply(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("error %v wraps no sentinel", err)
			}
			return
		}
		if _, err := EncodeReply(r); err != nil {
			t.Fatalf("decoded reply does not encode: %v", err)
		}
	})
}

// TestPolicyViewWire: the policy view travels in a field of its own, so
// a reply without it is byte for byte what it was, and the report's
// section is u len | tag (golden bytes); a decoder that does not know
// section 5 skips it.
func TestPolicyViewWire(t *testing.T) {
	view := json.RawMessage(`{"version":7,"tag":"00ab","unchanged":true}`)
	b, err := EncodeReply(Reply{Accepted: true, PolicyView: view})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"accepted":true,"policy_view":{"version":7,"tag":"00ab","unchanged":true}}`; string(b) != want {
		t.Fatalf("got %s, want %s", b, want)
	}
	got, err := DecodeReply(b)
	if err != nil || string(got.PolicyView) != string(view) || got.Policy != nil {
		t.Fatalf("%+v %v", got, err)
	}
	if _, err := EncodeReply(Reply{PolicyView: json.RawMessage(`{`)}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a view that is not JSON: %v", err)
	}

	sec, err := PolicyView{Tag: "00ab"}.AppendSection(nil)
	if err != nil || string(sec) != "\x0400ab" {
		t.Fatalf("section % x %v", sec, err)
	}
	if _, err := (PolicyView{Tag: strings.Repeat("x", MaxPolicyTagLen+1)}).AppendSection(nil); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("long tag: %v", err)
	}
	rep := Report{Source: Source{Service: "s", Instance: "i"}, Seq: 1, Start: time.Unix(60, 0), End: time.Unix(61, 0)}
	rep.SetSection(PolicyView{Tag: "00ab"})
	body, err := rep.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	back, err := NewDecoder(PolicyView{}).Decode(body)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := SectionOf[PolicyView](back); !ok || v.Tag != "00ab" {
		t.Fatalf("sections %+v", back.Sections)
	}
	old, err := NewDecoder().Decode(body)
	if err != nil || len(old.Sections) != 0 {
		t.Fatalf("a decoder without section 5: %+v %v", old.Sections, err)
	}
}
